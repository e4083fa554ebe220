"""Read-only reports over a finished scan: `discover doctor` (what keeps discovery from
working well, with the fix), `discover audit` (every registered agent, sub-agent and
adapter with its whole permission surface in one place) and, for `discover explain`, who
may reach an HTTP adapter's endpoint. Pure functions of the config, the snapshot and the
environment they are given."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

from ..config import (
    Config,
    all_channel_peers,
    daemon_paths,
    effective_risk_policy,
    endpoint_allowed,
    endpoint_key,
    workspace_path,
)
from ._http_adapter import http_endpoint, shown_url
from ._model import DiscoveredItem
from ._registry import over_http
from ._run import Outcome
from ._scan import Snapshot

CheckStatus = Literal["ok", "warn", "fail"]


class Check(msgspec.Struct, frozen=True):
    name: str
    status: CheckStatus
    message: str
    fix: str = ""


def discovery_checks(
    config: Config, outcome: Outcome, state_dir: Path, env: Mapping[str, str] | None = None
) -> list[Check]:
    """`env`: the daemon's environment, where `endpoint_env` and `api_key_env` are read
    (this process's when None)."""
    snap = outcome.snapshot
    checks: list[Check] = []
    writable = (
        os.access(state_dir, os.W_OK)
        if state_dir.exists()
        else os.access(_existing_parent(state_dir), os.W_OK)
    )
    checks.append(
        Check("cache", "ok", f"cache {outcome.cache_note} ({outcome.verdict})")
        if writable
        else Check(
            "cache",
            "fail",
            f"{state_dir} is not writable: the discovery cache cannot be kept",
            f"make {state_dir} writable by this user, or set [daemon] state_dir",
        )
    )
    found_commands = {
        e.item.program or e.item.id: e
        for e in snap.entries
        if e.item.source.kind in ("path", "config") and e.item.kind == "cli_adapter"
    }
    for name in config.discovery.commands:
        entry = found_commands.get(name)
        if entry is None:
            checks.append(Check(f"command {name}", "ok", "not installed on $PATH"))
        elif entry.decision.reason == "command_ambiguous":
            checks.append(
                Check(
                    f"command {name}",
                    "warn",
                    entry.decision.diagnostics[0].message,
                    f'pin one: [discovery.overrides.{name}] command_path = "/path/to/{name}"',
                )
            )
        elif entry.item.health.status not in ("available", "not_checked"):
            checks.append(
                Check(
                    f"command {name}",
                    "warn",
                    f"--version probe: {entry.item.health.status}"
                    + (f" ({entry.item.health.message})" if entry.item.health.message else ""),
                    f"run '{entry.item.command or name} --version' yourself to see why",
                )
            )
        else:
            checks.append(
                Check(
                    f"command {name}",
                    "ok",
                    f"{entry.item.command} {entry.item.health.version}".strip(),
                )
            )
    settings = config.discovery
    if settings.scan_user_dirs and not settings.allow_user_local_skills:
        checks.append(
            Check(
                "user directories",
                "ok",
                "user skills and prompts are shown only (allow_user_local_skills = false)",
            )
        )
    registry = {
        e.item.id for e in snap.entries if e.item.kind == "capability" and e.decision.registered
    }
    unknown = sorted(
        {
            cap
            for e in snap.entries
            if e.item.kind in ("cli_adapter", "http_adapter", "mcp_server", "workflow_skill")
            and e.decision.action != "shadowed"
            for cap in e.item.capabilities
            if cap not in registry
        }
    )
    checks.append(
        Check(
            "capability registry",
            "warn",
            f"capabilities named by manifests but not registered: {', '.join(unknown)}",
            "describe each in capabilities/<name>.yaml (name, side_effect, schemas, audit)",
        )
        if unknown
        else Check("capability registry", "ok", f"{len(registry)} capabilities registered")
    )
    adapters = [
        e for e in snap.entries if e.item.kind in ("cli_adapter", "http_adapter", "mcp_server")
    ]
    if adapters and not any(e.decision.registered for e in adapters):
        checks.append(
            Check(
                "adapters",
                "warn",
                f"none of the {len(adapters)} adapters found is registered",
                "run 'zeroclaw discover scan --explain-invalid' to see each reason",
            )
        )
    checks += _reach_checks(config, snap, os.environ if env is None else env)
    for report in snap.sources:
        if report.status != "ok":
            checks.append(
                Check(
                    f"source {report.name}",
                    "warn",
                    "; ".join(n.message for n in report.diagnostics) or report.status,
                    "raise [discovery] global_scan_timeout_ms, or fix what the message names",
                )
            )
    if snap.degraded:
        checks.append(
            Check(
                "required items",
                "fail",
                f"required but not registered: {', '.join(snap.degraded)}",
                "run 'zeroclaw discover explain ID' for each",
            )
        )
    return checks


# --- who may reach an endpoint (ADR 0054) ----------------------------------------------------


class EndpointGrant(msgspec.Struct, frozen=True):
    """An agent that lists an adapter reached over HTTP, and whether its risk profile lets
    the daemon reach the adapter's endpoint for it."""

    agent: str
    profile: str
    allowed: bool


class EndpointReach(msgspec.Struct, frozen=True):
    """Where an adapter over HTTP goes (`shown`: no query; `endpoint`: its `host:port`,
    "" while its endpoint_env is unset or not a URL), whether the daemon has its key, and
    which granting agents may reach it."""

    shown: str
    endpoint: str
    grants: tuple[EndpointGrant, ...]
    key_missing: str = ""  # the api_key_env variable the daemon's environment lacks


def endpoint_reach(
    config: Config, item: DiscoveredItem, env: Mapping[str, str]
) -> EndpointReach | None:
    """For an HTTP adapter or an MCP server over HTTP, where it goes and who may reach it;
    None for anything else."""
    if not over_http(item):
        return None
    url = http_endpoint(item, env)
    key = endpoint_key(url) or ""
    grants = []
    for alias, agent in sorted(config.agents.items()):
        if item.id not in agent.adapters or agent.risk_profile not in config.risk_profiles:
            continue
        allowed = config.risk_profiles[agent.risk_profile].allowed_endpoints
        grants.append(EndpointGrant(alias, agent.risk_profile, endpoint_allowed(url, allowed)))
    shown = shown_url(url) if key else (f"${item.endpoint_env}" if item.endpoint_env else "")
    missing = item.api_key_env if item.api_key_env and not env.get(item.api_key_env) else ""
    return EndpointReach(shown, key, tuple(grants), missing)


def _reach_checks(config: Config, snap: Snapshot, env: Mapping[str, str]) -> list[Check]:
    checks = []
    for entry in snap.entries:
        item = entry.item
        reach = endpoint_reach(config, item, env) if entry.decision.registered else None
        if reach is None:
            continue
        name = f"endpoint of {item.id}"
        if not reach.endpoint:
            checks.append(
                Check(
                    name,
                    "warn",
                    f"{reach.shown or 'its endpoint'} is unset or not an http(s) URL: every "
                    "call is refused (endpoint_invalid)",
                    f"set {reach.shown} in the daemon's environment to the service's URL",
                )
            )
            continue
        refused = [g for g in reach.grants if not g.allowed]
        for grant in refused:
            checks.append(
                Check(
                    name,
                    "warn",
                    f"{grant.agent} lists {item.id} but risk profile {grant.profile!r} does not "
                    f"allow {reach.endpoint}: its calls are refused (endpoint_not_allowed)",
                    f'add "{reach.endpoint}" to [risk_profiles.{grant.profile}] '
                    "allowed_endpoints, or drop it from the agent's adapters",
                )
            )
        if reach.key_missing:
            checks.append(
                Check(
                    name,
                    "warn",
                    f"${reach.key_missing} is not set: every call is refused (api_key_missing)",
                    f"set {reach.key_missing} in the daemon's environment (never in a file "
                    "beside the config)",
                )
            )
        if not refused and not reach.key_missing:
            who = ", ".join(g.agent for g in reach.grants) or "no agent lists it"
            checks.append(Check(name, "ok", f"{reach.shown} ({reach.endpoint}): {who}"))
    return checks


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class AuditRow(msgspec.Struct, frozen=True, kw_only=True):
    kind: Literal["agent", "subagent", "adapter"]
    id: str
    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    callers: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()  # what it connects to over the network (ADR 0054)

    def surface(self) -> list[tuple[str, str]]:
        return [
            (label, ", ".join(values) or "none")
            for label, values in (
                ("paths", self.paths),
                ("commands", self.commands),
                ("capabilities", self.capabilities),
                ("callers", self.callers),
                ("environment", self.env),
                ("endpoints", self.endpoints),
            )
        ]


def audit_rows(
    config: Config, config_path: Path, snapshot: Snapshot, env: Mapping[str, str]
) -> list[AuditRow]:
    registered = [e.item for e in snapshot.entries if e.decision.registered]
    adapters = {
        item.id: item
        for item in registered
        if item.kind in ("cli_adapter", "http_adapter", "mcp_server", "workflow_skill")
    }
    capabilities = {item.id: item.descriptor for item in registered if item.kind == "capability"}
    paths = daemon_paths(config, env)
    rows: list[AuditRow] = []
    for alias, agent in sorted(config.agents.items()):
        if not agent.enabled or agent.risk_profile is None:
            continue
        policy = effective_risk_policy(config, alias, env, config_path.parent)
        mode = "rw" if policy.may_write else "ro"
        grants = [
            f"{workspace_path(config, sibling, paths)} ({access})"
            for sibling, access in sorted(agent.workspace.access.items())
            if sibling in config.agents
        ]
        workspace = str(workspace_path(config, alias, paths))
        scope = "anywhere but forbidden_paths" if not policy.workspace_only else "workspace only"
        rows.append(
            AuditRow(
                kind="agent",
                id=alias,
                paths=(f"{workspace} ({mode}, {scope})", *grants),
                commands=tuple(sorted(policy.allowed_commands)) if policy.may_run_shell else (),
                capabilities=tuple(
                    f"{a}: {', '.join(_caps(adapters[a], capabilities))}"
                    for a in agent.adapters
                    if a in adapters
                )
                + tuple(
                    f"facade {tool} -> {target}" for tool, target in sorted(agent.facades.items())
                ),
                callers=_callers(config, alias),
                endpoints=config.risk_profiles[agent.risk_profile].allowed_endpoints,
            )
        )
    for item in registered:
        if item.kind == "subagent":
            rows.append(
                AuditRow(
                    kind="subagent",
                    id=item.id,
                    paths=(f"its revision snapshot (read only), digest {item.health.version}",),
                    capabilities=(f"effects: {item.effects or 'none'}",),
                    callers=item.callers,
                )
            )
    for ident, item in sorted(adapters.items()):
        reach = endpoint_reach(config, item, env)
        callers = tuple(
            alias for alias, agent in sorted(config.agents.items()) if ident in agent.adapters
        )
        if reach is not None:  # the daemon connects; no file, no program of the agent's
            refused = {g.agent for g in reach.grants if not g.allowed}
            rows.append(
                AuditRow(
                    kind="adapter",
                    id=ident,
                    capabilities=_caps(item, capabilities),
                    callers=tuple(
                        f"{a} (endpoint not allowed: refused)" if a in refused else a
                        for a in callers
                    ),
                    env=item.env,
                    endpoints=(
                        f"POST {reach.shown}" if item.kind == "http_adapter" else reach.shown,
                    )
                    if reach.shown
                    else (),
                )
            )
            continue
        rows.append(
            AuditRow(
                kind="adapter",
                id=ident,
                paths=("the calling agent's workspace, under its sandbox",),
                commands=(" ".join((item.command or item.program, *item.args)),)
                if item.command or item.program
                else (),
                capabilities=_caps(item, capabilities),
                callers=callers,
                env=item.env,
            )
        )
    return rows


def _caps(item: DiscoveredItem, registry: Mapping[str, object]) -> tuple[str, ...]:
    out = []
    for cap in item.capabilities:
        descriptor = registry.get(cap)
        effect = getattr(descriptor, "side_effect", "unknown")
        out.append(f"{cap} ({effect})")
    return tuple(out)


def _callers(config: Config, alias: str) -> tuple[str, ...]:
    """Who can start a turn on `alias`: its peers (per channel), its bound channels, the
    agents that may delegate to it, and the operator."""
    peers: set[str] = set()
    for channel_peers in all_channel_peers(config).get(alias, {}).values():
        peers.update(a for a in channel_peers.agents if a != alias)
    delegators = {a for a, agent in config.agents.items() if alias in agent.delegates}
    return (
        "operator (control socket)",
        *(f"channel {c}" for c in config.agents[alias].channels),
        *(f"peer {p}" for p in sorted(peers)),
        *(f"delegate of {d}" for d in sorted(delegators)),
    )
