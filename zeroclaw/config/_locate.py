"""Find the config file: --config, $ZEROCLAW_CONFIG, the XDG path, then /etc."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from ._errors import ConfigError, ConfigIssue

SYSTEM_CONFIG = Path("/etc/zeroclaw/zeroclaw.toml")
# The shipped unit's StateDirectory=zeroclaw and RuntimeDirectory=zeroclaw.
SYSTEM_STATE_DIR = "/var/lib/zeroclaw"
SYSTEM_RUNTIME_DIR = "/run/zeroclaw"


def user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or "~", ".config")
    return Path(os.path.expanduser(base)) / "zeroclaw" / "zeroclaw.toml"


def config_candidates(explicit: str | None, env: Mapping[str, str]) -> list[Path]:
    """Where to look, in order. An explicit path or $ZEROCLAW_CONFIG is the only candidate."""
    if explicit:
        return [Path(explicit)]
    if env.get("ZEROCLAW_CONFIG"):
        return [Path(env["ZEROCLAW_CONFIG"])]
    return [user_config_path(env), SYSTEM_CONFIG]


def locate_config(
    explicit: str | None,
    env: Mapping[str, str],
    exists: Callable[[Path], bool] = Path.is_file,
) -> Path:
    """The first candidate that exists; an explicit choice is returned even if missing."""
    candidates = config_candidates(explicit, env)
    if len(candidates) == 1:
        return candidates[0]
    for candidate in candidates:
        if exists(candidate):
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise ConfigError(
        str(candidates[0]),
        [
            ConfigIssue(
                (),
                f"no config file found (looked at {looked}); pass --config, set "
                "$ZEROCLAW_CONFIG, or create one with 'zeroclaw config init'",
            )
        ],
    )


def system_dir_defaults(
    config_path: str | os.PathLike[str], env: Mapping[str, str]
) -> dict[str, str]:
    """The `[daemon]` dirs a file gets when it names none, because of where it is.

    The system config means the daemon of the shipped unit: its dirs are systemd's, so a CLI
    in a root shell (no $STATE_DIRECTORY there) finds the daemon and its store. Any other file
    gets nothing here (`daemon_paths` then falls back to XDG). $STATE_DIRECTORY and
    $RUNTIME_DIRECTORY, set by systemd for the daemon, still win: no default for those."""
    if os.path.abspath(config_path) != str(SYSTEM_CONFIG):
        return {}
    defaults = {}
    if not env.get("STATE_DIRECTORY"):
        defaults["state_dir"] = SYSTEM_STATE_DIR
    if not env.get("RUNTIME_DIRECTORY"):
        defaults["runtime_dir"] = SYSTEM_RUNTIME_DIR
    return defaults
