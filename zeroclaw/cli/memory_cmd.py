"""`zeroclaw memory store|get|list|recall|stats|export|forget|purge --agent ALIAS`.

Through the daemon when one runs; otherwise straight on the store, under the same write
lock the daemon holds, so the two never write at once.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

import click
import msgspec
import trio

from ..config import Config, daemon_paths
from ..control import (
    ControlErrorCode,
    MemoryCommand,
    MemoryForgotten,
    MemoryFound,
    MemoryHit,
    MemoryHits,
    MemoryPurged,
    MemoryRecord,
    MemoryRecords,
    MemoryReply,
    MemoryStats,
    MemoryStored,
)
from ..memory import (
    MAX_LIMIT,
    MemoryLock,
    MemoryLocked,
    MemoryService,
    MemoryServiceError,
    MemoryStore,
    StoreCorrupt,
    memory_grants,
    operator_request,
)
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

_USAGE_CODES: frozenset[ControlErrorCode] = frozenset({"unknown_agent", "bad_request"})
WHEN_FORMS = "30m, 2h, 3d, 1w, today, yesterday, an ISO date or date-time, or Unix time"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(text: str, now: datetime) -> float:
    """A point in time as `memory list --since/--until` take it, as Unix time: a duration
    ago (`30m`, `2h`, `3d`, `1w`, `45s`), `today`/`yesterday` (local midnight), an ISO
    date (local midnight) or date-time (local time unless it names its offset), or a Unix
    time. `now` is an aware datetime. ValueError names the forms."""
    word = text.strip().lower()
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word == "today":
        return day.timestamp()
    if word == "yesterday":
        return (day - timedelta(days=1)).timestamp()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", word)
    if match:
        return now.timestamp() - float(match[1]) * _UNITS[match[2]]
    if re.fullmatch(r"\d+(?:\.\d+)?", word):
        return float(word)  # Unix time, as --since always took
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a time; use {WHEN_FORMS}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    return when.timestamp()


def _when(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_when(value, datetime.now().astimezone())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


T = TypeVar("T")
R = TypeVar("R", bound=MemoryReply)


def _run(op: str, agent: str | None, args: dict[str, object], reply_type: type[R]) -> R:
    """The operation's typed reply, through the daemon or (none running) the store."""
    alias = agent or state().agent
    if not alias:
        raise CliError("which agent? pass --agent ALIAS (or the global -a ALIAS)", EXIT_USAGE)
    try:
        reply = call(MemoryCommand(op=op, agent=alias, args=args))
    except CliError as exc:
        if exc.exit_code != EXIT_NO_DAEMON or isinstance(exc, DaemonRefused):
            raise
        _path, config = state().load()
        store = daemon_paths(config, os.environ).state_dir / "memory"
        runtime_dir = control_client().runtime_dir
        fallback(
            "store",
            f"no daemon answers on {runtime_dir}",
            f"no daemon answers on {runtime_dir}; opened the store at {store} directly",
            store=str(store),
            runtime_dir=str(runtime_dir),
        )
        answer = _direct(op, alias, args)
        assert isinstance(answer, reply_type)  # the op's answer is MEMORY_REPLY_TYPES[op]
        return answer
    if not reply.ok:
        code = EXIT_USAGE if reply.error in _USAGE_CODES else EXIT_FAILED
        raise CliError(f"{reply.error}: {reply.message}", code, code=reply.error)
    if reply.data is None:
        raise CliError(f"the daemon answered {op} without its result", EXIT_FAILED)
    return msgspec.convert(reply.data, reply_type)


def with_memory(config: Config, job: Callable[[MemoryService], Awaitable[T]]) -> T:
    """Run `job` against the memory store directly (no daemon), under the daemon's lock."""
    paths = daemon_paths(config, os.environ)

    async def go(store: MemoryStore) -> T | MemoryServiceError:
        service = MemoryService(store, memory_grants(config))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.run_committer)
            try:
                return await job(service)
            except MemoryServiceError as exc:
                # Returned, not raised: raised inside the nursery it would arrive wrapped
                # in an ExceptionGroup.
                return exc
            finally:
                nursery.cancel_scope.cancel()

    try:
        with MemoryLock(paths.state_dir / "memory.lock", timeout=5):
            try:
                store = MemoryStore.open_verified(
                    paths.state_dir / "memory", map_size=config.daemon.memory_map_size
                )
            except StoreCorrupt as exc:
                raise CliError(str(exc), EXIT_FAILED) from None
            try:
                outcome = trio.run(go, store)
            finally:
                store.close()
    except MemoryLocked as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    except OSError as exc:  # e.g. a state dir that cannot be created: the operator's to fix
        where = exc.filename or paths.state_dir
        raise CliError(
            f"cannot use the memory store in {paths.state_dir}: {where}: {exc.strerror}; "
            "check [daemon] state_dir and its permissions",
            EXIT_FAILED,
        ) from None
    if isinstance(outcome, MemoryServiceError):
        code = EXIT_USAGE if outcome.code in _USAGE_CODES else EXIT_FAILED
        raise CliError(f"{outcome.code}: {outcome.detail}", code, code=outcome.code)
    return outcome


def _direct(op: str, alias: str, args: dict[str, object]) -> MemoryReply:
    _path, config = state().load()

    async def job(service: MemoryService) -> MemoryReply:
        return await operator_request(service, frozenset(config.agents), op, alias, args)

    return with_memory(config, job)


def _records_out(records: Sequence[MemoryRecord], as_json: bool, key: str = "records") -> None:
    if wants_json(as_json):
        emit_json({key: msgspec.to_builtins(records)})
        return
    for r in records:
        score = f"  score={r.score:.3f}" if isinstance(r, MemoryHit) else ""
        safe_echo(f"[{r.agent}] {r.key} ({r.category}){score}: {r.content}")


agent_option = click.option(
    "--agent", "-a", "agent", metavar="ALIAS", help="The agent's namespace."
)


@cli.group("memory")
def memory_group() -> None:
    """Read and manage agents' memory (through the daemon, or directly without one)."""


@memory_group.command("store")
@click.argument("key")
@click.argument("content")
@click.option("--category", default="core", show_default=True)
@click.option("--session")
@agent_option
@json_option
def store_cmd(
    key: str, content: str, category: str, session: str | None, agent: str | None, as_json: bool
) -> None:
    """Store (or replace) CONTENT under KEY in the agent's memory."""
    args: dict[str, object] = {"key": key, "content": content, "category": category}
    if session:
        args["session"] = session
    stored = _run("store", agent, args, MemoryStored)
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(stored))
    else:
        safe_echo(f"stored {stored.record.key} ({stored.record.id})")


@memory_group.command("get")
@click.argument("key")
@agent_option
@json_option
def get_cmd(key: str, agent: str | None, as_json: bool) -> None:
    """Show one record by key. Exit 1 when there is none."""
    found = _run("get", agent, {"key": key}, MemoryFound)
    if wants_json(as_json):
        emit_json({"ok": found.record is not None, **msgspec.to_builtins(found)})
    elif found.record:
        _records_out([found.record], False)
    if not found.record:
        if not wants_json(as_json):
            safe_echo(f"no record {key!r}", err=True)
        sys.exit(EXIT_FAILED)


@memory_group.command("list")
@click.option("--category")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=50, show_default=True)
@click.option(
    "--since", metavar="WHEN", callback=_when, help=f"Records from then on: {WHEN_FORMS}."
)
@click.option("--until", metavar="WHEN", callback=_when, help="Records before then (same forms).")
@click.option("--before", metavar="ID", help="Page: records older than this id.")
@agent_option
@json_option
def list_cmd(
    category: str | None,
    limit: int,
    since: float | None,
    until: float | None,
    before: str | None,
    agent: str | None,
    as_json: bool,
) -> None:
    """Newest records first."""
    args: dict[str, object] = {
        k: v
        for k, v in {
            "category": category,
            "limit": limit,
            "since": since,
            "until": until,
            "before": before,
        }.items()
        if v is not None
    }
    _records_out(_run("list", agent, args, MemoryRecords).records, as_json)


@memory_group.command("recall")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=10, show_default=True)
@agent_option
@json_option
def recall_cmd(query: str, limit: int, agent: str | None, as_json: bool) -> None:
    """Keyword search (BM25 with a recency boost), best first."""
    hits = _run("recall", agent, {"query": query, "limit": limit}, MemoryHits).hits
    _records_out(hits, as_json, "hits")


@memory_group.command("stats")
@agent_option
@json_option
def stats_cmd(agent: str | None, as_json: bool) -> None:
    """Record and session counts, bytes, and the agent's quotas (what they refused)."""
    stats = _run("stats", agent, {}, MemoryStats)
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(stats))
    else:
        for ns, counts in sorted(stats.namespaces.items()):
            records = plural(counts.records, "record")
            safe_echo(f"{ns}: {records}, {plural(counts.session_turns, 'session turn')}")
            quota = counts.quota
            if quota is None:
                continue
            click.echo(
                f"  records: {counts.records}/{quota.max_records}, "
                f"{counts.record_bytes}/{quota.max_bytes} bytes"
            )
            click.echo(
                f"  transcripts: {counts.transcript_bytes}/{quota.max_transcript_bytes} bytes; "
                f"each session keeps its newest {quota.max_session_turns} turns, "
                f"{quota.max_session_bytes} bytes; an outside sender {quota.max_sender_bytes} "
                "bytes"
            )
            refused = ", ".join(f"{kind} {n}" for kind, n in counts.quota_refusals.items())
            click.echo(
                f"  quota_exceeded: {refused or 'none'}; "
                f"oldest turns dropped: {counts.turns_dropped}"
            )


@memory_group.command("export")
@agent_option
@json_option
def export_cmd(agent: str | None, as_json: bool) -> None:
    """Every record of the agent as JSON lines (one record per line); with --json, one
    JSON document {schema_version, records: [...]}."""
    records = _run("export", agent, {}, MemoryRecords).records
    if wants_json(as_json):
        emit_json({"records": msgspec.to_builtins(records)})
        return
    for record in records:
        safe_echo(json.dumps(msgspec.to_builtins(record)))


@memory_group.command("forget")
@click.argument("key")
@agent_option
@json_option
def forget_cmd(key: str, agent: str | None, as_json: bool) -> None:
    """Delete one record by key. Exit 1 when there was none."""
    forgotten = _run("forget", agent, {"key": key}, MemoryForgotten).forgotten
    if wants_json(as_json):
        emit_json({"ok": forgotten, "forgotten": forgotten})
    else:
        safe_echo("forgotten" if forgotten else f"no record {key!r}")
    if not forgotten:
        sys.exit(EXIT_FAILED)


@memory_group.command("purge")
@agent_option
@click.option("--yes", is_flag=True, help="Really delete the whole namespace.")
@json_option
def purge_cmd(agent: str | None, yes: bool, as_json: bool) -> None:
    """Delete every record and session of the agent. Operator only; needs --yes."""
    if not yes:
        raise CliError("purge deletes the agent's whole memory; pass --yes to confirm", EXIT_USAGE)
    purged = _run("purge", agent, {}, MemoryPurged)
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(purged))
    else:
        safe_echo(f"purged {plural(purged.purged, 'record')}")
