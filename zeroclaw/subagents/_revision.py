"""A revision on disk: a read-only snapshot of exactly what was digested (ADR 0023).

The snapshot is written from the loaded bundle, not copied from the bundle directory again,
so an edit made after the bundle was read can never slip into a revision. It is built in a
temporary directory and renamed into place: `<revisions>/<digest>/` exists whole or not at
all. An existing one is reused only when it reads back as its digest; one that is damaged,
incomplete or of other content is removed and written again from the bundle in memory.

Layout: `manifest.json` (the manifest as loaded), `SYSTEM.md`, `skills/<name>/SKILL.md`,
`schemas/input.json`, `schemas/output.json` (when declared).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

import msgspec

from ._bundle import MAX_FILE_BYTES, Bundle, Manifest, _Refused, digest_of, read_regular

READ_ONLY_FILE = 0o444
READ_ONLY_DIR = 0o555
# A snapshot file is a bundle file re-encoded: an indented schema of MAX_SCHEMA_DEPTH
# levels may grow ~130 times; the cap only bounds what a damaged snapshot makes us read.
_SNAPSHOT_FILE_CAP = 256 * MAX_FILE_BYTES
_LEFTOVER = re.compile(r"^\.[0-9a-f]{12}-")  # mkdtemp prefix of a snapshot being written


def _files(bundle: Bundle) -> dict[str, str]:
    files = {
        "manifest.json": json.dumps(msgspec.to_builtins(bundle.manifest), indent=2) + "\n",
        "SYSTEM.md": bundle.system_prompt,
    }
    for name, text in bundle.skills.items():
        files[f"skills/{name}/SKILL.md"] = text
    for what, schema in (("input", bundle.input_schema), ("output", bundle.output_schema)):
        if schema is not None:
            files[f"schemas/{what}.json"] = json.dumps(schema, indent=2) + "\n"
    return files


def _make_read_only(top: Path) -> None:
    for here, dirs, names in os.walk(top, topdown=False):
        for name in names:
            os.chmod(Path(here) / name, READ_ONLY_FILE)
        for name in dirs:
            os.chmod(Path(here) / name, READ_ONLY_DIR)
    os.chmod(top, READ_ONLY_DIR)


def _remove(top: Path) -> None:
    """Remove a (possibly read-only) tree we made, or whatever stands at its name."""
    if not top.is_dir() or top.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            top.unlink()
        return
    for here, dirs, _names in os.walk(top):
        with contextlib.suppress(OSError):
            os.chmod(here, 0o700)
        for name in dirs:
            if not (Path(here) / name).is_symlink():  # chmod would follow it out
                with contextlib.suppress(OSError):
                    os.chmod(Path(here) / name, 0o700)
    shutil.rmtree(top, ignore_errors=True)


def _intact(target: Path, digest: str) -> bool:
    """Whether `target` is a real directory that reads back as revision `digest`."""
    try:
        if not stat.S_ISDIR(os.lstat(target).st_mode):
            return False
    except FileNotFoundError:
        return False
    try:
        return load_snapshot(target).digest == digest
    except SnapshotDamaged:
        return False


def _discard(revisions: Path, target: Path, digest: str) -> None:
    """Move a damaged `target` aside (one rename: a racing writer's fresh snapshot is never
    half removed), then remove it."""
    aside = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-damaged-", dir=revisions))
    with contextlib.suppress(FileNotFoundError):  # another writer moved it first
        os.rename(target, aside / "old")
    _remove(aside)


def materialise(bundle: Bundle, revisions: Path) -> Path:
    """The snapshot directory of `bundle`'s revision (see `ensure_snapshot`)."""
    return ensure_snapshot(bundle, revisions)


def ensure_snapshot(bundle: Bundle, revisions: Path) -> Path:
    """The snapshot directory of `bundle`'s revision: an existing one that reads back as
    its digest is reused; anything else at its name is removed and the snapshot written
    from `bundle` (never from the bundle directory)."""
    target = revisions / bundle.digest
    for _attempt in range(3):
        if _intact(target, bundle.digest):
            return target
        revisions.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Looked at again: a racing writer may have renamed its whole snapshot in since.
        if os.path.lexists(target) and not _intact(target, bundle.digest):
            _discard(revisions, target, bundle.digest)
        if not os.path.lexists(target):
            _write(bundle, revisions, target)
    if _intact(target, bundle.digest):
        return target
    # An OSError, as any other failure to write it: the registry refuses the bundle.
    raise OSError(f"revision {target}: could not be written whole")


def _write(bundle: Bundle, revisions: Path, target: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix=f".{bundle.digest[:12]}-", dir=revisions))
    try:
        for rel, text in _files(bundle).items():
            path = work / rel
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _make_read_only(work)
        try:
            os.rename(work, target)
        except OSError:
            # Something is at `target` already: another writer won the race (checked by
            # the caller, like anything else found there).
            if not os.path.lexists(target):
                raise
    finally:
        if work.exists():
            _remove(work)


def remove_leftovers(revisions: Path) -> list[Path]:
    """Remove the temporary directories of snapshots a killed daemon was writing (or
    discarding): `.<digest12>-*` under `revisions`. Call it once, before the first scan
    writes snapshots. Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(revisions.iterdir())
    except FileNotFoundError:
        return removed
    for entry in entries:
        if _LEFTOVER.match(entry.name):
            _remove(entry)
            removed.append(entry)
    return removed


class SnapshotDamaged(Exception):
    """A revision directory that does not read back as the revision its name says."""


def load_snapshot(snapshot: Path) -> Bundle:
    """The revision in `snapshot`, read back (a retry after a restart runs the revision it
    was accepted with, whatever the bundle directory holds now). Its digest is recomputed:
    a snapshot edited behind the daemon's back is refused, not run. Files are read as the
    bundle's are (regular files only, no symlink, no FIFO, capped)."""

    def text(rel: str) -> str:
        return read_regular(snapshot, Path(rel), rel, cap=_SNAPSHOT_FILE_CAP).decode("utf-8")

    try:
        if not stat.S_ISDIR(os.lstat(snapshot).st_mode):
            raise SnapshotDamaged(f"revision {snapshot}: not a directory")
        manifest = msgspec.json.decode(text("manifest.json"), type=Manifest)
        skills = {
            Path(ref).name: text(f"skills/{Path(ref).name}/SKILL.md") for ref in manifest.skills
        }
        schemas: dict[str, dict[str, object] | None] = {}
        for what in ("input", "output"):
            rel = f"schemas/{what}.json"
            schemas[what] = json.loads(text(rel)) if os.path.lexists(snapshot / rel) else None
        bundle = Bundle(
            manifest=manifest,
            system_prompt=text("SYSTEM.md"),
            skills=skills,
            input_schema=schemas["input"],
            output_schema=schemas["output"],
        )
        digest = digest_of(bundle)
    except SnapshotDamaged:
        raise
    except (_Refused, OSError, ValueError, RecursionError, msgspec.MsgspecError) as exc:
        raise SnapshotDamaged(f"revision {snapshot}: {exc}") from None
    if digest != snapshot.name:
        raise SnapshotDamaged(f"revision {snapshot} holds content of digest {digest[:12]}")
    return dataclasses.replace(bundle, digest=digest)


def runtime_identity(agent_id: str, digest: str) -> str:
    """The bus identity of a revision's runtime: derived from the revision, and never a
    valid agent alias (`:` and `@` are not allowed in one)."""
    return f"sub:{agent_id}@{digest[:12]}"
