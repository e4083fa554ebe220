"""The control commands of `zeroclaw schedules list|show|run|pause|resume`: one handler class
per request, each built with the daemon's `ScheduleService` and calling only it.
`register_schedule_commands` puts them in the daemon's command table in one line."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from ..control import (
    CommandTable,
    ControlErrorCode,
    Exchange,
    HandlerEntry,
    Reply,
    ScheduleInfo,
    SchedulePause,
    ScheduleResume,
    ScheduleRun,
    ScheduleRunInfo,
    ScheduleRunReply,
    ScheduleShow,
    SchedulesList,
    SchedulesReply,
    error_reply,
)
from ._machine import Fire, Pause, Refused, Resume, RunNow
from ._service import ScheduleService, describe
from ._spec import ScheduleView


def schedule_info(view: ScheduleView, *, detail: bool = False) -> ScheduleInfo:
    spec, mark, last = view.spec, view.mark, view.last_run
    info = ScheduleInfo(
        spec.agent,
        spec.name,
        spec.kind,
        describe(spec),
        spec.deliver_to,
        spec.enabled,
        mark.paused,
        view.next_fire,
        None if mark.running is None else mark.running.run_id,
        mark.queued,
        None
        if last is None
        else ScheduleRunInfo(last.run_id, last.outcome, last.ended_at, last.detail, last.slot),
    )
    if not detail:
        return info
    return msgspec.structs.replace(
        info,
        text=spec.text if spec.kind != "heartbeat" else "(the open items of HEARTBEAT.md)",
        session=spec.session,
        tools=list(spec.tools),
        overlap=spec.overlap,
        catch_up=spec.catch_up,
        jitter_secs=spec.jitter,
        timeout_secs=spec.timeout,
        created_by=spec.created_by,
    )


class _NoSuch(Exception):
    """The name names no schedule (or several): the reply's code and message."""

    def __init__(self, code: ControlErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _resolve(schedules: ScheduleService, name: str) -> str:
    """`<agent>.<name>`, or a bare name only one agent has: the key; else _NoSuch."""
    if "." in name:
        if schedules.view(name) is None:
            raise _NoSuch("unknown_schedule", f"no schedule {name[:80]!r}")
        return name
    found = [v.spec.key for v in schedules.views() if v.spec.name == name]
    if not found:
        raise _NoSuch("unknown_schedule", f"no schedule named {name[:80]!r}")
    if len(found) > 1:
        raise _NoSuch(
            "ambiguous_schedule",
            f"{name!r} is a schedule of several agents; name one: {', '.join(found)}",
        )
    return found[0]


def _refused(refused: Refused) -> _NoSuch:
    if refused.reason == "schedule_running":
        return _NoSuch(
            "schedule_running", f"schedule {refused.key} is running; try when its run ended"
        )
    return _NoSuch("unknown_schedule", f"no schedule {refused.key!r}")


class SchedulesListCommand:
    def __init__(self, schedules: ScheduleService) -> None:
        self._schedules = schedules

    async def __call__(self, request: SchedulesList, exchange: Exchange) -> Reply[SchedulesReply]:
        views = self._schedules.views(request.agent)
        return Reply(ok=True, data=SchedulesReply([schedule_info(v) for v in views]))


class ScheduleShowCommand:
    def __init__(self, schedules: ScheduleService) -> None:
        self._schedules = schedules

    async def __call__(self, request: ScheduleShow, exchange: Exchange) -> Reply[ScheduleInfo]:
        try:
            key = _resolve(self._schedules, request.name)
        except _NoSuch as exc:
            return error_reply(exc.code, exc.message)
        view = self._schedules.view(key)
        assert view is not None
        return Reply(ok=True, data=schedule_info(view, detail=True))


class ScheduleRunCommand:
    def __init__(self, schedules: ScheduleService) -> None:
        self._schedules = schedules

    async def __call__(self, request: ScheduleRun, exchange: Exchange) -> Reply[ScheduleRunReply]:
        try:
            key = _resolve(self._schedules, request.name)
            done = await self._schedules.command(RunNow(key, self._schedules.now()))
            if isinstance(done, Refused):
                raise _refused(done)
        except _NoSuch as exc:
            return error_reply(exc.code, exc.message)
        fire = next(a for a in done if isinstance(a, Fire))
        return Reply(ok=True, data=ScheduleRunReply(key, fire.run_id))


class _Toggle:
    def __init__(self, schedules: ScheduleService, pause: bool) -> None:
        self._schedules = schedules
        self._pause = pause

    async def __call__(
        self, request: SchedulePause | ScheduleResume, exchange: Exchange
    ) -> Reply[ScheduleInfo]:
        try:
            key = _resolve(self._schedules, request.name)
            event = Pause(key) if self._pause else Resume(key, self._schedules.now())
            done = await self._schedules.command(event)
            if isinstance(done, Refused):
                raise _refused(done)
        except _NoSuch as exc:
            return error_reply(exc.code, exc.message)
        view = self._schedules.view(key)
        assert view is not None
        return Reply(ok=True, data=schedule_info(view, detail=True))


class SchedulePauseCommand(_Toggle):
    def __init__(self, schedules: ScheduleService) -> None:
        super().__init__(schedules, pause=True)


class ScheduleResumeCommand(_Toggle):
    def __init__(self, schedules: ScheduleService) -> None:
        super().__init__(schedules, pause=False)


def schedule_handlers(schedules: ScheduleService) -> Iterator[HandlerEntry]:
    yield SchedulesList, SchedulesListCommand(schedules)
    yield ScheduleShow, ScheduleShowCommand(schedules)
    yield ScheduleRun, ScheduleRunCommand(schedules)
    yield SchedulePause, SchedulePauseCommand(schedules)
    yield ScheduleResume, ScheduleResumeCommand(schedules)


def register_schedule_commands(table: CommandTable, schedules: ScheduleService) -> CommandTable:
    """Put every `zeroclaw schedules` control command in `table` (the daemon's one line)."""
    for request_type, handler in schedule_handlers(schedules):
        table.register(request_type, handler)
    return table
