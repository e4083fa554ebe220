"""Phase A of a scan: every source at once, bounded, then one decision over everything.

Sources run concurrently (`max_concurrent_scanners` at a time) under one global deadline;
each file-reading source runs in a worker thread, then its items' probes run. A source
that fails or outlives the deadline gives a `failed`/`timeout` report and whatever it had
found; it never holds up the others. Only when every source has finished or been cut off
are the decisions taken (duplicate ids, the capability registry and shadowing need all of
them), so nothing is ever half-registered. Phase B, registering and publishing, belongs to
whoever ran the scan (the daemon, or the CLI's cache).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import Literal

import msgspec
import trio

from .._version import __version__
from ..subagents import RESERVED_IDS
from ._context import SOURCE_NAMES, Found, ScanContext
from ._decide import DecisionPolicy, decide
from ._health import check_health, scan_model_servers
from ._model import (
    SCHEMA_VERSION,
    Diagnostic,
    DiscoveredItem,
    RegistrationDecision,
    SourceKind,
    Summary,
    summarise,
)
from ._project import link_skill_manifests, scan_adapters, scan_capabilities, scan_mcp
from ._redact import redact_decision, redact_diagnostic, redact_item, redact_text
from ._sources import scan_agents, scan_path, scan_serial, scan_subagents, scan_user_skills

SourceStatus = Literal["ok", "timeout", "failed"]

FILE_SOURCES: dict[str, Callable[[ScanContext], Found]] = {
    "agents": scan_agents,
    "subagents": scan_subagents,
    "adapters": scan_adapters,
    "capabilities": scan_capabilities,
    "mcp": scan_mcp,
    "path": scan_path,
    "user_skills": scan_user_skills,
    "serial": scan_serial,
}


async def _model_servers(ctx: ScanContext) -> Found:
    return Found(await scan_model_servers(ctx))


ASYNC_SOURCES: dict[str, Callable[[ScanContext], Awaitable[Found]]] = {
    "model_servers": _model_servers,
}
assert set(FILE_SOURCES) | set(ASYNC_SOURCES) == set(SOURCE_NAMES)


class SourceReport(msgspec.Struct, frozen=True, omit_defaults=True):
    name: str
    status: SourceStatus
    items: int
    elapsed_ms: float
    diagnostics: tuple[Diagnostic, ...] = ()


class Entry(msgspec.Struct, frozen=True):
    """One item as `discover` shows it: the facts, then the decision."""

    item: DiscoveredItem
    decision: RegistrationDecision


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A finished scan: what `--json` prints and what the cache keeps."""

    schema_version: int = SCHEMA_VERSION
    generated_at: float
    program_version: str = __version__
    workspace: str  # the config file's directory
    config_hash: str = ""
    sources: tuple[SourceReport, ...]
    entries: tuple[Entry, ...]
    summary: Summary
    degraded: tuple[str, ...] = ()  # required items that are not registered

    def find(self, ident: str) -> list[Entry]:
        """Entries whose key or id is `ident`."""
        return [e for e in self.entries if ident in (e.item.key, e.item.id)]


def _redact_report(report: SourceReport) -> SourceReport:
    return msgspec.structs.replace(
        report, diagnostics=tuple(redact_diagnostic(d) for d in report.diagnostics)
    )


def redact_snapshot(snapshot: Snapshot) -> Snapshot:
    """`snapshot` with every item, decision and report redacted (`_redact`): what the cache
    keeps and what `--json` prints, whichever scan (or older cache) it came from. Idempotent."""
    return msgspec.structs.replace(
        snapshot,
        workspace=redact_text(snapshot.workspace),
        sources=tuple(_redact_report(r) for r in snapshot.sources),
        entries=tuple(
            Entry(redact_item(e.item), redact_decision(e.decision)) for e in snapshot.entries
        ),
        degraded=tuple(redact_text(key) for key in snapshot.degraded),
    )


def decision_policy(ctx: ScanContext) -> DecisionPolicy:
    settings = ctx.settings
    prefer: dict[str, SourceKind] = {
        ident: override.prefer_source
        for ident, override in settings.overrides.items()
        if override.prefer_source is not None
    }
    return DecisionPolicy(
        commands=frozenset(settings.commands),
        allow_user_local_skills=settings.allow_user_local_skills,
        prefer_source=prefer,
        reserved_ids=RESERVED_IDS | frozenset(ctx.config.agents),
    )


async def scan(ctx: ScanContext, sources: Collection[str] | None = None) -> Snapshot:
    """Run phase A over `sources` (all when None) and decide."""
    selected = [s for s in SOURCE_NAMES if sources is None or s in sources]
    reports: dict[str, SourceReport] = {}
    found: dict[str, list[DiscoveredItem]] = {}
    limiter = trio.CapacityLimiter(ctx.limits.max_concurrent_scanners)
    deadline = trio.current_time() + ctx.limits.global_timeout

    async def run(name: str) -> None:
        started = time.perf_counter()
        items: list[DiscoveredItem] = []
        notes: list[Diagnostic] = []
        status: SourceStatus = "ok"
        with trio.move_on_at(deadline) as scope:
            try:
                async with limiter:
                    if name in ASYNC_SOURCES:
                        result = await ASYNC_SOURCES[name](ctx)
                    else:
                        result = await trio.to_thread.run_sync(
                            FILE_SOURCES[name], ctx, abandon_on_cancel=True
                        )
                    items = result.items
                    notes = list(result.notes)
                    found[name] = items  # partial results survive a timeout from here on
                    if ctx.health_check:
                        await check_health(items, ctx)
            except Exception as exc:  # one source failing never fails the scan
                status = "failed"
                notes.append(
                    Diagnostic("error", "io", f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
                )
        if scope.cancelled_caught:
            status = "timeout"
            notes.append(
                Diagnostic(
                    "error",
                    "timeout",
                    f"{name} did not finish within global_scan_timeout_ms "
                    f"({ctx.limits.global_timeout * 1000:.0f} ms): partial results",
                )
            )
        found[name] = items
        reports[name] = SourceReport(
            name,
            status,
            len(items),
            round((time.perf_counter() - started) * 1000, 2),
            tuple(notes),
        )

    async with trio.open_nursery() as nursery:
        for name in selected:
            nursery.start_soon(run, name)
    every = link_skill_manifests([item for name in selected for item in found.get(name, [])])
    # Redacted before anything is decided: an item whose argument held a secret is refused,
    # and nothing downstream (cache, --json, events, log) ever sees the value.
    every = [redact_item(item) for item in every]
    entries = tuple(
        Entry(item, redact_decision(decision))
        for item, decision in decide(every, decision_policy(ctx))
    )
    decisions = [e.decision for e in entries]
    degraded = tuple(
        e.item.key
        for e in entries
        if e.item.required and not e.decision.registered and e.decision.action != "shadowed"
    )
    return Snapshot(
        generated_at=ctx.now,
        workspace=str(ctx.config_dir),
        sources=tuple(_redact_report(reports[name]) for name in selected),
        entries=entries,
        summary=summarise(decisions),
        degraded=degraded,
    )
