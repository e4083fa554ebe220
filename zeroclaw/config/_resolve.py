"""Pure functions that turn a validated Config into the facts the daemon acts on.

No I/O here: the environment is passed in as a mapping, paths are normalised, not
resolved against the filesystem (symlinks are the path policy's job at use time).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .._sender_names import normalize_sender
from ._light import daemon_dirs
from ._models import Config, RiskLevel

# "internal-workflow" is a caller name of sub-agents (allowedCallers), as "cli" is.
RESERVED_ALIASES = frozenset({"daemon", "cli", "internal-workflow", "system", "all"})


# --------------------------------------------------------------------------- daemon paths


@dataclass(frozen=True, slots=True)
class DaemonPaths:
    state_dir: Path
    runtime_dir: Path


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def daemon_paths(config: Config, env: Mapping[str, str]) -> DaemonPaths:
    """Where state and runtime files live: the file's setting, then systemd's, then XDG's
    (one rule, `_light.daemon_dirs`, which the light read of ADR 0035 applies too)."""
    state, runtime = daemon_dirs(config.daemon.state_dir, config.daemon.runtime_dir, env)
    return DaemonPaths(state, runtime)


def subagents_dir(config: Config, config_path: Path) -> Path:
    """Where sub-agent bundles live: `[subagents] dir`, else `subagents/` beside the file."""
    if config.subagents.dir is not None:
        return config.subagents.dir
    return Path(os.path.normpath(Path(os.path.abspath(config_path)).parent / "subagents"))


def skills_dirs(config: Config, config_path: Path) -> tuple[Path, ...]:
    """Where skill folders live, in search order: `[skills] dirs`, else `skills/` beside
    the file. Empty when no enabled agent lists a skill: then they are nobody's business
    (neither protected nor checked, ADR 0056)."""
    if not any(agent.enabled and agent.skills for agent in config.agents.values()):
        return ()
    if config.skills.dirs is not None:
        return config.skills.dirs
    return (Path(os.path.normpath(Path(os.path.abspath(config_path)).parent / "skills")),)


def workspace_path(config: Config, alias: str, paths: DaemonPaths) -> Path:
    """The agent's workspace root: its own setting, else `<state_dir>/agents/<alias>/workspace`."""
    configured = config.agents[alias].workspace.path
    if configured is not None:
        return configured
    return paths.state_dir / "agents" / alias / "workspace"


# --------------------------------------------------------------------------- channels


def channel_matches(group_channel: str, channel_id: str) -> bool:
    """A peer group's channel is a bare type ('cli') or a dotted alias ('cli.local')."""
    if "." in group_channel:
        return group_channel == channel_id
    return channel_id.partition(".")[0] == group_channel


def default_owner(config: Config) -> str | None:
    """`default` if it exists and is enabled, else the smallest enabled alias."""
    enabled = sorted(alias for alias, agent in config.agents.items() if agent.enabled)
    if "default" in enabled:
        return "default"
    return enabled[0] if enabled else None


def channel_owners(config: Config) -> dict[str, tuple[str, ...]]:
    """Which enabled agents receive inbound messages of each configured channel.

    Bound agents own a channel. When no agent declares any binding at all, every channel
    falls back to one deterministic owner (`default_owner`). A channel nobody binds while
    others do has no owner: its input is refused, never guessed.
    """
    any_binding = any(agent.channels for agent in config.agents.values())
    # A gateway token's channel is owned by the agents the token lists (its reach), with
    # or without bindings elsewhere: no agent binds an `api.*` channel.
    enabled = {alias for alias, agent in config.agents.items() if agent.enabled}
    owners: dict[str, tuple[str, ...]] = {
        channel: tuple(sorted(enabled.intersection(agents)))
        for channel, agents in api_reach(config).items()
    }
    if not any_binding:
        owner = default_owner(config)
        for channel in config.channel_ids():
            owners.setdefault(channel, (owner,) if owner else ())
        return owners
    for channel in config.channel_ids():
        if channel in owners:
            continue
        owners[channel] = tuple(
            sorted(
                alias
                for alias, agent in config.agents.items()
                if agent.enabled and channel in agent.channels
            )
        )
    return owners


def api_reach(config: Config) -> dict[str, tuple[str, ...]]:
    """Each gateway token's channel (`api.<name>`) -> the agents the token lists."""
    if config.gateway is None:
        return {}
    return {f"api.{name}": token.agents for name, token in sorted(config.gateway.tokens.items())}


# --------------------------------------------------------------------------- peers


def normalize_peer_name(name: str) -> str:
    """External sender names compare case-insensitively with one leading '@' stripped: the
    same key as an origin's sender (`normalize_sender`)."""
    return normalize_sender(name)


@dataclass(frozen=True, slots=True)
class ExternalPeerRule:
    """Which non-agent senders an agent accepts on one channel."""

    allow_any: bool
    allowed: frozenset[str]
    ignored: frozenset[str]

    def accepts(self, sender: str) -> bool:
        # Deny by default, and `ignore` beats any allowance from any group.
        name = normalize_peer_name(sender)
        if not name or name in self.ignored:
            return False
        return self.allow_any or name in self.allowed


@dataclass(frozen=True, slots=True)
class ChannelPeers:
    """An agent's peers on one channel: fellow agents and accepted external senders."""

    channel: str
    agents: frozenset[str]
    groups: tuple[str, ...]
    external: ExternalPeerRule


def channel_peers(config: Config, alias: str, channel_id: str) -> ChannelPeers:
    """Peers of `alias` on `channel_id`: the union over every group on that channel listing it."""
    agents: set[str] = set()
    groups: list[str] = []
    allow_any = False
    allowed: set[str] = set()
    ignored: set[str] = set()
    for name in sorted(config.peer_groups):
        group = config.peer_groups[name]
        if alias not in group.agents or not channel_matches(group.channel, channel_id):
            continue
        groups.append(name)
        agents.update(a for a in group.agents if a != alias)
        for peer in group.external_peers:
            if peer.strip() == "*":
                allow_any = True
            elif normalize_peer_name(peer):
                allowed.add(normalize_peer_name(peer))
        ignored.update(n for n in map(normalize_peer_name, group.ignore) if n)
    agents &= set(config.agents)
    return ChannelPeers(
        channel=channel_id,
        agents=frozenset(agents),
        groups=tuple(groups),
        external=ExternalPeerRule(allow_any, frozenset(allowed), frozenset(ignored)),
    )


def all_channel_peers(config: Config) -> dict[str, dict[str, ChannelPeers]]:
    """`{alias: {channel_id: ChannelPeers}}` for every agent and every configured channel."""
    return {
        alias: {ch: channel_peers(config, alias, ch) for ch in config.channel_ids()}
        for alias in sorted(config.agents)
    }


# --------------------------------------------------------------------------- risk policy


@dataclass(frozen=True, slots=True)
class EffectiveRiskPolicy:
    """What an agent's tools may do, after combining its profile with its workspace settings."""

    profile: str
    level: RiskLevel
    workspace_only: bool
    allowed_commands: frozenset[str]
    forbidden_paths: tuple[Path, ...]
    require_approval_for_medium_risk: bool
    block_high_risk_commands: bool
    sandbox: Literal["auto", "landlock", "none"]
    approval_timeout_secs: float = 120.0

    @property
    def may_write(self) -> bool:
        return self.level != "readonly"

    @property
    def may_run_shell(self) -> bool:
        return self.level != "readonly"

    @property
    def asks_approval(self) -> bool:
        return self.level == "supervised" and self.require_approval_for_medium_risk


def _expand(path: str, home: Path, base_dir: Path | None) -> Path:
    if path == "~" or path.startswith("~/"):
        expanded = home / path[2:] if path != "~" else home
    else:
        expanded = Path(path)
        if not expanded.is_absolute() and base_dir is not None:
            expanded = base_dir / expanded
    return Path(os.path.normpath(expanded))


def expand_path(path: str, env: Mapping[str, str]) -> Path | None:
    """A forbidden path as an absolute path: '~' is the daemon user's home; relative ones
    (resolved against the config file elsewhere) are skipped here."""
    if path == "~" or path.startswith("~/"):
        return _expand(path, _home(env), None)
    return Path(os.path.normpath(path)) if path.startswith("/") else None


def readonly_agents(config: Config) -> frozenset[str]:
    """The agents whose risk profile is readonly: the memory service refuses their stores
    and forgets, the router their delegations (ADR 0039)."""
    return frozenset(
        alias
        for alias, agent in config.agents.items()
        if agent.risk_profile in config.risk_profiles
        and config.risk_profiles[agent.risk_profile].level == "readonly"
    )


def effective_risk_policy(
    config: Config, alias: str, env: Mapping[str, str], base_dir: Path | None = None
) -> EffectiveRiskPolicy:
    """`full` (or `unrestricted_filesystem`) drops workspace_only; forbidden paths always stay."""
    agent = config.agents[alias]
    if agent.risk_profile is None:
        raise KeyError(f"agent {alias!r} has no risk_profile")
    name = agent.risk_profile
    profile = config.risk_profiles[name]
    home = _home(env)
    workspace_only = (
        profile.workspace_only
        and profile.level != "full"
        and not agent.workspace.unrestricted_filesystem
    )
    return EffectiveRiskPolicy(
        profile=name,
        level=profile.level,
        workspace_only=workspace_only,
        allowed_commands=frozenset(profile.allowed_commands),
        forbidden_paths=tuple(_expand(p, home, base_dir) for p in profile.forbidden_paths),
        require_approval_for_medium_risk=profile.require_approval_for_medium_risk,
        block_high_risk_commands=profile.block_high_risk_commands,
        sandbox=profile.sandbox,
        approval_timeout_secs=profile.approval_timeout_secs,
    )
