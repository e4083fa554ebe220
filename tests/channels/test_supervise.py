"""The channel supervisor: an adapter that cannot start is reported and retried with
backoff while the others serve; a replaced set of adapters stops the old ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.conftest import PATIENCE
from tests.conversations.helpers import bench
from zeroclaw.channels import (
    ChannelHost,
    ChannelStartFailed,
    ChannelSupervisor,
    retry_delay,
)


class ScriptedAdapter:
    """An adapter whose starts fail `failing` times (as a port in use would), then serve."""

    def __init__(self, key: str, failing: int = 0) -> None:
        self.keys = (key,)
        self.failing = failing
        self.starts = 0
        self.serving = trio.Event()
        self.stopped = trio.Event()

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self.starts += 1
        if self.starts <= self.failing:
            raise ChannelStartFailed(f"127.0.0.1:8787: address already in use ({self.starts})")
        task_status.started()
        self.serving.set()
        try:
            await trio.sleep_forever()
        finally:
            self.stopped.set()


@pytest.mark.parametrize(("failures", "delay"), [(1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0)])
def test_the_retry_delay_doubles_up_to_its_ceiling(failures: int, delay: float) -> None:
    assert retry_delay(failures, 1.0, 60.0) == delay


async def test_a_failing_adapter_is_retried_with_backoff_and_the_others_serve(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    flaky, steady = ScriptedAdapter("webhook.ops", failing=3), ScriptedAdapter("serial.bench")
    async with bench(tmp_path) as b, trio.open_nursery() as nursery:
        supervisor = ChannelSupervisor(ChannelHost(b.service, lambda: b.router.policy))
        await nursery.start(supervisor.run)
        supervisor.replace([flaky, steady])
        await steady.serving.wait()
        started = trio.current_time()
        await flaky.serving.wait()
        await trio.testing.wait_all_tasks_blocked()  # the supervisor has seen it start
        # Three failed starts: 1 + 2 + 4 seconds of backoff before the fourth serves.
        assert trio.current_time() - started == pytest.approx(7.0, abs=0.5)
        record = supervisor.records[0]
        assert (record.state, record.failures, flaky.starts) == ("serving", 0, 4)
        assert "address already in use (3)" in (record.last_error or "")
        supervisor.replace([ScriptedAdapter("webhook.ops")])
        await flaky.stopped.wait()
        await steady.stopped.wait()
        nursery.cancel_scope.cancel()


class SlowToStop(ScriptedAdapter):
    """Its stop ends with a last write that takes a while (a kept state's fsync)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.written = trio.Event()

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await super().serve(host, task_status=task_status)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(PATIENCE):
                await self.written.wait()


async def test_a_replaced_channel_starts_again_once_the_old_one_has_stopped(
    tmp_path: Path,
) -> None:
    """A reload that changes a channel: the new adapter would otherwise read its kept state
    (or bind its port) while the old one still writes it (or holds it)."""
    old, new = SlowToStop("telegram.chat"), ScriptedAdapter("telegram.chat")
    with trio.fail_after(PATIENCE):
        async with supervising(tmp_path) as supervisor:
            supervisor.replace([old])
            await old.serving.wait()
            supervisor.replace([new])
            supervisor.replace([new])  # a second reload meanwhile waits as well
            await old.stopped.wait()
            await trio.testing.wait_all_tasks_blocked()
            try:
                assert new.starts == 0 and supervisor.status()[0].state == "starting"
            finally:
                old.written.set()  # else a failure here would wait for it for ever
            await new.serving.wait()
            assert new.starts == 1


@asynccontextmanager
async def supervising(tmp_path: Path) -> AsyncIterator[ChannelSupervisor]:
    """A running channel supervisor on the turns bench, stopped at the block's end."""
    async with bench(tmp_path) as b, trio.open_nursery() as nursery:
        supervisor = ChannelSupervisor(ChannelHost(b.service, lambda: b.router.policy))
        await nursery.start(supervisor.run)
        yield supervisor
        nursery.cancel_scope.cancel()


class FailsAsItStops(ScriptedAdapter):
    """As it is stopped, one of its tasks fails (a turn's last write on a full disk) while
    the others are cancelled: the error and the cancel come out in one group."""

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._last_write)
            await super().serve(host, task_status=task_status)

    async def _last_write(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise ChannelStartFailed("matrix.home: cannot write state.json (the disk is full)")


async def test_a_channel_that_fails_as_a_reload_stops_it_takes_down_nothing_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its error came out of the supervisor (its task's cancel and the error in one group),
    which ended the daemon's channels for good."""
    old, new = FailsAsItStops("matrix.home"), ScriptedAdapter("matrix.home")
    with trio.fail_after(PATIENCE):
        async with supervising(tmp_path) as supervisor:
            supervisor.replace([old])
            await old.serving.wait()
            supervisor.replace([new])
            await new.serving.wait()
            await trio.testing.wait_all_tasks_blocked()  # the supervisor has seen it start
            assert supervisor.status()[0].state == "serving"
    assert "failed as it stopped: matrix.home: cannot write state.json" in caplog.text
