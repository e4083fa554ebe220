"""The discovery cache: `<state_dir>/discovery-cache.json`, written whole or not at all.

A cache only speeds up showing; it never registers anything by itself. It is trusted
only while everything it was built from is unchanged: its schema version, the program
version, the config file, the capability registry, every source file (mtime, size,
inode), the programs on $PATH, the health TTL and, once a probe has seen them, the tool
schemas of MCP servers (`tools_changed`). `verdict` decides that as a pure
function. Writers hold an exclusive lock (`discovery-cache.lock`): a second writer gets
`cache_locked` and may only read or dry-run. A file that does not parse is moved aside to
`.bad-<timestamp>` and rebuilt; one of another schema version is ignored and replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from .._atomic import atomic_write
from .._flock import FileLock
from .._version import __version__
from ._context import PROJECT_DIRS, ScanContext
from ._model import SCHEMA_VERSION
from ._project import BUILTIN_CAPABILITIES
from ._scan import Snapshot, redact_snapshot

CACHE_NAME = "discovery-cache.json"
LOCK_NAME = "discovery-cache.lock"

Fingerprint = tuple[int, int, int]  # mtime_ns, size, inode


class CacheFile(msgspec.Struct, frozen=True, kw_only=True):
    schema_version: int
    program_version: str
    config_hash: str
    registry_hash: str
    sources: dict[str, Fingerprint]
    written_at: float
    snapshot: Snapshot


class _Versioned(msgspec.Struct):
    schema_version: int


@dataclass(frozen=True)
class Inputs:
    """What a scan would be built from now, for comparing with what a cache was."""

    config_hash: str
    registry_hash: str
    sources: dict[str, Fingerprint]


Verdict = Literal[
    "fresh",
    "missing",
    "corrupt",
    "incompatible",
    "program_changed",
    "config_changed",
    "registry_changed",
    "sources_changed",
    "health_expired",
    "tools_changed",
]


def tool_hashes(snapshot: Snapshot) -> dict[str, str]:
    """Each probed MCP server's tool-schema hash (`McpMetadata.tools_hash`), by key."""
    return {e.item.key: e.item.mcp.tools_hash for e in snapshot.entries if e.item.mcp is not None}


def verdict(
    cached: CacheFile | None,
    inputs: Inputs,
    now: float,
    ttl_secs: float,
    tools: Mapping[str, str] | None = None,
) -> Verdict:
    """Whether `cached` may be shown as the current scan (pure). `tools`: the tool-schema
    hashes of MCP servers as a probe (or an agent's listing) saw them since; one that
    differs from what the cache holds, or a server the cache never probed, makes it stale."""
    if cached is None:
        return "missing"
    if cached.schema_version != SCHEMA_VERSION:
        return "incompatible"
    if cached.program_version != __version__:
        return "program_changed"
    if cached.config_hash != inputs.config_hash:
        return "config_changed"
    if cached.registry_hash != inputs.registry_hash:
        return "registry_changed"
    if cached.sources != inputs.sources:
        return "sources_changed"
    if now - cached.written_at > ttl_secs:
        return "health_expired"
    if tools:
        held = tool_hashes(cached.snapshot)
        if any(held.get(key) != digest for key, digest in tools.items()):
            return "tools_changed"
    return "fresh"


def fingerprints(paths: Iterable[Path]) -> dict[str, Fingerprint]:
    """mtime, size and inode of each path that exists (directories included, so an added
    or removed file changes its directory's mtime)."""
    out: dict[str, Fingerprint] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        out[str(path)] = (info.st_mtime_ns, info.st_size, info.st_ino)
    return out


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class ReadResult:
    cache: CacheFile | None
    problem: Literal["", "missing", "corrupt", "incompatible"]
    moved_to: Path | None = None


class DiscoveryCache:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / CACHE_NAME
        self.lock_path = state_dir / LOCK_NAME

    def read(self, *, repair: bool) -> ReadResult:
        """The cache on disk. With `repair`, a corrupt file is moved aside (the caller
        must hold the lock)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return ReadResult(None, "missing")
        except OSError:
            return ReadResult(None, "corrupt")
        try:
            version = msgspec.json.decode(data, type=_Versioned).schema_version
        except (msgspec.DecodeError, msgspec.ValidationError):
            return ReadResult(None, "corrupt", self._move_aside() if repair else None)
        if version != SCHEMA_VERSION:
            return ReadResult(None, "incompatible")
        try:
            cached = msgspec.json.decode(data, type=CacheFile)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return ReadResult(None, "corrupt", self._move_aside() if repair else None)
        # A file an older version wrote may hold what is redacted now: never shown, never
        # used (its decisions were taken on the secret), so scanned anew and replaced.
        if redact_snapshot(cached.snapshot) != cached.snapshot:
            return ReadResult(None, "incompatible")
        return ReadResult(cached, "")

    def _move_aside(self) -> Path | None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        target = self.path.with_name(f"{CACHE_NAME}.bad-{stamp}")
        try:
            os.rename(self.path, target)
        except OSError:
            return None
        return target

    def lock(self) -> FileLock:
        """The writers' lock; `acquire()` raises LockHeld at once if another holds it."""
        return FileLock(self.lock_path, record_pid=True, make_parent=True)

    def write(self, cache: CacheFile) -> None:
        """Replace the cache whole (tmp, fsync, rename, fsync of the directory)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        cache = msgspec.structs.replace(cache, snapshot=redact_snapshot(cache.snapshot))
        atomic_write(self.path, msgspec.json.encode(cache), mode=0o600)
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def clear(self) -> bool:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
            return True
        return False


def current_inputs(ctx: ScanContext, config_bytes: bytes) -> Inputs:
    """What a scan now would be built from: cheap (stat only, no file content but the
    config's), so that a warm `discover list` costs a few milliseconds."""
    watched = project_paths(ctx.config_dir, ctx.subagents_dir, ctx.limits.max_files_per_dir)
    if ctx.settings.scan_user_dirs and ctx.home is not None:
        for sub in (".codex/skills", ".agents/skills", ".codex/prompts", ".agents/prompts"):
            watched.extend(_tree(ctx.home / sub, depth=1, limit=ctx.limits.max_files_per_dir * 2))
        if ctx.user_config_dir is not None:
            watched.extend(_tree(ctx.user_config_dir / "mcp", 0, ctx.limits.max_files_per_dir))
    path_env = ctx.env.get("PATH", "")
    for entry in path_env.split(os.pathsep):
        watched.extend(Path(entry or ".") / name for name in ctx.settings.commands)
    watched.append(Path("/dev/serial/by-id"))
    sources = fingerprints(watched)
    capabilities = {
        k: v for k, v in sources.items() if k.startswith(str(ctx.project_dir("capabilities")))
    }
    builtin = msgspec.json.encode(BUILTIN_CAPABILITIES)
    return Inputs(
        config_hash=digest(
            config_bytes + b"\0" + path_env.encode() + b"\0" + str(ctx.home).encode()
        ),
        registry_hash=digest(builtin + msgspec.json.encode(capabilities)),
        sources=sources,
    )


def project_paths(config_dir: Path, subagents: Path, max_files_per_dir: int) -> list[Path]:
    """The project's discovery directories (adapters/, capabilities/, mcp/ beside the config,
    and the sub-agent bundles) and what is beneath them, bounded: what the cache's verdict
    and the daemon's watch both look at."""
    paths: list[Path] = []
    for directory in (*(config_dir / name for name in PROJECT_DIRS), subagents):
        paths.extend(_tree(directory, depth=2, limit=max_files_per_dir * 8))
    return paths


def _tree(directory: Path, depth: int, limit: int) -> list[Path]:
    """`directory` and what is beneath it down to `depth` levels, at most `limit` paths."""
    out = [directory]
    frontier = [directory]
    for _ in range(depth + 1):
        following: list[Path] = []
        for current in frontier:
            try:
                entries = sorted(os.scandir(current), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if len(out) >= limit:
                    return out
                out.append(Path(entry.path))
                if entry.is_dir(follow_symlinks=False):
                    following.append(Path(entry.path))
        frontier = following
    return out


def cache_file(snapshot: Snapshot, inputs: Inputs, now: float) -> CacheFile:
    return CacheFile(
        schema_version=SCHEMA_VERSION,
        program_version=__version__,
        config_hash=inputs.config_hash,
        registry_hash=inputs.registry_hash,
        sources=inputs.sources,
        written_at=now,
        snapshot=snapshot,
    )
