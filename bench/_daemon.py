"""The config every benchmark daemon runs: offline agents in one peer group, quiet logs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tomli_w


def write_bench_config(root: Path, aliases: Iterable[str], *, grouped: bool = False) -> Path:
    """Write `<root>/zeroclaw.toml`; state in `<root>/s`, sockets in `<root>/r`."""
    aliases = list(aliases)
    doc = {
        "daemon": {
            "state_dir": str(root / "s"),
            "runtime_dir": str(root / "r"),
            "log_format": "json",
            "log_level": "warning",
        },
        "providers": {"offline": {"default": {}}},
        "risk_profiles": {"r": {"level": "readonly"}},
        "runtime_profiles": {"d": {}},
        "channels": {"cli": {"local": {}}},
        "agents": {
            alias: {
                "model_provider": "offline.default",
                "risk_profile": "r",
                "runtime_profile": "d",
                "channels": ["cli.local"],
            }
            for alias in aliases
        },
        "peer_groups": {"g": {"channel": "cli", "agents": aliases}} if grouped else {},
    }
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def workspace(root: Path, alias: str) -> Path:
    return root / "s" / "agents" / alias / "workspace"
