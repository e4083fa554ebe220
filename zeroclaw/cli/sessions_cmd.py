"""`zeroclaw sessions list [--agent A] [--json]` and `zeroclaw sessions show SESSION --agent A
[--json]`: the operator reads every stored session of every origin (ADR 0041).

Through the daemon when one runs; otherwise straight on the store, under the daemon's
lock (as `memory` does). A transcript is model and outside text: printed escaped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import click
import msgspec

from ..control import ControlErrorCode, Request, SessionShow, SessionsList
from ._app import cli
from ._common import (
    EXIT_FAILED,
    EXIT_NO_DAEMON,
    EXIT_USAGE,
    CliError,
    emit_json,
    fallback,
    json_option,
    plural,
    safe_echo,
    state,
    wants_json,
)
from .daemon_cmd import DaemonRefused, call, control_client

if TYPE_CHECKING:
    from ..memory import MemoryService

R = TypeVar("R")
# What answers a request on the store itself when no daemon runs: (service, known agents).
Direct = Callable[["MemoryService", frozenset[str]], Awaitable[R]]

_USAGE_CODES: frozenset[ControlErrorCode] = frozenset(
    {"unknown_agent", "bad_request", "session_not_found"}
)


def _ask(request: Request[R], direct: Direct[R]) -> R:
    """The request's reply data, through the daemon or (none running) `direct` on the store."""
    try:
        reply = call(request)
    except CliError as exc:
        if exc.exit_code != EXIT_NO_DAEMON or isinstance(exc, DaemonRefused):
            raise
        return _direct(direct)
    if not reply.ok:
        code = EXIT_USAGE if reply.error in _USAGE_CODES else EXIT_FAILED
        raise CliError(f"{reply.error}: {reply.message}", code, code=reply.error)
    if reply.data is None:
        raise CliError("the daemon's reply carried no data", EXIT_FAILED)
    return reply.data


def _direct(direct: Direct[R]) -> R:
    from .memory_cmd import with_memory

    _path, config = state().load()
    runtime_dir = control_client().runtime_dir
    fallback(
        "store",
        f"no daemon answers on {runtime_dir}",
        f"no daemon answers on {runtime_dir}; read the memory store directly",
        runtime_dir=str(runtime_dir),
    )
    known = frozenset(config.agents)
    try:
        return with_memory(config, lambda service: direct(service, known))
    except CliError as exc:
        if exc.code in _USAGE_CODES:  # the same exit as through the daemon
            raise CliError(str(exc), EXIT_USAGE, code=exc.code) from None
        raise


def _when(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


@cli.group("sessions")
def sessions_group() -> None:
    """Every agent's stored sessions, of every origin (operator, channel senders, peers)."""


@sessions_group.command("list")
@click.option("--agent", "-a", "agent", metavar="ALIAS", help="Only this agent's sessions.")
@json_option
def list_cmd(agent: str | None, as_json: bool) -> None:
    """Every stored session: agent, origin kind, who, turns, last change, key."""
    from ..memory import list_sessions

    listed = _ask(SessionsList(agent=agent), lambda svc, known: list_sessions(svc, known, agent))
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(listed))
        return
    if not listed.sessions:
        click.echo("no sessions")
        return
    for s in listed.sessions:
        safe_echo(
            f"{s.agent}  {s.kind:<8}  {s.who}  {plural(s.turns, 'turn')}  "
            f"{_when(s.last_at)}  {s.session}"
        )


@sessions_group.command("show")
@click.argument("session")
@click.option("--agent", "-a", "agent", metavar="ALIAS", help="The agent whose session it is.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=200, show_default=True)
@json_option
def show_cmd(session: str, agent: str | None, limit: int, as_json: bool) -> None:
    """The last LIMIT turns of SESSION (a key as `sessions list` prints it), oldest first."""
    alias = agent or state().agent
    if not alias:
        raise CliError("which agent? pass --agent ALIAS (or the global -a ALIAS)", EXIT_USAGE)
    from ..memory import show_session

    shown = _ask(
        SessionShow(agent=alias, session=session, limit=limit),
        lambda svc, known: show_session(svc, known, alias, session, limit),
    )
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(shown))
        return
    info = shown.session
    safe_echo(f"{info.agent} {info.session}: {info.kind} {info.who}, {plural(info.turns, 'turn')}")
    if (kept := shown.summary) is not None:
        safe_echo(
            f"[{_when(kept.at)}] summary of turns {kept.first_seq}-{kept.through_seq} "
            f"({plural(kept.turns, 'turn')} compacted): {kept.summary}"
        )
    for turn in shown.turns:
        safe_echo(f"[{_when(turn.at)}] {turn.role}: {turn.content}")
