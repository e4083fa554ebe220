"""What a one-shot command needs from the config file, read without the pydantic models.

`zeroclaw status` or `chat -m` through a running daemon only needs the daemon's runtime dir
(to find its control socket) and which agents the file enables. Building the validated
`Config` for that costs more than the whole command (ADR 0035), so this reads the TOML with
tomllib and applies the same defaults as `_locate.system_dir_defaults`, the model's path
rule and `_resolve.daemon_paths`. Whenever the file holds anything the model could read
differently (a non-string path, a NUL, an unknown `~user`, too deep a nesting), the answer
is None and the caller loads the full config instead: never a guess.
tests/config/test_light.py checks that both give the same paths for the same file and env.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._locate import system_dir_defaults

# The same bounds as `_load` (a bigger or deeper file is an error there: not ours to read).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 16


@dataclass(frozen=True, slots=True)
class LightConfig:
    """The daemon's paths and the enabled agents, as the file says them."""

    state_dir: Path
    runtime_dir: Path
    enabled_agents: frozenset[str]


def read_light_config(path: str | os.PathLike[str], env: Mapping[str, str]) -> LightConfig | None:
    """The file at `path` read lightly; None when it cannot be read that way (missing,
    unreadable, not TOML, or anything `light_config` refuses)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            return None
        doc = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    return light_config(doc, path, env)


def light_config(
    doc: Mapping[str, Any], path: str | os.PathLike[str], env: Mapping[str, str]
) -> LightConfig | None:
    """Pure: a parsed document of the file at `path` -> its daemon's paths under `env`."""
    if _too_deep(doc):
        return None
    table = doc.get("daemon", {})
    if not isinstance(table, dict):
        return None
    table = {**system_dir_defaults(path, env), **table}
    base_dir = Path(os.path.abspath(path)).parent
    try:
        state_dir = _config_path(table.get("state_dir"), base_dir)
        runtime_dir = _config_path(table.get("runtime_dir"), base_dir)
    except _Unsure:
        return None
    state, runtime = daemon_dirs(state_dir, runtime_dir, env)
    return LightConfig(state, runtime, _enabled_agents(doc.get("agents")))


def daemon_dirs(
    state_dir: Path | None, runtime_dir: Path | None, env: Mapping[str, str]
) -> tuple[Path, Path]:
    """`_resolve.daemon_paths` on the file's two settings: the file's setting, then
    systemd's, then XDG's."""
    state = state_dir
    if state is None:
        if env.get("STATE_DIRECTORY"):
            state = Path(env["STATE_DIRECTORY"].split(":")[0])  # systemd's first is ours
        elif env.get("XDG_STATE_HOME"):
            state = Path(env["XDG_STATE_HOME"]) / "zeroclaw"
        else:
            home = Path(env.get("HOME") or os.path.expanduser("~"))
            state = home / ".local" / "state" / "zeroclaw"
    runtime = runtime_dir
    if runtime is None:
        if env.get("RUNTIME_DIRECTORY"):
            runtime = Path(env["RUNTIME_DIRECTORY"].split(":")[0])
        elif env.get("XDG_RUNTIME_DIR"):
            runtime = Path(env["XDG_RUNTIME_DIR"]) / "zeroclaw"
        else:
            runtime = state / "run"
    return Path(os.path.normpath(state)), Path(os.path.normpath(runtime))


class _Unsure(Exception):
    """The model would refuse this value, or might read it otherwise."""


def _config_path(value: object, base_dir: Path) -> Path | None:
    """The model's path rule (`_models._resolve_path`); None when unset."""
    if value is None:
        return None
    if not isinstance(value, str) or "\x00" in value:
        raise _Unsure
    try:
        resolved = Path(value).expanduser()
    except RuntimeError:  # "~name" of a user this machine does not have
        raise _Unsure from None
    if not resolved.is_absolute():
        resolved = base_dir / resolved
    return Path(os.path.normpath(resolved))


def _enabled_agents(table: object) -> frozenset[str]:
    """The aliases whose entry does not say `enabled = false` (the model's default is
    true); the daemon still refuses an alias it does not run."""
    if not isinstance(table, dict):
        return frozenset()
    return frozenset(
        alias
        for alias, entry in table.items()
        if isinstance(entry, dict) and entry.get("enabled", True) is True
    )


def _too_deep(doc: object) -> bool:
    """Whether nesting passes MAX_DEPTH (`_load` refuses such a file), without recursion."""
    stack: list[tuple[object, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return False
