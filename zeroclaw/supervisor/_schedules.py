"""Scheduled turns in the daemon (issue 28), loaded when the config first has any (ADR 0067):
a schedule or a heartbeat of an agent, or a risk profile that grants the reminder tools.

Until then no scheduler runs and nothing of `zeroclaw.schedules` but its store (which the
daemon opens, and refuses when damaged, at every start) is imported: `zeroclaw schedules`
answers as for a daemon with none, and an agent's `schedule` bus request is refused
`unknown_service`. The reload that brings the first one starts the schedule service, which
then stays for the daemon's life (a later reload that removes every schedule leaves it with
none, as it always did).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..bus import Origin, Response
from ..bus import Request as BusRequest
from ..channels import ChannelHost, Scheduled
from ..config import Config
from ..control import (
    CommandTable,
    Exchange,
    Reply,
    SchedulePause,
    ScheduleRequest,
    ScheduleResume,
    ScheduleRun,
    ScheduleShow,
    SchedulesList,
    SchedulesReply,
    error_reply,
)
from ..events import EventSink, ReloadApplied, Subscription
from ..turns import ApprovalLedger

if TYPE_CHECKING:
    from ..schedules import ReminderService, ScheduleService, ScheduleStore

log = logging.getLogger("zeroclaw.schedules")

# Where a run's outcome goes (the channel supervisor's push): None once delivered, else why.
Push = Callable[[str, Scheduled], Awaitable[str | None]]


def schedules_configured(config: Config) -> bool:
    """Whether `config` has anything for the scheduler: a schedule or heartbeat of an agent,
    or a risk profile that gives agents the reminder tools."""
    return any(a.schedules or a.heartbeat is not None for a in config.agents.values()) or any(
        p.reminders is not None for p in config.risk_profiles.values()
    )


class Schedules:
    """`name` and `run(task_status=)`: a service of the daemon's table (ADR 0050) that runs
    the schedule service and the reminders once the config has schedules."""

    name = "schedules"

    def __init__(
        self,
        store: ScheduleStore,
        *,
        config: Callable[[], Config],
        host: ChannelHost,
        push: Push,
        events: EventSink,
        workspace: Callable[[str], Path],
        ready: trio.Event,
        turn_of: Callable[[str], tuple[str, Origin] | None],
        grant: Callable[[str, Origin], Collection[str] | None],
        approvals: ApprovalLedger,
    ) -> None:
        self._store = store
        self._config = config
        self._host = host
        self._push = push
        self._events = events
        self._workspace = workspace
        self._ready = ready
        self._turn_of = turn_of
        self._grant = grant
        self._approvals = approvals
        self.service: ScheduleService | None = None
        self.reminders: ReminderService | None = None
        self.commands = CommandTable()  # the schedule service's own, once it runs
        # Subscribed now, not when `run` starts: no reload in between is missed.
        self._reloads: Subscription = events.subscribe(kinds=(ReloadApplied,))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            with self._reloads as reloads:
                if schedules_configured(self._config()):
                    await self._start(nursery)
                task_status.started()
                if self.service is None:
                    async for published in reloads:
                        event = published.event
                        if (
                            isinstance(event, ReloadApplied)
                            and event.outcome != "reload_failed"
                            and schedules_configured(self._config())
                        ):
                            try:
                                await self._start(nursery)
                            except Exception:  # a reload's failure, never the daemon's
                                log.exception("schedules: the scheduler did not start")
                                continue  # the next applied reload tries again
                            break
            # The subscription ends here; the schedule service, if any, runs on.

    async def _start(self, nursery: trio.Nursery) -> None:
        from ..schedules import ReminderService, ScheduleService, register_schedule_commands

        service = ScheduleService(
            self._store,
            config=self._config,
            host=self._host,
            push=self._push,
            events=self._events,
            workspace=self._workspace,
            ready=self._ready,
        )
        await nursery.start(service.run)
        # Agents' own reminders (issue 28): made in a turn the turn service opened, with the
        # approvals the daemon saw given (ADR 0052), kept by the schedule service.
        self.reminders = ReminderService(
            config=self._config,
            turn_of=self._turn_of,
            grant=self._grant,
            approvals=self._approvals,
            schedules=service,
        )
        register_schedule_commands(self.commands, service)
        self.service = service

    # --- what the rest of the daemon reads --------------------------------------------------

    async def serve(self, sender: str, request: BusRequest) -> Response:
        """An agent's `schedule` bus request (its reminder tools)."""
        if self.reminders is None:
            return Response(id=request.id, ok=False, error="unknown_service")
        return await self.reminders.serve(sender, request)

    def next_fires(self) -> dict[str, tuple[str, float]]:
        return {} if self.service is None else self.service.next_fires()

    def counts(self) -> Counter[tuple[str, str]]:
        return Counter() if self.service is None else self.service.counts

    def per_agent(self) -> dict[str, int]:
        return {} if self.service is None else self.service.per_agent()

    def register_commands(self, table: CommandTable) -> None:
        """Every `zeroclaw schedules` control command in the daemon's `table`: the schedule
        service's own once it runs; before, what a daemon without schedules answers."""
        table.register(SchedulesList, self._command)
        table.register(ScheduleShow, self._command)
        table.register(ScheduleRun, self._command)
        table.register(SchedulePause, self._command)
        table.register(ScheduleResume, self._command)

    async def _command(self, request: ScheduleRequest, exchange: Exchange) -> Reply:
        handler = self.commands.handler(type(request))
        if handler is not None:
            return await handler(request, exchange)
        if isinstance(request, SchedulesList):
            return Reply(ok=True, data=SchedulesReply([]))
        name = request.name
        if "." in name:
            return error_reply("unknown_schedule", f"no schedule {name[:80]!r}")
        return error_reply("unknown_schedule", f"no schedule named {name[:80]!r}")

