"""One discovery run as the CLI (or the daemon) asks for it: the cache when it is fresh,
else a scan; the cache rewritten under its lock when the scan is complete and the caller
may write. The only place that combines the scan with the cache."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import trio

from .._flock import FileLock, LockHeld
from ._cache import DiscoveryCache, cache_file, current_inputs, verdict
from ._context import ScanContext
from ._scan import Snapshot, scan


class CacheLocked(Exception):
    """Another process is writing the cache."""

    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"{path} is being written by {holder} (another 'discover scan'); "
            "run again when it is done, or add --dry-run to scan without writing"
        )
        self.pid = pid


@dataclass(frozen=True)
class Outcome:
    snapshot: Snapshot
    from_cache: bool
    verdict: str  # why the cache was (not) used: fresh, missing, corrupt, sources_changed, ...
    previous: Snapshot | None  # what the cache held before, for --diff
    cache_note: str  # what happened to the cache file, in words


async def discover(
    ctx: ScanContext,
    config_bytes: bytes,
    state_dir: Path,
    *,
    sources: Collection[str] | None = None,
    refresh: bool = False,
    dry_run: bool = False,
    must_write: bool = False,
    tools: Mapping[str, str] | None = None,
) -> Outcome:
    """`must_write`: a writer that finds the lock held fails with CacheLocked (an explicit
    `scan --refresh`); otherwise it only skips the write. `tools`: MCP servers' tool-schema
    hashes seen since the cache was written (the daemon's last scan): a change rescans."""
    cache = DiscoveryCache(state_dir)
    lock: FileLock | None = None
    locked_by: int | None = None
    if not dry_run:
        lock = cache.lock()
        try:
            await trio.to_thread.run_sync(lock.acquire)
        except LockHeld as exc:
            lock, locked_by = None, exc.pid
            if must_write:
                raise CacheLocked(cache.path, exc.pid) from None
        except OSError:
            lock = None  # a read-only state dir: scan, do not write
    try:
        read = await trio.to_thread.run_sync(lambda: cache.read(repair=lock is not None))
        inputs = await trio.to_thread.run_sync(current_inputs, ctx, config_bytes)
        previous = read.cache.snapshot if read.cache is not None else None
        why: str = read.problem or verdict(
            read.cache, inputs, ctx.now, ctx.settings.health_ttl_secs, tools
        )
        if read.moved_to is not None:
            why = f"corrupt (moved aside to {read.moved_to.name})"
        if why == "fresh" and not refresh and sources is None and read.cache is not None:
            return Outcome(read.cache.snapshot, True, why, previous, "used")
        snapshot = await scan(ctx, sources)
        if dry_run:
            note = "not written (dry run)"
        elif sources is not None:
            note = "not written (a partial scan never replaces the cache)"
        elif not ctx.health_check:
            note = "not written (health checks were skipped)"
        elif lock is None:
            note = f"not written (locked by pid {locked_by})" if locked_by else "not written"
        else:
            await trio.to_thread.run_sync(cache.write, cache_file(snapshot, inputs, ctx.now))
            note = "written"
        return Outcome(snapshot, False, why, previous, note)
    finally:
        if lock is not None:
            lock.release()
