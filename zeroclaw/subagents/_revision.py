"""A revision on disk: a read-only snapshot of exactly what was digested (ADR 0023).

The snapshot is written from the loaded bundle, not copied from the bundle directory again,
so an edit made after the bundle was read can never slip into a revision. It is built in a
temporary directory and renamed into place: `<revisions>/<digest>/` exists whole or not at
all, and an existing one is reused (same digest, same content).

Layout: `manifest.json` (the manifest as loaded), `SYSTEM.md`, `skills/<name>/SKILL.md`,
`schemas/input.json`, `schemas/output.json` (when declared).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from ._bundle import Bundle, Manifest, digest_of

READ_ONLY_FILE = 0o444
READ_ONLY_DIR = 0o555


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
    """Remove a (possibly read-only) tree we made."""
    for here, dirs, _names in os.walk(top):
        os.chmod(here, 0o700)
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(Path(here) / name, 0o700)
    shutil.rmtree(top, ignore_errors=True)


def materialise(bundle: Bundle, revisions: Path) -> Path:
    """The snapshot directory of `bundle`'s revision, written if it is not there yet."""
    target = revisions / bundle.digest
    if target.is_dir():
        return target
    revisions.mkdir(mode=0o700, parents=True, exist_ok=True)
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
            if not target.is_dir():
                raise
            # Another writer won the race with the same digest: the same content.
    finally:
        if work.exists():
            _remove(work)
    return target


class SnapshotDamaged(Exception):
    """A revision directory that does not read back as the revision its name says."""


def load_snapshot(snapshot: Path) -> Bundle:
    """The revision in `snapshot`, read back (a retry after a restart runs the revision it
    was accepted with, whatever the bundle directory holds now). Its digest is recomputed:
    a snapshot edited behind the daemon's back is refused, not run."""
    try:
        manifest = msgspec.json.decode((snapshot / "manifest.json").read_bytes(), type=Manifest)
        skills = {
            name: (snapshot / "skills" / name / "SKILL.md").read_text(encoding="utf-8")
            for name in manifest.skills
        }
        schemas: dict[str, dict[str, Any] | None] = {}
        for what in ("input", "output"):
            path = snapshot / "schemas" / f"{what}.json"
            schemas[what] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        bundle = Bundle(
            manifest=manifest,
            system_prompt=(snapshot / "SYSTEM.md").read_text(encoding="utf-8"),
            skills=skills,
            input_schema=schemas["input"],
            output_schema=schemas["output"],
        )
    except (OSError, ValueError, msgspec.MsgspecError) as exc:
        raise SnapshotDamaged(f"revision {snapshot}: {exc}") from None
    digest = digest_of(bundle)
    if digest != snapshot.name:
        raise SnapshotDamaged(f"revision {snapshot} holds content of digest {digest[:12]}")
    return dataclasses.replace(bundle, digest=digest)


def runtime_identity(agent_id: str, digest: str) -> str:
    """The bus identity of a revision's runtime: derived from the revision, and never a
    valid agent alias (`:` and `@` are not allowed in one)."""
    return f"sub:{agent_id}@{digest[:12]}"
