"""The daemon's service table (ADR 0050): every registered service is started in order and
stopped in reverse, one failing to start stops those before it, a new one is a single
`register`; and `run_daemon` releases whatever it acquired when a later acquisition fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import trio

from tests.conftest import REPO
from tests.supervisor.harness import agent_entry, make_config
from tests.supervisor.test_daemon import DaemonFactory
from zeroclaw.supervisor._services import Background, DuplicateService, Services, Started

# The daemon's table, in the order it registers it (no WATCHDOG_USEC: no watchdog).
DAEMON_SERVICES = [
    "zygote",
    "metrics",
    "metrics listener",
    "control",
    "router",
    "memory",
    "usage",
    "agents",
    "runtimes",
    "subagents",
    "channels",
    "channel adapters",
    "discovery",
    "schedules",
]


class Boom(Exception):
    pass


class Recorded:
    """A tiny service of the test's own, registered as the daemon registers its own: it
    says when it started and when it stopped, after one more checkpoint (shielded: a
    service stopped while it still stops would show as out of order)."""

    def __init__(self, name: str, seen: list[str], *, fail_at_start: bool = False) -> None:
        self.name = name
        self._seen = seen
        self._fail = fail_at_start

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        if self._fail:
            raise Boom(self.name)
        self._seen.append(f"start {self.name}")
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.lowlevel.checkpoint()
            self._seen.append(f"stop {self.name}")


def table(seen: list[str], *names: str, failing: str = "") -> Services:
    services = Services()
    for name in names:
        services.register(Recorded(name, seen, fail_at_start=name == failing))
    return services


async def test_every_service_starts_in_order_and_stops_in_reverse() -> None:
    seen: list[str] = []
    async with table(seen, "a", "b", "c").running():
        seen.append("serving")
    assert seen == ["start a", "start b", "start c", "serving", "stop c", "stop b", "stop a"]


async def test_a_service_that_fails_to_start_stops_the_ones_started_before_it() -> None:
    seen: list[str] = []
    with pytest.raises(ExceptionGroup) as caught:
        async with table(seen, "a", "b", "c", failing="c").running():
            seen.append("serving")  # never: the table did not start
    assert caught.group_contains(Boom, depth=None)
    assert seen == ["start a", "start b", "stop b", "stop a"]


async def test_a_service_that_fails_later_stops_every_other_one_in_reverse() -> None:
    seen: list[str] = []
    failed = trio.Event()

    async def fails() -> None:
        await failed.wait()
        raise Boom("later")

    services = table(seen, "a", "b")
    services.register(Background("fails", fails))
    services.register(Recorded("c", seen))

    async def serve() -> None:
        async with services.running():
            seen.append("serving")
            failed.set()
            await trio.sleep_forever()  # cancelled by the failure

    with pytest.raises(ExceptionGroup) as caught:
        await serve()
    assert caught.group_contains(Boom, depth=None)
    assert seen == ["start a", "start b", "start c", "serving", "stop c", "stop b", "stop a"]


async def test_one_registration_is_all_a_new_service_takes() -> None:
    """The test's own service class beside the two adapters the daemon uses: registered,
    it runs with the others and stops with them."""
    seen: list[str] = []
    ran: list[str] = []

    async def started(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        ran.append("started")
        task_status.started()
        await trio.sleep_forever()

    async def background() -> None:
        ran.append("background")
        await trio.sleep_forever()

    services = Services()
    services.register(Started("started", started))
    services.register(Background("background", background))
    services.register(Recorded("schedules", seen))
    assert services.names() == ["started", "background", "schedules"]
    async with services.running():
        assert seen == ["start schedules"]
        assert ran == ["started", "background"]
    assert seen == ["start schedules", "stop schedules"]


def test_a_name_is_registered_once() -> None:
    services = Services()
    services.register(Recorded("router", []))
    with pytest.raises(DuplicateService, match="router"):
        services.register(Recorded("router", []))


def service_lines(log_text: str) -> list[str]:
    lines = []
    for line in log_text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("logger") == "zeroclaw.daemon" and "service" in record:
            lines.append(record["msg"])
    return lines


def test_the_daemon_starts_each_service_of_its_table_and_stops_them_in_reverse(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()})).start()
    assert daemon.cli("stop").returncode == 0
    assert daemon.wait_exit() == 0
    assert service_lines(daemon.log_text()) == [
        *(f"service {name} started" for name in DAEMON_SERVICES),
        *(f"service {name} stopped" for name in reversed(DAEMON_SERVICES)),
    ]


RELEASED = """
import json, os, sys
from pathlib import Path
from zeroclaw.memory import MemoryLock
from zeroclaw.supervisor import DaemonError, run_daemon
from zeroclaw.supervisor._control_server import bind_control_socket
from zeroclaw.supervisor._lock import PidLock

from zeroclaw.config import ConfigError

config, runtime, state = map(Path, sys.argv[1:4])
fds = sorted(os.listdir("/proc/self/fd"))
try:
    run_daemon(config, dict(os.environ))
    error = None
except (DaemonError, ConfigError) as exc:
    error = str(exc)
fds_left = sorted(set(os.listdir("/proc/self/fd")) - set(fds))
try:
    os.waitpid(-1, os.WNOHANG)
    children = True
except ChildProcessError:
    children = False  # the zygote was forked, then reaped
PidLock(runtime / "zeroclaw.lock").acquire()  # refused while the daemon's fd held it
MemoryLock(state / "memory.lock", timeout=0.1).acquire()
bind_control_socket(runtime).close()  # ControlNameTaken while the listener was open
print(json.dumps({
    "error": error,
    "children": children,
    "fds_left": fds_left,
}))
"""


def released(root: Path, config: Path) -> dict[str, Any]:
    """What `run_daemon` on `config` left behind once refused (RELEASED, in a child)."""
    result = subprocess.run(
        [sys.executable, "-c", RELEASED, str(config), str(root / "run"), str(root / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(root)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


def test_a_refused_config_leaves_no_zygote_and_no_descriptor(root: Path) -> None:
    """The zygote starts before the config is read (ADR 0067): a config refused after that
    kills it (it has forked nothing) and leaves nothing open."""
    doc = make_config(root, {"alpha": agent_entry(model_provider="offline.missing")})
    config = root / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(doc))
    for made in ("run", "state"):  # refused before it makes them; the probe locks in them
        (root / made).mkdir(mode=0o700)
    report = released(root, config)
    assert report["error"] is not None and "offline.missing" in report["error"], report
    assert report["children"] is False, report
    assert report["fds_left"] == [], report


@pytest.mark.parametrize("which", ["subagents", "schedules"])
def test_a_corrupt_store_releases_everything_acquired_before_it(root: Path, which: str) -> None:
    """The sub-agent store and the schedule store are the last things run_daemon opens:
    either refused, the pid lock, the control socket, the memory lock, the zygote and the
    memory store (and the sub-agent store) are gone after."""
    config = root / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(make_config(root, {"alpha": agent_entry()})))
    store = root / "state" / which
    store.mkdir(parents=True)
    (store / "data.mdb").write_bytes(b"")  # an empty data file: refused as damaged
    report = released(root, config)
    assert report["error"] is not None and f"mv {store}" in report["error"], report
    assert report["children"] is False, report
    assert report["fds_left"] == [], report
