"""`zeroclaw events [--follow] [--json] [--agent A] [--kind K] [--limit N]`: what the daemon
did (agent transitions, routing refusals, reloads, memory operations), from its event sink.

Without `--follow`: the matching events the daemon kept (its ring), oldest first, then exit.
With `--follow`: the newest 10 of those (or `--limit N`), then each new one as it happens,
until Ctrl-C (exit 130, quietly) or the daemon stops (exit 3). A reader that does not keep up
is cut off by the daemon (`slow_reader`, exit 1) rather than slowing it down.

`--json` prints JSON Lines: one object per event, each with `schema_version`, `seq`, `at`
(epoch seconds) and `event` (its `kind` and fields), flushed as it comes so scripts can stream.
Exit codes: 0 ok; 1 cut off or refused; 2 bad usage (an unknown kind); 3 no daemon.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

import click

from .._terminal import terminal_safe
from ..control import DaemonUnreachable, EventsFollow, EventsReply, Reply, UntrustedDaemon
from ..events import Published
from ..ops import KIND_NAMES, event_json, event_line, unknown_kinds
from ._app import cli
from ._common import (
    EXIT_FAILED,
    EXIT_NO_DAEMON,
    EXIT_USAGE,
    SCHEMA_VERSION,
    CliError,
    json_option,
    state,
    wants_json,
)
from .daemon_cmd import REFUSALS, DaemonRefused, control_client, no_daemon, refusal_error

FOLLOW_BACKLOG = 10  # like `tail -f`: some context before the live events
EXIT_INTERRUPTED = 130


@cli.command("events")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until Ctrl-C.")
@click.option(
    "--agent",
    "-a",
    "agents",
    multiple=True,
    metavar="ALIAS",
    help="Only events about this agent (repeatable; the global --agent works too).",
)
@click.option(
    "--kind",
    "-k",
    "kinds",
    multiple=True,
    metavar="KIND",
    help=f"Only events of this kind or family (repeatable): {', '.join(KIND_NAMES)}.",
)
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help=f"The newest N matching past events (default: all; {FOLLOW_BACKLOG} with --follow).",
)
@json_option
def events_cmd(
    follow: bool, agents: tuple[str, ...], kinds: tuple[str, ...], limit: int | None, as_json: bool
) -> None:
    """What the daemon did: agent transitions, routing refusals, reloads, memory operations.

    Without --follow: the matching events the daemon kept (its newest 4096), then exit.
    With --follow: then each new one as it happens, until Ctrl-C. --json prints JSON Lines.

    Exit 0 ok, 1 cut off for reading too slowly, 2 an unknown kind, 3 no daemon, 130 Ctrl-C."""
    json_out = wants_json(as_json)
    unknown = unknown_kinds(kinds)
    if unknown:
        _fail(
            "bad_request",
            f"unknown event kind {', '.join(map(repr, unknown))}; known: {', '.join(KIND_NAMES)}",
            EXIT_USAGE,
            json_out,
        )
    global_agent = state().agent
    wanted = tuple(dict.fromkeys((*agents, *([global_agent] if global_agent else []))))
    request = EventsFollow(
        agents=wanted,
        kinds=tuple(dict.fromkeys(kinds)),
        backlog=FOLLOW_BACKLOG if follow and limit is None else limit,
        follow=follow,
    )
    try:
        for reply in _replies(request, json_out):
            if not reply.ok:
                _refused(reply, json_out)
            data: EventsReply | None = reply.data
            for item in data.events if data is not None else []:
                sys.stdout.write(
                    _json_line(item) if json_out else terminal_safe(event_line(item)) + "\n"
                )
            sys.stdout.flush()  # a follower's reader sees each event as it comes
    except KeyboardInterrupt:
        # Ctrl-C is how a follow ends: no traceback, no complaint.
        sys.exit(EXIT_INTERRUPTED)


def _json_line(item: Published) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, **event_json(item)}) + "\n"


def _replies(request: EventsFollow, json_out: bool) -> Iterator[Reply[Any]]:
    """The replies to `request`; following waits as long as it takes (no client timeout).
    Not being served, or the daemon going away mid-stream, is exit 3."""
    client = control_client()
    received = False
    try:
        with client.session(timeout=None if request.follow else 60.0) as session:
            session.send(request)
            for reply in session.replies(EventsReply):
                received = True
                yield reply
    except UntrustedDaemon as exc:
        _raise(DaemonRefused(str(exc)), "forbidden", json_out)
    except DaemonUnreachable as exc:
        if received:
            _fail(
                "unavailable",
                "the daemon closed the connection: it stopped, or cut this reader off for "
                "not reading (see its log)",
                EXIT_NO_DAEMON,
                json_out,
            )
        _raise(no_daemon(client.name, exc), "unavailable", json_out)
    except TimeoutError:
        _fail("timeout", "the daemon did not answer within 60s", EXIT_FAILED, json_out)
    except OSError as exc:
        _fail("unavailable", f"lost the daemon on {client.name}: {exc}", EXIT_NO_DAEMON, json_out)


def _refused(reply: Reply[Any], json_out: bool) -> NoReturn:
    code = reply.error or "internal"
    if code in REFUSALS:
        _raise(refusal_error(reply), code, json_out)
    message = reply.message or code
    if code == "slow_reader":
        message = f"the daemon cut this reader off: {message}"
    _fail(code, message, EXIT_USAGE if code == "bad_request" else EXIT_FAILED, json_out)


def _raise(error: CliError, code: str, json_out: bool) -> NoReturn:
    _fail(code, str(error), error.exit_code, json_out)


def _fail(code: str, message: str, exit_code: int, json_out: bool) -> NoReturn:
    """A failure: JSON on stdout with --json (`ok: false`), else a CliError (stderr)."""
    if not json_out:
        raise CliError(message, exit_code)
    error = {"code": code, "message": message}
    sys.stdout.write(json.dumps({"schema_version": SCHEMA_VERSION, "ok": False, "error": error}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    sys.exit(exit_code)
