"""What a scan may look at: paths, limits and the config's discovery settings, gathered
once so that scanners read no global state (and tests can point them anywhere)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config, DiscoveryConfig, daemon_paths, subagents_dir, workspace_path
from ._model import Diagnostic, DiscoveredItem


@dataclass(frozen=True)
class Limits:
    max_files_per_dir: int = 500
    max_manifest_bytes: int = 1024 * 1024
    max_command_output_bytes: int = 65_536
    command_check_timeout: float = 2.0
    global_timeout: float = 30.0
    max_concurrent_scanners: int = 8


# The directories beside the config file that discovery reads and the daemon watches.
PROJECT_DIRS = ("adapters", "capabilities", "mcp")

SOURCE_NAMES = (
    "agents",
    "subagents",
    "adapters",
    "capabilities",
    "mcp",
    "path",
    "user_skills",
    "model_servers",
    "serial",
)


@dataclass(frozen=True)
class Found:
    """What one source found, and what it has to say about itself (not about an item)."""

    items: list[DiscoveredItem]
    notes: list[Diagnostic] = field(default_factory=list)


@dataclass(frozen=True)
class ScanContext:
    config: Config
    config_dir: Path
    env: Mapping[str, str]
    home: Path | None
    limits: Limits
    local_roots: tuple[Path, ...]  # the project and every agent workspace
    subagents_dir: Path
    health_check: bool = True
    now: float = field(default_factory=time.time)

    @property
    def settings(self) -> DiscoveryConfig:
        return self.config.discovery

    def project_dir(self, name: str) -> Path:
        return self.config_dir / name

    @property
    def user_config_dir(self) -> Path | None:
        xdg = self.env.get("XDG_CONFIG_HOME")
        if xdg:
            return Path(xdg) / "zeroclaw"
        return self.home / ".config" / "zeroclaw" if self.home else None


def scan_context(
    config: Config,
    config_path: Path,
    env: Mapping[str, str] | None = None,
    *,
    health_check: bool = True,
) -> ScanContext:
    env = dict(os.environ if env is None else env)
    settings = config.discovery
    limits = Limits(
        max_files_per_dir=settings.max_files_per_dir,
        max_manifest_bytes=settings.max_manifest_bytes,
        max_command_output_bytes=settings.max_command_output_bytes,
        command_check_timeout=settings.command_check_timeout_ms / 1000,
        global_timeout=settings.global_scan_timeout_ms / 1000,
        max_concurrent_scanners=settings.max_concurrent_scanners,
    )
    config_dir = Path(os.path.abspath(config_path)).parent
    paths = daemon_paths(config, env)
    workspaces = tuple(workspace_path(config, alias, paths) for alias in sorted(config.agents))
    home = Path(env["HOME"]) if env.get("HOME") else None
    return ScanContext(
        config=config,
        config_dir=config_dir,
        env=env,
        home=home,
        limits=limits,
        local_roots=(config_dir, *workspaces),
        subagents_dir=subagents_dir(config, config_path),
        health_check=health_check,
    )
