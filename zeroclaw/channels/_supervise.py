"""Keeps every channel adapter serving: an adapter that cannot start (a port in use, a
device missing) or that fails later is reported (log, `status`) and started again with
exponential backoff. It never takes the daemon down, and the other channels serve on."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import trio

from ..control import ChannelStatus
from ._adapter import ChannelAdapter
from ._host import ChannelHost
from ._types import Scheduled

log = logging.getLogger("zeroclaw.channels")

BACKOFF_INITIAL_SECS = 1.0
BACKOFF_MAX_SECS = 60.0
SLOW_STOP_SECS = 10.0  # a reload's wait for the replaced channels to stop, before it says so

AdapterState = Literal["starting", "serving", "failed", "stopped"]


def retry_delay(failures: int, initial: float, ceiling: float) -> float:
    """Seconds before the next start after `failures` failures in a row (pure)."""
    return float(min(ceiling, initial * 2 ** max(0, failures - 1)))


@dataclass
class AdapterRecord:
    """What `status` shows of one adapter."""

    keys: tuple[str, ...]
    state: AdapterState = "starting"
    failures: int = 0  # in a row; a start that serves clears it
    last_error: str | None = None
    since: float = field(default_factory=time.time)
    retry_at: float | None = None  # wall clock of the next start, when failed


def _reason(exc: BaseException) -> str:
    """What an adapter died of, for a person: the errors inside a nursery's group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(inner) for inner in exc.exceptions)
    return str(exc) or type(exc).__name__


class ChannelSupervisor:
    def __init__(
        self,
        host: ChannelHost,
        *,
        backoff_initial: float = BACKOFF_INITIAL_SECS,
        backoff_max: float = BACKOFF_MAX_SECS,
    ) -> None:
        self.host = host
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.records: list[AdapterRecord] = []
        self._adapters: list[ChannelAdapter] = []
        self._scope: trio.CancelScope | None = None
        self._stopped: trio.Event | None = None  # set once the current set has stopped
        self._nursery: trio.Nursery | None = None

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def status(self) -> list[ChannelStatus]:
        statuses = []
        for r in self.records:
            delivered, refused = self.host.counts(r.keys)
            statuses.append(
                ChannelStatus(
                    list(r.keys),
                    r.state,
                    r.failures,
                    r.last_error,
                    r.since,
                    r.retry_at,
                    delivered,
                    refused,
                )
            )
        return statuses

    async def push(self, key: str, scheduled: Scheduled) -> str | None:
        """Send a scheduled run's outcome out on channel `key` through the adapter serving
        it: None once delivered, else why not."""
        for adapter, record in zip(self._adapters, self.records, strict=True):
            if key in record.keys:
                if record.state != "serving":
                    return f"channel {key} is {record.state}" + (
                        f" ({record.last_error})" if record.last_error else ""
                    )
                return await adapter.push(key, scheduled)
        return f"channel {key} is not served (does the agent still bind it?)"

    def replace(self, adapters: Sequence[ChannelAdapter]) -> None:
        """Serve these adapters instead of the current ones (at start, and on a reload
        that changed the channels)."""
        assert self._nursery is not None, "ChannelSupervisor.run is not running"
        if self._scope is not None:
            self._scope.cancel()
        scope = self._scope = trio.CancelScope()
        self.records = [AdapterRecord(tuple(a.keys)) for a in adapters]
        self._adapters = list(adapters)
        replaced, stopped = self._stopped, trio.Event()
        self._stopped = stopped
        self._nursery.start_soon(
            self._serve_all, scope, list(adapters), self.records, replaced, stopped
        )

    async def _serve_all(
        self,
        scope: trio.CancelScope,
        adapters: list[ChannelAdapter],
        records: list[AdapterRecord],
        replaced: trio.Event | None,
        stopped: trio.Event,
    ) -> None:
        try:
            # The set replaced stops first (a later replace does not cut this wait): its
            # listeners' ports are free, and its last write of a kept state (in a worker
            # thread, which a cancel waits for) is on disk before a new adapter reads it.
            if replaced is not None:
                with trio.move_on_after(SLOW_STOP_SECS):
                    await replaced.wait()
                if not replaced.is_set():
                    log.warning(
                        "channels: the replaced channels are still stopping after %gs; "
                        "the new ones start when they have",
                        SLOW_STOP_SECS,
                    )
                    await replaced.wait()
            with scope:
                async with trio.open_nursery() as nursery:
                    for adapter, record in zip(adapters, records, strict=True):
                        nursery.start_soon(self._keep, adapter, record)
        except Exception as exc:
            # An adapter that failed as it was stopped (a last write on a full disk): its
            # error, logged; the supervisor, and the channels that replace it, serve on.
            log.error("channels: a replaced channel failed as it stopped: %s", _reason(exc))
        finally:
            stopped.set()

    async def _keep(self, adapter: ChannelAdapter, record: AdapterRecord) -> None:
        name = ", ".join(record.keys)
        while True:
            record.state, record.since, record.retry_at = "starting", time.time(), None
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(functools.partial(adapter.serve, self.host))
                    record.state, record.since, record.failures = "serving", time.time(), 0
                    log.info("channel %s serving", name, extra={"channels": list(record.keys)})
            except Exception as exc:  # whatever an adapter dies of is its own failure
                record.failures += 1
                record.last_error = _reason(exc)
                delay = retry_delay(record.failures, self.backoff_initial, self.backoff_max)
                record.state, record.since = "failed", time.time()
                record.retry_at = record.since + delay
                log.error(
                    "channel %s failed: %s; next start in %gs",
                    name,
                    record.last_error,
                    delay,
                    extra={"channels": list(record.keys), "failures": record.failures},
                )
                await trio.sleep(delay)
                continue
            record.state, record.since = "stopped", time.time()
            log.info("channel %s stopped", name, extra={"channels": list(record.keys)})
            return
