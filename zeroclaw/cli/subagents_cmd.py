"""`zeroclaw subagents list|show|revisions`, `zeroclaw dispatch`, `zeroclaw invocations
list|show|events|cancel`: the operator's view of sub-agents, through the daemon only.

Everything is read-only except `dispatch` and `invocations cancel`. A dispatch from here has
the caller `cli` (the daemon sets it: whoever may use the control socket is the operator),
so a sub-agent runs it only if its `allowedCallers` lists `cli`. `dispatch` waits for the
invocation's end; `invocations events --follow` streams its events as they are persisted.

Exit codes: 0 ok; 1 an operation that failed (a dispatch refused for its caller or the
concurrency limit, an invocation that did not succeed, an unknown invocation id); 2 bad
usage (bad `--input`, an unknown sub-agent id, input its schema refuses); 3 no daemon.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import click
import msgspec

from ..control import (
    ControlErrorCode,
    DaemonUnreachable,
    Dispatch,
    DispatchReply,
    InvocationCancel,
    InvocationEvents,
    InvocationEventsReply,
    InvocationShow,
    InvocationsList,
    Reply,
    SubagentRevisions,
    SubagentShow,
    SubagentsList,
    UntrustedDaemon,
)
from ..turns import Invocation, InvocationEvent, InvocationState
from ._app import cli
from ._common import (
    EXIT_FAILED,
    EXIT_NO_DAEMON,
    EXIT_USAGE,
    CliError,
    emit_json,
    json_option,
    safe_echo,
    wants_json,
)
from .daemon_cmd import (
    REFUSALS,
    DaemonRefused,
    call,
    control_client,
    no_daemon,
    refusal_error,
)

# Control codes that say the operator asked for something that cannot be (exit 2).
USAGE_CODES: frozenset[ControlErrorCode] = frozenset(
    {
        "bad_request",
        "subagent_not_found",
        "subagent_input_invalid",
        "subagent_idempotency_conflict",
        "unknown_agent",
    }
)
SHORT_DIGEST = 12
STATES: tuple[str, ...] = get_args(InvocationState)
MAX_LIMIT = 1000


def _failed(reply: Reply[Any]) -> CliError:
    code = reply.error or "failed"
    if code == "unsupported":
        return CliError(
            f"{code}: this daemon does not serve sub-agent commands ({reply.message})",
            EXIT_FAILED,
            code=code,
        )
    usage = code in USAGE_CODES
    return CliError(f"{code}: {reply.message}", EXIT_USAGE if usage else EXIT_FAILED, code=code)


def _ok(reply: Reply[Any]) -> Any:
    """The reply's data, or the failure as a CliError with its exit code."""
    if not reply.ok or reply.data is None:
        raise _failed(reply)
    return reply.data


def _streamed(request: Dispatch | InvocationEvents) -> Iterator[Reply[Any]]:
    """The replies to one request that may take as long as it takes (a dispatch waits for
    its invocation's end, a follow for the last event): no client-side timeout. Not being
    served is exit 3, as for every daemon-only command."""
    client = control_client()
    try:
        with client.session(timeout=None) as session:
            session.send(request)
            for reply in session.replies(request.reply_type):
                if not reply.ok and reply.error in REFUSALS:
                    raise refusal_error(reply)
                yield reply
    except UntrustedDaemon as exc:
        raise DaemonRefused(str(exc)) from None
    except DaemonUnreachable as exc:
        raise no_daemon(client.name, exc) from None
    except OSError as exc:
        raise CliError(f"lost the daemon on {client.name}: {exc}", EXIT_NO_DAEMON) from None


# --- output helpers -----------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).isoformat(timespec="seconds")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _invocation_lines(inv: Invocation) -> list[str]:
    lines = [
        f"invocation  {inv.id}",
        f"sub-agent   {inv.agent_id}@{inv.digest[:SHORT_DIGEST]}",
        f"state       {inv.state}",
        f"caller      {inv.caller} (source {inv.source})",
        f"created     {_when(inv.created_at)}, updated {_when(inv.updated_at)}",
    ]
    if inv.idempotency_key is not None:
        lines.append(f"key         {inv.idempotency_key}")
    if inv.attempt > 1 or inv.retry_of or inv.retried_by:
        links = [f"attempt {inv.attempt}"]
        if inv.retry_of:
            links.append(f"re-runs {inv.retry_of}")
        if inv.retried_by:
            links.append(f"re-run by {inv.retried_by}")
        lines.append(f"attempts    {', '.join(links)}")
    lines.append(f"task        {inv.task}")
    if inv.input is not None:
        lines.append(f"input       {_compact(inv.input)}")
    if inv.output is not None:
        lines.append(f"output      {_compact(inv.output)}")
    if inv.reply:
        lines.append(f"reply       {inv.reply}")
    if inv.error_code is not None:
        where = f" (at {inv.error_pointer})" if inv.error_pointer is not None else ""
        lines.append(f"error       {inv.error_code}: {inv.error_detail}{where}")
    return lines


def _event_line(event: InvocationEvent, invocation_id: str) -> str:
    body = msgspec.to_builtins(event.body)
    kind = body.pop("kind")
    whose = "" if event.invocation_id == invocation_id else f" [{event.invocation_id}]"
    if kind == "state":
        text = body["state"]
        if body.get("error_code"):
            text += f" {body['error_code']}"
        if body.get("detail"):
            text += f": {body['detail']}"
    elif kind == "delta":
        text = repr(body["text"])
    elif kind == "tool":
        status = "ok" if body["ok"] else body.get("error_code") or "failed"
        text = f"{body['name']} {_compact(body['args'])}: {status}"
    else:  # pragma: no cover - a kind this CLI does not know
        text = _compact(body)
    return f"#{event.seq:<4} {_when(event.at)}{whose} {kind:<5} {text}"


# --- zeroclaw subagents ---------------------------------------------------------------------


@cli.group("subagents")
def subagents_group() -> None:
    """Loaded sub-agents, their manifests and revisions (read-only; needs the daemon)."""


@subagents_group.command("list")
@json_option
def subagents_list_cmd(as_json: bool) -> None:
    """Every loaded sub-agent, and every bundle that was refused with why."""
    data = _ok(call(SubagentsList()))
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(data))
        return
    rows = [("ID", "DIGEST", "EFFECTS", "CALLERS", "MAX", "DESCRIPTION")]
    for s in data.subagents:
        rows.append(
            (
                s.id,
                s.digest[:SHORT_DIGEST],
                s.effects,
                ",".join(s.allowedCallers) or "-",
                str(s.maxConcurrency),
                s.description,
            )
        )
    if data.subagents:
        safe_echo(_table(rows))
    else:
        safe_echo("no sub-agents loaded")
    if data.refused:
        safe_echo("refused bundles:")
        for bundle in data.refused:
            safe_echo(f"  {bundle.path}")
            for problem in bundle.problems:
                safe_echo(f"    - {problem}")


@subagents_group.command("show")
@click.argument("agent_id", metavar="ID")
@json_option
def subagents_show_cmd(agent_id: str, as_json: bool) -> None:
    """The manifest of sub-agent ID, its current revision and runtime (never its prompt
    or skill text). Exit 2 for an unknown ID."""
    d = _ok(call(SubagentShow(agent_id=agent_id)))
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(d))
        return
    p = d.policy
    lines = [
        f"id                {d.id}",
        f"description       {d.description}",
        f"model_provider    {d.model_provider}",
        f"mode              {d.mode}",
        f"digest            {d.digest}",
        f"snapshot          {d.snapshot}",
        f"runtime           {d.identity}",
        f"allowedCallers    {', '.join(p.allowedCallers) or '(none)'}",
        f"maxConcurrency    {p.maxConcurrency}",
        f"timeoutSeconds    {p.timeoutSeconds:g}",
        f"maxToolCalls      {p.maxToolCalls}",
        f"effects           {d.effects}",
        f"retry_on_restart  {str(d.retry_on_restart).lower()}",
        f"skills            {', '.join(d.skills) or '(none)'}",
        "mcp               "
        + ("; ".join(f"{m.server}: {', '.join(m.tools)}" for m in d.mcp) or "(none)"),
        "input schema      "
        + (_compact(d.input_schema) if d.input_schema is not None else "(none)"),
        "output schema     "
        + (_compact(d.output_schema) if d.output_schema is not None else "(none)"),
    ]
    safe_echo("\n".join(lines))


@subagents_group.command("revisions")
@click.argument("agent_id", metavar="ID")
@json_option
def subagents_revisions_cmd(agent_id: str, as_json: bool) -> None:
    """Every recorded revision of sub-agent ID, oldest first; `*` marks the current one."""
    data = _ok(call(SubagentRevisions(agent_id=agent_id)))
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(data))
        return
    rows = [("", "DIGEST", "FIRST SEEN", "DESCRIPTION")]
    for r in data.revisions:
        rows.append(("*" if r.current else "", r.digest, _when(r.first_seen), r.description))
    safe_echo(_table(rows))


# --- zeroclaw dispatch ----------------------------------------------------------------------


def _parse_input(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """`--input JSON`, `--input @FILE` or `--input @-` (stdin), parsed before the daemon is
    asked: a bad value is a usage error (exit 2)."""
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        where = value[1:]
        try:
            text = sys.stdin.read() if where == "-" else Path(where).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {where!r}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from None


@cli.command("dispatch")
@click.argument("agent_id", metavar="ID")
@click.option("--task", required=True, metavar="TEXT", help="What the sub-agent is to do.")
@click.option(
    "--input",
    "input_",
    metavar="JSON|@FILE",
    callback=_parse_input,
    help="Structured input (checked against its input schema): JSON, @FILE or @- (stdin).",
)
@click.option(
    "--idempotency-key",
    metavar="K",
    help="A repeat with the same key returns the first invocation; nothing runs twice.",
)
@json_option
def dispatch_cmd(
    agent_id: str, task: str, input_: Any, idempotency_key: str | None, as_json: bool
) -> None:
    """Hand sub-agent ID a task as the operator (caller `cli`) and wait for its end.

    Exit 0 when the invocation succeeded, 1 when it failed, timed out or was cancelled (the
    record is printed all the same) or the dispatch was refused for its caller or the
    concurrency limit, 2 for an unknown ID or input its schema refuses."""
    request = Dispatch(agent_id=agent_id, task=task, input=input_, idempotency_key=idempotency_key)
    json_out = wants_json(as_json)
    try:
        reply = list(_streamed(request))[-1]
    except KeyboardInterrupt:
        raise CliError(
            "interrupted; an invocation already accepted goes on in the daemon "
            "(see 'zeroclaw invocations list', 'zeroclaw invocations cancel ID')",
            130,
        ) from None
    data: DispatchReply | None = reply.data
    if data is not None and data.refusal is not None:
        refusal = data.refusal
        if json_out:
            emit_json({**msgspec.to_builtins(data), "error": reply.error})
        where = f" (at {refusal.pointer})" if refusal.pointer is not None else ""
        raise CliError(
            f"{refusal.code}: {refusal.detail}{where}",
            EXIT_USAGE if refusal.code in USAGE_CODES else EXIT_FAILED,
        )
    if not reply.ok or data is None or data.invocation is None:
        raise _failed(reply)
    invocation = data.invocation
    if json_out:
        emit_json(msgspec.to_builtins(data))
    else:
        safe_echo("\n".join(_invocation_lines(invocation)))
    if invocation.state in ("accepted", "running"):
        # An idempotent repeat answers the first invocation as it is now.
        safe_echo(
            f"zeroclaw: {invocation.id} is still {invocation.state}; follow it with "
            f"'zeroclaw invocations events {invocation.id} --follow'",
            err=True,
        )
    if invocation.state != "succeeded":
        sys.exit(EXIT_FAILED)


# --- zeroclaw invocations -------------------------------------------------------------------


@cli.group("invocations")
def invocations_group() -> None:
    """Sub-agent invocations: their records and timelines; cancel a running one."""


@invocations_group.command("list")
@click.option("--state", type=click.Choice(STATES), help="Only invocations in this state.")
@click.option("--agent", "agent_id", metavar="ID", help="Only invocations of this sub-agent.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=50, show_default=True)
@json_option
def invocations_list_cmd(
    state: InvocationState | None, agent_id: str | None, limit: int, as_json: bool
) -> None:
    """Invocations, newest first."""
    data = _ok(call(InvocationsList(state=state, agent_id=agent_id, limit=limit)))
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(data))
        return
    if not data.invocations:
        safe_echo("no invocations")
        return
    rows = [("ID", "SUB-AGENT", "STATE", "CALLER", "CREATED", "ERROR")]
    for i in data.invocations:
        rows.append((i.id, i.agent_id, i.state, i.caller, _when(i.created_at), i.error_code or "-"))
    safe_echo(_table(rows))


@invocations_group.command("show")
@click.argument("invocation_id", metavar="ID")
@json_option
def invocations_show_cmd(invocation_id: str, as_json: bool) -> None:
    """One invocation's record. Exit 1 for an unknown ID."""
    data = _ok(call(InvocationShow(invocation_id=invocation_id)))
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(data))
    else:
        safe_echo("\n".join(_invocation_lines(data.invocation)))


@invocations_group.command("events")
@click.argument("invocation_id", metavar="ID")
@click.option("--follow", "-f", is_flag=True, help="Stream new events until the end.")
@json_option
def invocations_events_cmd(invocation_id: str, follow: bool, as_json: bool) -> None:
    """The timeline of invocation ID (and of the earlier attempts it re-runs), in sequence
    order; with --json one JSON object per line."""
    json_out = wants_json(as_json)
    for reply in _streamed(InvocationEvents(invocation_id=invocation_id, follow=follow)):
        data: InvocationEventsReply = _ok(reply)
        for event in data.events:
            if json_out:
                line = {"schema_version": data.schema_version, **msgspec.to_builtins(event)}
                safe_echo(json.dumps(line))
            else:
                safe_echo(_event_line(event, invocation_id))
            sys.stdout.flush()


@invocations_group.command("cancel")
@click.argument("invocation_id", metavar="ID")
@json_option
def invocations_cancel_cmd(invocation_id: str, as_json: bool) -> None:
    """Cancel an accepted or running invocation. One that already ended is left as it is
    (and shown; exit 0). Exit 1 for an unknown ID."""
    data = _ok(call(InvocationCancel(invocation_id=invocation_id)))
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(data))
        return
    inv = data.invocation
    if inv.state not in ("cancelled", "accepted", "running"):
        safe_echo(f"zeroclaw: {inv.id} had already ended ({inv.state})", err=True)
    safe_echo("\n".join(_invocation_lines(inv)))
