"""The loaded sub-agents: what the last scan of `[subagents] dir` found, as revisions.

A scan reads every bundle (a refused one is reported and the others load), writes each
revision's read-only snapshot under `<state_dir>/revisions/<digest>/` and records the
revision in the daemon's store. Same digest, same revision: a rescan of unchanged bundles
writes nothing new. The previous map stays in force until a scan completes, and an
invocation holds its own `LoadedRevision`, so a rescan never changes what a running
invocation runs.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import trio

from ..config import Config, subagents_dir
from ..turns import RevisionRecord
from ._api import LoadedRevision
from ._bundle import RESERVED_IDS, Bundle, BundleProblems, scan_bundles
from ._revision import ensure_snapshot, load_snapshot, remove_leftovers, runtime_identity

log = logging.getLogger("zeroclaw.subagents")


class RevisionLedger(Protocol):
    """Where revisions are recorded (the daemon's sub-agent store)."""

    def record_revision(self, record: RevisionRecord) -> bool: ...

    def revisions(self, agent_id: str) -> list[RevisionRecord]: ...


def loaded_revision(bundle: Bundle, snapshot: Path) -> LoadedRevision:
    return LoadedRevision(bundle, snapshot, runtime_identity(bundle.manifest.id, bundle.digest))


class SubagentRegistry:
    def __init__(self, ledger: RevisionLedger, revisions_dir: Path) -> None:
        self.ledger = ledger
        self.revisions_dir = revisions_dir
        self._current: dict[str, LoadedRevision] = {}
        self._problems: list[BundleProblems] = []
        self._by_digest: dict[str, LoadedRevision] = {}  # every revision seen by this daemon
        self._in_use: Counter[str] = Counter()  # runtime identity -> invocations running
        self._lock = trio.Lock()
        self._scanned = False

    def current(self) -> Mapping[str, LoadedRevision]:
        return self._current

    def problems(self) -> Sequence[BundleProblems]:
        return tuple(self._problems)

    def callers(self) -> frozenset[str]:
        """Every caller some loaded sub-agent allows (agents among them get the tools)."""
        return frozenset(
            caller
            for revision in self._current.values()
            for caller in revision.bundle.manifest.policy.allowedCallers
        )

    async def rescan(self, config: Config, config_path: Path) -> None:
        """Scan the bundles of `config` (at start, and on every reload)."""
        directory = subagents_dir(config, config_path)
        async with self._lock:
            if not self._scanned:  # what a killed daemon left half-written
                self._scanned = True
                await trio.to_thread.run_sync(remove_leftovers, self.revisions_dir)
            loaded, refused = await trio.to_thread.run_sync(
                lambda: scan_bundles(
                    directory,
                    providers=frozenset(config.provider_ids()),
                    reserved=RESERVED_IDS | frozenset(config.agents),
                    mcp_servers={name: s.tools for name, s in config.mcp_servers.items()},
                )
            )
            current: dict[str, LoadedRevision] = {}
            for bundle in loaded:
                try:
                    revision = await trio.to_thread.run_sync(self._record, bundle)
                except OSError as exc:
                    refused.append(BundleProblems(directory / bundle.manifest.id, [str(exc)]))
                    continue
                current[bundle.manifest.id] = revision
            for problem in refused:
                log.error(
                    "sub-agent bundle %s not loaded: %s",
                    problem.path,
                    "; ".join(problem.problems),
                    extra={"bundle": str(problem.path)},
                )
            before = {a: r.bundle.digest for a, r in self._current.items()}
            self._current, self._problems = current, refused
            changed = {a: r.bundle.digest for a, r in current.items()} != before
            if changed or refused:
                log.info(
                    "sub-agents: %d loaded (%s), %d refused, from %s",
                    len(current),
                    ", ".join(f"{a}@{r.bundle.digest[:12]}" for a, r in sorted(current.items()))
                    or "none",
                    len(refused),
                    directory,
                )

    def _record(self, bundle: Bundle) -> LoadedRevision:
        # Every scan checks the snapshot on disk (and writes it again if it is gone or
        # damaged), even of a revision this daemon knows.
        snapshot = ensure_snapshot(bundle, self.revisions_dir)
        known = self._by_digest.get(bundle.digest)
        if known is not None:
            return known
        self.ledger.record_revision(
            RevisionRecord(
                agent_id=bundle.manifest.id,
                digest=bundle.digest,
                snapshot=str(snapshot),
                first_seen=time.time(),
                description=bundle.manifest.description,
            )
        )
        revision = self._by_digest[bundle.digest] = loaded_revision(bundle, snapshot)
        return revision

    def ensure_snapshot(self, revision: LoadedRevision) -> None:
        """Before a runtime starts on `revision`: its snapshot reads back as its digest, or
        is written again from the revision in memory (blocking)."""
        ensure_snapshot(revision.bundle, self.revisions_dir)

    @contextlib.contextmanager
    def hold(self, revision: LoadedRevision) -> Iterator[None]:
        """An invocation runs on `revision`: its runtime is not stale while it does."""
        self._in_use[revision.identity] += 1
        try:
            yield
        finally:
            self._in_use[revision.identity] -= 1
            if not self._in_use[revision.identity]:
                del self._in_use[revision.identity]

    def stale(self, identities: Iterable[str]) -> list[str]:
        """Runtimes of revisions that are not current any more and run no invocation: a
        new dispatch can never reach them, so they may stop now instead of idling."""
        current = {revision.identity for revision in self._current.values()}
        return [i for i in identities if i not in current and i not in self._in_use]

    def bound_servers(self, identity: str) -> frozenset[str]:
        """The MCP servers the revision running as `identity` binds (issue 26): what its
        runtime may pin and report on; none for an identity this daemon did not record."""
        for revision in self._by_digest.values():
            if revision.identity == identity:
                return frozenset(b.server for b in revision.bundle.manifest.mcp)
        return frozenset()

    def by_digest(self, digest: str) -> LoadedRevision:
        """Any revision this daemon recorded, read back from its snapshot when it is not
        loaded now (a retry after a restart). Raises SnapshotDamaged or OSError."""
        known = self._by_digest.get(digest)
        if known is not None:
            return known
        snapshot = self.revisions_dir / digest
        revision = loaded_revision(load_snapshot(snapshot), snapshot)
        self._by_digest[digest] = revision
        return revision
