"""`zeroclaw usage [--agent A] [--since DATE|DURATION] [--by day|session|provider] [--json]`:
what the agents spent, from the daemon's usage ledger (ADR 0057).

Through the daemon when one runs (what it gathered in the last second included); otherwise
the ledger is read straight from the state dir, read-only. The ledger keeps UTC days: a
`--since` duration counts from the start of the UTC day it reaches back into.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import click
import msgspec

from ..control import UsageQuery, UsageReply, UsageRow
from ..usage import shown
from ._app import cli
from ._common import (
    EXIT_FAILED,
    EXIT_NO_DAEMON,
    EXIT_USAGE,
    CliError,
    emit_json,
    fallback,
    json_option,
    safe_echo,
    state,
    wants_json,
)
from .daemon_cmd import DaemonRefused, call, control_client

DURATION = re.compile(r"^(\d{1,5})([dhm])$")
UNITS = {"d": "days", "h": "hours", "m": "minutes"}
GROUPS = ("day", "session", "provider")
COUNTS = (
    "turns",
    "steps",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_pico",
    "estimated_steps",
)


def since_day(since: str, now: float | None = None) -> str:
    """`--since` as the first UTC day counted: `today`, a date (YYYY-MM-DD) or a duration
    back from now (`7d`, `24h`, `90m`). CliError (exit 2) for anything else."""
    when = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    if since == "today":
        return when.strftime("%Y-%m-%d")
    match = DURATION.match(since)
    if match:
        back = timedelta(**{UNITS[match[2]]: int(match[1])})
        return (when - back).strftime("%Y-%m-%d")
    try:
        return datetime.strptime(since, "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError:
        raise CliError(
            f"--since {since!r}: a date (YYYY-MM-DD, UTC), a duration (7d, 24h, 90m) or 'today'",
            EXIT_USAGE,
        ) from None


def grouped(rows: Iterable[UsageRow], by: tuple[str, ...]) -> list[dict[str, object]]:
    """The rows summed by agent, origin and the `by` fields, in key order; costs summed in
    pico-units (exact), shown with six decimals."""
    keys = ("agent", "origin", *(g for g in GROUPS if g in by))
    sums: dict[tuple[str, ...], dict[str, int]] = {}
    for row in rows:
        key = tuple(str(getattr(row, k)) for k in keys)
        total = sums.setdefault(key, dict.fromkeys(COUNTS, 0))
        for name in COUNTS:
            total[name] += getattr(row, name)
    out: list[dict[str, object]] = []
    for key, total in sorted(sums.items()):
        out.append(
            {**dict(zip(keys, key, strict=True)), **total, "cost": shown(total["cost_pico"])}
        )
    return out


def _ask(request: UsageQuery) -> UsageReply:
    try:
        reply = call(request)
    except CliError as exc:
        if exc.exit_code != EXIT_NO_DAEMON or isinstance(exc, DaemonRefused):
            raise
        return _direct(request)
    if not reply.ok or reply.data is None:
        code = EXIT_USAGE if reply.error == "bad_request" else EXIT_FAILED
        raise CliError(f"{reply.error}: {reply.message}", code, code=reply.error)
    return reply.data


def _direct(request: UsageQuery) -> UsageReply:
    """The ledger read here: no daemon runs (so none writes it)."""
    from ..config import daemon_paths
    from ..usage import LedgerError, UsageLedger, usage_row

    _path, config = state().load()
    path = daemon_paths(config, os.environ).state_dir / "usage"
    runtime_dir = control_client().runtime_dir
    fallback(
        "ledger",
        f"no daemon answers on {runtime_dir}",
        f"no daemon answers on {runtime_dir}; read the usage ledger {path} directly",
        runtime_dir=str(runtime_dir),
    )
    try:
        with UsageLedger(path, readonly=True) as ledger:
            rows = ledger.rows(request.since, request.agent)
    except LedgerError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    return UsageReply([usage_row(key, tally) for key, tally in rows], request.since)


@cli.command("usage")
@click.option("--agent", "-a", "agent", metavar="ALIAS", help="Only this agent's spend.")
@click.option(
    "--since",
    default="today",
    show_default=True,
    help="The first UTC day counted: YYYY-MM-DD, a duration back from now (7d, 24h, 90m), "
    "or 'today'.",
)
@click.option(
    "--by",
    type=click.Choice(GROUPS),
    multiple=True,
    help="Split each agent's and origin's line by day, session or provider (repeatable).",
)
@json_option
def usage_cmd(agent: str | None, since: str, by: tuple[str, ...], as_json: bool) -> None:
    """What each agent spent, by origin: turns, provider steps, tokens and cost (at the
    config's prices), from the daemon's usage ledger."""
    reply = _ask(UsageQuery(since=since_day(since), agent=agent))
    lines = grouped(reply.rows, by)
    if wants_json(as_json):
        emit_json(
            {
                "since": reply.since,
                "groups": lines,
                "rows": [msgspec.to_builtins(row) for row in reply.rows],
            }
        )
        return
    if not lines:
        click.echo(f"no usage since {reply.since} (UTC)")
        return
    keys = ("agent", "origin", *(g for g in GROUPS if g in by))
    header = [*keys, "turns", "steps", "input", "cached", "written", "output", "cost"]
    table = [header] + [
        [
            *(str(line[k]) or "-" for k in keys),
            str(line["turns"]),
            str(line["steps"]),
            str(line["input_tokens"]),
            str(line["cached_input_tokens"]),
            str(line["cache_write_tokens"]),
            str(line["output_tokens"]),
            str(line["cost"]) + ("~" if line["estimated_steps"] else ""),
        ]
        for line in lines
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        safe_echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if any(line["estimated_steps"] for line in lines):
        click.echo("~ some steps' tokens were estimated (their server reported none)")
