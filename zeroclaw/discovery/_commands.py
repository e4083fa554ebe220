"""Finding an allowlisted program: every place $PATH offers it, which one counts, and the
capabilities zeroclaw knows the well-known ones to have (the builtin templates).

Only names in `[discovery] commands` are looked up; nothing else on $PATH is ever listed.
Every candidate is recorded with the path as found and its canonical target. A candidate
inside the project (the config's directory) or an agent workspace, or found through a
relative $PATH entry, is workspace-local: it is ignored unless pinned, so a checked-out
repository cannot slip its own `codex` in front of the system's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ._files import inside
from ._model import CommandCandidate, Diagnostic

# What the well-known programs can do, by name (PATH items without a project manifest).
BUILTIN_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "codex": ("repo.analyze", "code.review", "code.generate"),
    "claude": ("chat.reply", "task.plan", "code.review"),
    "gemini": ("chat.reply", "task.plan"),
    "ollama": ("chat.reply",),
}


@dataclass(frozen=True)
class Resolution:
    candidates: tuple[CommandCandidate, ...]
    command: str  # the canonical program to probe and run; "" when none or ambiguous
    pinned: bool
    diagnostics: tuple[Diagnostic, ...]


def candidates(
    name: str, path_env: str, local_roots: Iterable[Path], cwd: Path
) -> tuple[CommandCandidate, ...]:
    """Every executable `name` on `path_env`, in order, each canonical target once."""
    roots = [Path(os.path.realpath(r)) for r in local_roots]
    found: list[CommandCandidate] = []
    seen: set[str] = set()
    for entry in path_env.split(os.pathsep):
        relative = not entry or not os.path.isabs(entry)
        directory = (cwd / entry) if relative else Path(entry)
        candidate = directory / name
        try:
            if not (candidate.is_file() and os.access(candidate, os.X_OK)):
                continue
        except OSError:
            continue
        display = str(candidate)
        if display in seen:
            continue
        seen.add(display)
        canonical = os.path.realpath(candidate)
        local = relative or any(inside(Path(canonical), r) or inside(candidate, r) for r in roots)
        found.append(CommandCandidate(display, canonical, local))
    return tuple(found)


def resolve(
    name: str,
    path_env: str,
    local_roots: Iterable[Path],
    cwd: Path,
    pin: Path | None = None,
) -> Resolution:
    """Where `name` is, and which program counts: the pin, else the one trusted candidate."""
    found = candidates(name, path_env, local_roots, cwd)
    notes: list[Diagnostic] = []
    if pin is not None:
        if pin.is_file() and os.access(pin, os.X_OK):
            return Resolution(found, os.path.realpath(pin), True, ())
        notes.append(
            Diagnostic(
                "error",
                "command_not_found",
                f"the pinned command_path {pin} is not an executable file",
            )
        )
        return Resolution(found, "", True, tuple(notes))
    shadows = [c for c in found if c.workspace_local]
    if shadows:
        notes.append(
            Diagnostic(
                "warning",
                "path_not_allowed",
                f"ignored workspace-local {name!r} at {', '.join(c.display for c in shadows)} "
                "(pin it with command_path to use it)",
            )
        )
    trusted = {c.canonical for c in found if not c.workspace_local}
    if len(trusted) > 1:
        notes.append(
            Diagnostic(
                "warning",
                "command_ambiguous",
                f"{name!r} resolves to {len(trusted)} different programs",
            )
        )
    command = next(iter(trusted)) if len(trusted) == 1 else ""
    return Resolution(found, command, False, tuple(notes))


def path_of(env: Mapping[str, str]) -> str:
    return env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
