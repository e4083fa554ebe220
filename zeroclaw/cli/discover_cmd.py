"""`zeroclaw discover scan|list|explain|doctor|audit|cache|schema`: what this machine offers,
what was registered, and why — found is not registered, registered is not authorised.

Discovery runs in this process (it only reads manifests, lists $PATH and runs allowlisted
programs with `--version`), shows the cache when nothing it was built from has changed,
and rewrites the cache under its lock. Exit codes: 0 ok; 1 a failed operation (the cache
locked by another scan, an unknown id, a doctor check failing); 2 bad usage or config.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click
import msgspec
import trio

from .._flock import LockHeld
from ..config import Config, daemon_paths

# Only the light names at import: every `zeroclaw` command registers this group, and the
# scanners (jsonschema, YAML, httpx) load when a discover command runs.
from ..discovery import SCHEMAS, SOURCE_NAMES
from ._app import cli
from ._common import (
    EXIT_FAILED,
    CliError,
    emit_json,
    json_option,
    report_checks,
    state,
    wants_json,
)

if TYPE_CHECKING:
    from ..discovery import DiscoveredItem, Entry, Outcome, ScanDiff, Snapshot

LIST_FILTERS = ("all", "registered", "invalid")


@cli.group("discover")
def discover_group() -> None:
    """Find agents, adapters, capabilities, MCP servers, model servers and serial ports;
    decide each with a reason (ADR 0034)."""


@dataclass(frozen=True)
class Loaded:
    config: Config
    data: bytes  # the config file's bytes (its hash invalidates the cache)
    path: Path
    state_dir: Path


def _load() -> Loaded:
    path, config = state().load()
    if not config.discovery.enabled:
        raise CliError(
            f"discovery is disabled in {path} ([discovery] enabled = false)",
            EXIT_FAILED,
            code="discovery_disabled",
        )
    return Loaded(config, path.read_bytes(), path, daemon_paths(config, os.environ).state_dir)


def _run(
    loaded: Loaded,
    *,
    sources: tuple[str, ...] = (),
    refresh: bool = False,
    dry_run: bool = False,
    health: bool = True,
    must_write: bool = False,
) -> Outcome:
    from ..discovery import CacheLocked, discover, scan_context

    ctx = scan_context(loaded.config, loaded.path, os.environ, health_check=health)

    async def main() -> Outcome:
        return await discover(
            ctx,
            loaded.data,
            loaded.state_dir,
            sources=sources or None,
            refresh=refresh,
            dry_run=dry_run,
            must_write=must_write,
        )

    try:
        return trio.run(main)
    except CacheLocked as exc:
        raise CliError(str(exc), EXIT_FAILED, code="cache_locked") from None


# --- output -------------------------------------------------------------------------------


def item_json(entry: Entry) -> dict[str, object]:
    from ..discovery import redact_decision, redact_item

    # The same redaction as the cache's and the events' (ADR 0047), whatever built `entry`.
    item = redact_item(entry.item)
    document: dict[str, object] = {"key": item.key, **msgspec.to_builtins(item)}
    document["decision"] = msgspec.to_builtins(redact_decision(entry.decision))
    return document


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def snapshot_json(outcome: Outcome, entries: list[Entry], extra: dict[str, object]) -> None:
    snap = outcome.snapshot
    emit_json(
        {
            "generated_at": _iso(snap.generated_at),
            "workspace": snap.workspace,
            "items": [item_json(e) for e in entries],
            "summary": msgspec.to_builtins(snap.summary),
            "sources": msgspec.to_builtins(snap.sources),
            "degraded": list(snap.degraded),
            "cache": {
                "used": outcome.from_cache,
                "why": outcome.verdict,
                "file": outcome.cache_note,
            },
            **extra,
        }
    )


def _status(entry: Entry) -> str:
    d = entry.decision
    if d.action == "registered":
        return "registered"
    if d.target == "display_only":
        return f"shown only ({d.reason})"
    return f"{d.action} ({d.reason})"


def print_table(entries: list[Entry]) -> None:
    if not entries:
        click.echo("nothing found")
        return
    rows = [
        (e.item.id, e.item.kind, e.item.source.display or e.item.source.name, _status(e))
        for e in entries
    ]
    widths = [
        max(len(str(r[i])) for r in [("ID", "KIND", "SOURCE", "STATUS"), *rows]) for i in range(3)
    ]
    for row in [("ID", "KIND", "SOURCE", "STATUS"), *rows]:
        click.echo(
            "  ".join(str(c).ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        )


def print_summary(outcome: Outcome) -> None:
    s = outcome.snapshot.summary
    click.echo(
        f"\n{s.found} found: {s.registered} registered, {s.rejected} rejected, "
        f"{s.display_only} shown only, {s.shadowed} shadowed"
    )
    for report in outcome.snapshot.sources:
        if report.status != "ok":
            click.echo(f"source {report.name}: {report.status}", err=True)
        for note in report.diagnostics:
            click.echo(f"source {report.name}: {note.message}", err=True)
    if outcome.snapshot.degraded:
        click.echo(f"degraded: required but not registered: {', '.join(outcome.snapshot.degraded)}")
    when = _iso(outcome.snapshot.generated_at)
    origin = f"from the cache ({when})" if outcome.from_cache else f"scanned {when}"
    click.echo(f"{origin}; cache {outcome.cache_note}")


def print_diff(changes: ScanDiff) -> None:
    if changes.empty:
        click.echo("no change since the cached scan")
        return
    for field in ScanDiff.__struct_fields__:
        keys = getattr(changes, field)
        if keys:
            click.echo(f"{field.replace('_', ' ')}: {', '.join(keys)}")


def _filtered(snap: Snapshot, which: str) -> list[Entry]:
    entries = list(snap.entries)
    if which == "registered":
        return [e for e in entries if e.decision.registered]
    if which == "invalid":
        # Refused for a reason the operator can fix (display-only kinds are not "invalid").
        return [
            e
            for e in entries
            if e.decision.action in ("rejected", "disabled") and e.decision.target != "display_only"
        ]
    return entries


# --- commands -----------------------------------------------------------------------------


@discover_group.command("scan")
@json_option
@click.option("--dry-run", is_flag=True, help="Scan and decide; write no cache.")
@click.option("--diff", "show_diff", is_flag=True, help="What changed since the cached scan.")
@click.option(
    "--source",
    "sources",
    multiple=True,
    type=click.Choice(SOURCE_NAMES),
    help="Scan only this source (repeatable); a partial scan is never cached.",
)
@click.option("--no-health-check", is_flag=True, help="Do not run any --version probe.")
@click.option("--refresh", is_flag=True, help="Ignore the cache and scan anew.")
@click.option("--explain-invalid", is_flag=True, help="Print why each refused item was refused.")
def scan_cmd(
    as_json: bool,
    dry_run: bool,
    show_diff: bool,
    sources: tuple[str, ...],
    no_health_check: bool,
    refresh: bool,
    explain_invalid: bool,
) -> None:
    """Scan every source and decide each item."""
    from ..discovery import diff

    outcome = _run(
        _load(),
        sources=sources,
        refresh=refresh or bool(sources) or no_health_check,
        dry_run=dry_run,
        health=not no_health_check,
        must_write=refresh and not dry_run,
    )
    changes = diff(outcome.previous, outcome.snapshot) if outcome.previous else None
    entries = list(outcome.snapshot.entries)
    if wants_json(as_json):
        extra: dict[str, object] = {}
        if show_diff:
            extra["diff"] = msgspec.to_builtins(changes) if changes else None
        snapshot_json(outcome, entries, extra)
        return
    print_table(entries)
    print_summary(outcome)
    if show_diff:
        click.echo()
        if changes is None:
            click.echo("no earlier scan in the cache to compare with")
        else:
            print_diff(changes)
    if explain_invalid:
        for entry in _filtered(outcome.snapshot, "invalid"):
            click.echo()
            print_explain(entry)


@discover_group.command("list")
@json_option
@click.option("--all", "which", flag_value="all", default=True, help="Every item (default).")
@click.option("--registered", "which", flag_value="registered", help="Registered items only.")
@click.option("--invalid", "which", flag_value="invalid", help="Rejected or disabled items only.")
def list_cmd(as_json: bool, which: str) -> None:
    """Items from the cache when it is current, else from a fresh scan."""
    outcome = _run(_load())
    entries = _filtered(outcome.snapshot, which)
    if wants_json(as_json):
        snapshot_json(outcome, entries, {"filter": which})
        return
    print_table(entries)
    print_summary(outcome)


def print_explain(entry: Entry, config: Config | None = None) -> None:
    """`config`: when given, an adapter over HTTP also says which agents may reach it."""
    item, d = entry.item, entry.decision
    click.echo(f"ID: {item.id}  ({item.key})")
    click.echo("Decision:")
    click.echo(f"  action: {d.action}")
    click.echo(f"  reason: {d.reason}")
    click.echo(f"  target: {d.target}")
    click.echo(f"  policy: {d.policy}")
    if d.shadowed_by:
        click.echo(f"  shadowed by: {d.shadowed_by}")
    click.echo(f"Kind: {item.kind}")
    click.echo(f"Source: {item.source.display or item.source.name} ({item.source.kind})")
    click.echo(f"Trust: {item.trust}")
    health = item.health
    click.echo(
        f"Health: {health.status}"
        + (f" ({health.version})" if health.version else "")
        + (f": {health.message}" if health.message else "")
    )
    if item.capabilities:
        click.echo("Capabilities: " + ", ".join(item.capabilities))
    if item.command:
        click.echo(f"Command: {item.command}")
    for candidate in item.candidates:
        local = " (workspace-local)" if candidate.workspace_local else ""
        click.echo(f"  candidate: {candidate.display} -> {candidate.canonical}{local}")
    if item.env:
        click.echo("Environment (names only): " + ", ".join(item.env))
    for key, names in item.allowlists.items():
        click.echo(f"Allowed {key}: {', '.join(names) or 'none'}")
    if item.device_state:
        click.echo(f"Device: {item.device_state}")
    if config is not None:
        _print_reach(config, item)
    if item.kind == "local_model" and item.health.status in ("available", "degraded"):
        base = item.endpoint.removesuffix("/models").removesuffix("/api/tags")
        base = base if base.endswith("/v1") else base.rstrip("/") + "/v1"
        name = item.id.split("@")[0].replace(".", "-")
        click.echo("Provider candidate (add it yourself; discovery never edits the config):")
        click.echo(f'  [providers.openai.{name}]\n  base_url = "{base}"')
        if item.name:
            click.echo(f"  # models: {item.name}")
    click.echo("Diagnostics:" + ("" if d.diagnostics else " none"))
    for note in d.diagnostics:
        where = f" [{note.pointer}]" if note.pointer else ""
        expected = f" (expected {note.expected}; found {note.actual})" if note.expected else ""
        click.echo(f"  - {note.level}: {note.message}{where}{expected}")


def _print_reach(config: Config, item: DiscoveredItem) -> None:
    """Where an adapter over HTTP goes and which agents' profiles let the daemon go there
    (ADR 0054)."""
    from ..discovery import endpoint_reach

    reach = endpoint_reach(config, item, os.environ)
    if reach is None:
        return
    where = f"{reach.shown} ({reach.endpoint})" if reach.endpoint else "unset: calls refused"
    click.echo(f"Endpoint: {where}")
    if reach.key_missing:
        click.echo(f"  ${reach.key_missing} is not set here: calls are refused (api_key_missing)")
    for grant in reach.grants:
        if grant.allowed:
            click.echo(f"  {grant.agent}: allowed by risk profile {grant.profile!r}")
        else:
            click.echo(
                f'  {grant.agent}: refused (endpoint_not_allowed): add "{reach.endpoint}" to '
                f"[risk_profiles.{grant.profile}] allowed_endpoints"
            )


@discover_group.command("explain")
@click.argument("ident")
@json_option
def explain_cmd(ident: str, as_json: bool) -> None:
    """Why IDENT (an id or kind:id) was registered, refused, shadowed or shown only."""
    loaded = _load()
    outcome = _run(loaded)
    matches = outcome.snapshot.find(ident)
    if not matches:
        known = sorted({e.item.id for e in outcome.snapshot.entries})
        close = [k for k in known if ident.lower() in k.lower()][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise CliError(
            f"nothing discovered is called {ident!r}{hint}", EXIT_FAILED, code="not_found"
        )
    if wants_json(as_json):
        emit_json({"items": [item_json(e) for e in matches]})
        return
    for index, entry in enumerate(matches):
        if index:
            click.echo()
        print_explain(entry, loaded.config)


@discover_group.command("doctor")
@json_option
def doctor_cmd(as_json: bool) -> None:
    """What keeps discovery from working well here, with the fix."""
    from ..discovery import discovery_checks

    loaded = _load()
    checks = discovery_checks(loaded.config, _run(loaded), loaded.state_dir, os.environ)
    report_checks(checks, as_json)


@discover_group.command("audit")
@json_option
def audit_cmd(as_json: bool) -> None:
    """Every registered agent, sub-agent and adapter with its whole permission surface."""
    from ..discovery import audit_rows

    loaded = _load()
    rows = audit_rows(loaded.config, loaded.path, _run(loaded).snapshot, os.environ)
    if wants_json(as_json):
        emit_json({"rows": [msgspec.to_builtins(r) for r in rows]})
        return
    for row in rows:
        click.echo(f"{row.kind} {row.id}")
        for label, values in row.surface():
            click.echo(f"  {label}: {values}")


@discover_group.group("cache")
def cache_group() -> None:
    """The discovery cache file."""


@cache_group.command("inspect")
@json_option
def cache_inspect(as_json: bool) -> None:
    """Where the cache is, what it holds and whether it is current."""
    from ..discovery import DiscoveryCache, current_inputs, scan_context, verdict

    loaded = _load()
    cache = DiscoveryCache(loaded.state_dir)
    read = cache.read(repair=False)
    info: dict[str, object] = {"path": str(cache.path), "present": read.cache is not None}
    if read.problem:
        info["problem"] = read.problem
    if read.cache is not None:
        ctx = scan_context(loaded.config, loaded.path, os.environ)
        info.update(
            size=cache.path.stat().st_size,
            schema_version=read.cache.schema_version,
            program_version=read.cache.program_version,
            written_at=_iso(read.cache.written_at),
            items=len(read.cache.snapshot.entries),
            verdict=verdict(
                read.cache,
                current_inputs(ctx, loaded.data),
                time.time(),
                loaded.config.discovery.health_ttl_secs,
            ),
        )
    if wants_json(as_json):
        emit_json(info)
        return
    for key, value in info.items():
        click.echo(f"{key}: {value}")


@cache_group.command("clear")
def cache_clear() -> None:
    """Remove the cache (the next discover command scans anew)."""
    from ..discovery import DiscoveryCache

    cache = DiscoveryCache(_load().state_dir)
    lock = cache.lock()
    try:
        lock.acquire()
    except LockHeld as exc:
        raise CliError(str(exc), EXIT_FAILED, code="cache_locked") from None
    try:
        removed = cache.clear()
    finally:
        lock.release()
    click.echo(f"removed {cache.path}" if removed else f"no cache at {cache.path}")


@discover_group.command("schema")
@click.argument("which", type=click.Choice(sorted(SCHEMAS)))
def schema_cmd(which: str) -> None:
    """The JSON Schema of adapters/, capabilities/ or mcp/ manifests."""
    click.echo(json.dumps(SCHEMAS[which], indent=2))
