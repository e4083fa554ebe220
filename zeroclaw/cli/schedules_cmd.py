"""`zeroclaw schedules list|show|run|pause|resume`: the daemon's scheduled turns (issue 28).

A schedule is `<agent>.<name>` (a bare name is enough when only one agent has it): the
config's `[agents.<a>.schedules.<name>]`, an agent's `heartbeat`, or a reminder the agent
made itself (`reminder-<n>`). They need the daemon: it keeps their times and runs.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

import click
import msgspec

from .._terminal import terminal_safe
from ..control import (
    Reply,
    ScheduleInfo,
    SchedulePause,
    ScheduleResume,
    ScheduleRun,
    ScheduleShow,
    SchedulesList,
)
from ._app import cli
from ._common import CliError, emit_json, json_option, safe_echo, wants_json
from .daemon_cmd import call

D = TypeVar("D")


def _data(reply: Reply[D], what: str) -> D:
    if not reply.ok or reply.data is None:
        raise CliError(f"{what} failed ({reply.error}): {reply.message}", code=reply.error)
    return reply.data


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).isoformat(timespec="seconds")


def _state(info: ScheduleInfo) -> str:
    if not info.enabled:
        return "disabled"
    if info.paused:
        return "paused"
    return "running" if info.running else "waiting"


def _line(info: ScheduleInfo) -> str:
    last = "-" if info.last_run is None else info.last_run.outcome
    return (
        f"{info.agent}.{info.name}  {info.kind}  {info.trigger}  -> {info.deliver_to}  "
        f"{_state(info)}  next {_when(info.next_fire)}  last {last}"
    )


@cli.group("schedules")
def schedules_group() -> None:
    """Scheduled turns: configured, heartbeats and agents' reminders; run, pause, resume."""


@schedules_group.command("list")
@click.option("--agent", "-a", "agent", metavar="ALIAS", help="Only this agent's schedules.")
@json_option
def schedules_list(agent: str | None, as_json: bool) -> None:
    """Every schedule: its agent and name, kind, times, where its replies go, whether it
    waits, runs or is paused, its next time and how its last run ended."""
    data = _data(call(SchedulesList(agent)), "schedules list")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    if not data.schedules:
        click.echo("no schedules ([agents.<alias>.schedules.<name>] in the config)")
    for info in data.schedules:
        safe_echo(terminal_safe(_line(info), one_line=True))


def _show(info: ScheduleInfo) -> None:
    safe_echo(terminal_safe(_line(info), one_line=True))
    for label, value in (
        ("text", info.text),
        ("session", info.session),
        ("tools", ", ".join(info.tools or []) or "none"),
        ("overlap", info.overlap),
        ("catch_up", info.catch_up),
        ("jitter", f"{info.jitter_secs:g}s" if info.jitter_secs is not None else None),
        ("timeout", f"{info.timeout_secs:g}s" if info.timeout_secs is not None else None),
        ("made by", info.created_by),
        ("running", info.running),
        ("queued", _when(info.queued) if info.queued is not None else None),
    ):
        if value:
            safe_echo(f"  {label}: {terminal_safe(str(value), one_line=True)}")
    last = info.last_run
    if last is not None:
        detail = f" ({terminal_safe(last.detail, one_line=True)})" if last.detail else ""
        safe_echo(f"  last run: {last.run_id} {last.outcome} at {_when(last.ended_at)}{detail}")


@schedules_group.command("show")
@click.argument("name")
@json_option
def schedules_show(name: str, as_json: bool) -> None:
    """One schedule, NAME as `<agent>.<name>`: everything list says, its text, session,
    tools and bounds, and its last run."""
    data = _data(call(ScheduleShow(name)), "schedules show")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    _show(data)


@schedules_group.command("run")
@click.argument("name")
@json_option
def schedules_run(name: str, as_json: bool) -> None:
    """Run schedule NAME now, outside its times (refused while its last run still runs);
    its reply goes where its runs' go. Follow it with `zeroclaw events --kind schedule`."""
    data = _data(call(ScheduleRun(name)), "schedules run")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    safe_echo(f"started {data.run_id}")


@schedules_group.command("pause")
@click.argument("name")
@json_option
def schedules_pause(name: str, as_json: bool) -> None:
    """Stop schedule NAME's runs until resumed (kept across restarts and reloads); a run
    queued behind the current one is dropped."""
    data = _data(call(SchedulePause(name)), "schedules pause")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    safe_echo(terminal_safe(_line(data), one_line=True))


@schedules_group.command("resume")
@click.argument("name")
@json_option
def schedules_resume(name: str, as_json: bool) -> None:
    """Run schedule NAME again from its next time; what passed while it was paused is not
    caught up."""
    data = _data(call(ScheduleResume(name)), "schedules resume")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    safe_echo(terminal_safe(_line(data), one_line=True))
