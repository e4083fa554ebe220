"""Validation rules that span entries (SPEC §3). Pure: config in, issues out.

Each rule is its own function so a test can break exactly one. References are checked
against `Declared` — every name present in the raw document — so an entry that failed
its own validation does not also produce "unknown reference" noise wherever it is used.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, get_args
from urllib.parse import urlsplit

from ._budgets import EVERY, PEER, BudgetKey, parse_budget_key
from ._endpoints import endpoint_allowed, endpoint_key
from ._errors import ConfigIssue, did_you_mean
from ._models import (
    ADAPTER_TOOL_NAME,
    API_CHANNEL_TYPE,
    HEARTBEAT_SCHEDULE,
    MCP_SERVER_NAME,
    MCP_TOOL_PREFIX,
    PROVIDER_TOOL_NAME,
    REMINDER_PREFIX,
    SKILL_TOOL_NAME,
    AgentConfig,
    ChannelsTable,
    Config,
    DispatchToolName,
    ProvidersTable,
    ReminderToolName,
    TelegramChannel,
    ToolName,
    mcp_tool_name,
)
from ._resolve import (
    RESERVED_ALIASES,
    api_reach,
    channel_matches,
    channel_owners,
    daemon_paths,
    default_owner,
    expand_path,
    skills_dirs,
    workspace_path,
)

ALIAS_SYNTAX = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# A facade's tool name: what providers accept as a function name, lowercase.
TOOL_NAME_SYNTAX = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# A sub-agent id: the same as zeroclaw.subagents.ID_SYNTAX (a test keeps them equal); not
# imported, as the config never loads the bundle code (YAML, JSON Schema).
SUBAGENT_ID_SYNTAX = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
BUILTIN_TOOLS: frozenset[str] = frozenset(get_args(ToolName))
DISPATCH_TOOLS: frozenset[str] = frozenset(get_args(DispatchToolName))
REMINDER_TOOLS: frozenset[str] = frozenset(get_args(ReminderToolName))
_NAMED_TABLES = ("risk_profiles", "runtime_profiles", "agents", "peer_groups")


@dataclass(frozen=True)
class Declared:
    """Every name the raw document declares, valid or not."""

    agents: frozenset[str]
    risk_profiles: frozenset[str]
    runtime_profiles: frozenset[str]
    providers: frozenset[str]  # "kind.alias"
    channels: frozenset[str]  # "type.alias"
    peer_groups: frozenset[str]
    mcp_servers: frozenset[str] = frozenset()

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Declared:
        def keys(table: object) -> frozenset[str]:
            return frozenset(table) if isinstance(table, dict) else frozenset()

        def two_level(name: str, kinds: Mapping[str, Any]) -> frozenset[str]:
            table = doc.get(name)
            if not isinstance(table, dict):
                return frozenset()
            return frozenset(
                f"{kind}.{alias}"
                for kind, entries in table.items()
                if kind in kinds and isinstance(entries, dict)
                for alias in entries
            )

        return cls(
            agents=keys(doc.get("agents")),
            risk_profiles=keys(doc.get("risk_profiles")),
            runtime_profiles=keys(doc.get("runtime_profiles")),
            providers=two_level("providers", ProvidersTable.model_fields),
            channels=two_level("channels", ChannelsTable.model_fields),
            peer_groups=keys(doc.get("peer_groups")),
            mcp_servers=keys(doc.get("mcp_servers")),
        )


Rule = Callable[[Config, Declared, Mapping[str, str]], Iterator[ConfigIssue]]


def check_rules(config: Config, declared: Declared, env: Mapping[str, str]) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    for rule in RULES:
        issues.extend(rule(config, declared, env))
    return issues


# --------------------------------------------------------------------------- names


def rule_alias_syntax(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """Every table name (agents, profiles, groups, provider and channel aliases) is an alias."""
    message = "name must match [a-z][a-z0-9_-]{0,31} (lowercase letter first, at most 32 chars)"
    for table in _NAMED_TABLES:
        for name in sorted(getattr(declared, table)):
            if not ALIAS_SYNTAX.match(name):
                yield ConfigIssue((table, name), message)
    for table, ids in (("providers", declared.providers), ("channels", declared.channels)):
        for ref in sorted(ids):
            kind, _, alias = ref.partition(".")
            if not ALIAS_SYNTAX.match(alias):
                yield ConfigIssue((table, kind, alias), message)


def rule_reserved_aliases(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    for name in sorted(declared.agents & RESERVED_ALIASES):
        yield ConfigIssue(
            ("agents", name),
            f"{name!r} is reserved (reserved: {', '.join(sorted(RESERVED_ALIASES))}); "
            "choose another alias",
        )


# --------------------------------------------------------------------------- references


def _unknown(what: str, ref: str, known: frozenset[str]) -> str:
    listing = ", ".join(sorted(known)) if known else "none are configured"
    return f"unknown {what} {ref!r}{did_you_mean(ref, known)}; known: {listing}"


def rule_agent_references(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    for alias, agent in sorted(config.agents.items()):
        base = ("agents", alias)
        chained = isinstance(agent.model_provider, tuple)
        for i, ref in enumerate(agent.provider_chain):
            key = (*base, "model_provider", i) if chained else (*base, "model_provider")
            if "." not in ref:
                same_kind = sorted(p for p in declared.providers if p.startswith(ref + "."))
                hint = (
                    f" (did you mean {same_kind[0]!r}?)"
                    if same_kind
                    else did_you_mean(ref, declared.providers)
                )
                yield ConfigIssue(key, f"must be '<kind>.<alias>', e.g. 'offline.default'{hint}")
            elif ref not in declared.providers:
                yield ConfigIssue(key, _unknown("provider", ref, declared.providers))
        if agent.risk_profile is not None and agent.risk_profile not in declared.risk_profiles:
            yield ConfigIssue(
                (*base, "risk_profile"),
                _unknown("risk profile", agent.risk_profile, declared.risk_profiles),
            )
        if (
            agent.runtime_profile is not None
            and agent.runtime_profile not in declared.runtime_profiles
        ):
            yield ConfigIssue(
                (*base, "runtime_profile"),
                _unknown("runtime profile", agent.runtime_profile, declared.runtime_profiles),
            )
        for i, channel in enumerate(agent.channels):
            if channel not in declared.channels:
                yield ConfigIssue(
                    (*base, "channels", i), _unknown("channel", channel, declared.channels)
                )
        others = declared.agents
        for i, target in enumerate(agent.delegates):
            if target != alias and target not in others:
                yield ConfigIssue((*base, "delegates", i), _unknown("agent", target, others))
        for target in sorted(agent.workspace.access):
            if target != alias and target not in others:
                yield ConfigIssue(
                    (*base, "workspace", "access", target), _unknown("agent", target, others)
                )
        for i, target in enumerate(agent.memory.read_memory_from):
            if target != alias and target not in others:
                yield ConfigIssue(
                    (*base, "memory", "read_memory_from", i), _unknown("agent", target, others)
                )


def rule_no_self_references(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    for alias, agent in sorted(config.agents.items()):
        base = ("agents", alias)
        for i, target in enumerate(agent.delegates):
            if target == alias:
                yield ConfigIssue((*base, "delegates", i), "an agent cannot delegate to itself")
        if alias in agent.workspace.access:
            yield ConfigIssue(
                (*base, "workspace", "access", alias),
                "an agent cannot grant itself access; its own workspace is always its own",
            )
        for i, target in enumerate(agent.memory.read_memory_from):
            if target == alias:
                yield ConfigIssue(
                    (*base, "memory", "read_memory_from", i),
                    "an agent always reads its own memory; remove itself from this list",
                )


def rule_enabled_agent_complete(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    for alias, agent in sorted(config.agents.items()):
        if not agent.enabled:
            continue
        for key in ("model_provider", "risk_profile", "runtime_profile"):
            if getattr(agent, key) is None:
                yield ConfigIssue(
                    ("agents", alias, key),
                    "required for an enabled agent (set it, or set enabled = false)",
                )


# --------------------------------------------------------------------------- tools


def rule_facades(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """A facade is a tool name no other tool has, naming a well-formed sub-agent id. Whether
    that sub-agent exists is the bundles' business (not config): a dispatch to an unknown
    id is refused as `subagent_not_found` when it is made."""
    taken = BUILTIN_TOOLS | DISPATCH_TOOLS | {ADAPTER_TOOL_NAME, SKILL_TOOL_NAME}
    for alias, agent in sorted(config.agents.items()):
        for name, target in sorted(agent.facades.items()):
            key = ("agents", alias, "facades", name)
            if not TOOL_NAME_SYNTAX.match(name):
                yield ConfigIssue(
                    key,
                    "a facade's tool name must match [a-z][a-z0-9_]{0,63} (lowercase letter "
                    "first, then lowercase letters, digits or '_', at most 64 chars)",
                )
            elif name.startswith(MCP_TOOL_PREFIX):
                yield ConfigIssue(
                    key,
                    f"{name!r} starts with {MCP_TOOL_PREFIX!r}, which names MCP tools "
                    "(mcp__<server>__<tool>); give the facade another tool name",
                )
            elif name in taken:
                what = (
                    "a sub-agent tool"
                    if name in DISPATCH_TOOLS
                    else "the adapter tool"
                    if name == ADAPTER_TOOL_NAME
                    else "the skill tool"
                    if name == SKILL_TOOL_NAME
                    else "a built-in tool"
                )
                yield ConfigIssue(
                    key, f"{name!r} is already {what}; give the facade another tool name"
                )
            if not SUBAGENT_ID_SYNTAX.match(target):
                yield ConfigIssue(
                    key,
                    f"{target!r} is not a sub-agent id: ids match [a-z][a-z0-9_-]{{0,63}} "
                    "(the bundle's directory name under [subagents] dir)",
                )


def agent_mcp_tools(config: Config, agent: AgentConfig) -> frozenset[str]:
    """The MCP tool names (mcp__<server>__<tool>) an agent can be offered: the allowlists of
    the servers it uses."""
    return frozenset(
        mcp_tool_name(server, tool)
        for server in agent.mcp
        if server in config.mcp_servers
        for tool in config.mcp_servers[server].tools
    )


def rule_mcp_servers(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """MCP server names have the tool-name syntax, each allowed tool's offered name is one
    providers take, and an agent uses only servers that are configured (issue 26)."""
    for name, entry in sorted(config.mcp_servers.items()):
        if not MCP_SERVER_NAME.match(name):
            yield ConfigIssue(
                ("mcp_servers", name),
                f"{name!r} is not an MCP server name (lowercase [a-z][a-z0-9_-], at most 32, "
                "no '__' and no '_' at the end: its tools are offered as "
                "mcp__<server>__<tool>, and the server's name ends at the first '__')",
            )
            continue
        for i, tool in enumerate(entry.tools):
            offered = mcp_tool_name(name, tool)
            if not PROVIDER_TOOL_NAME.match(offered):
                yield ConfigIssue(
                    ("mcp_servers", name, "tools", i),
                    f"{tool!r} would be offered as {offered!r}, a name model providers refuse "
                    "(they take letters, digits, '_' and '-', at most 64 characters; no '.'): "
                    "every request offering it would fail",
                )
    known = frozenset(config.mcp_servers)
    for alias, agent in sorted(config.agents.items()):
        for i, server in enumerate(agent.mcp):
            # A server declared but broken is reported once, where it is broken.
            if server not in known and server not in declared.mcp_servers:
                yield ConfigIssue(
                    ("agents", alias, "mcp", i),
                    f"unknown MCP server {server!r}{did_you_mean(server, known)}; known: "
                    f"{', '.join(sorted(known)) or 'none'}",
                )


def rule_mcp_endpoints(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """An agent reaches an HTTP MCP server only if its risk profile lists the endpoint in
    `allowed_endpoints`: the agent's sandbox lets it connect to that port and no other
    (ADRs 0043, 0053)."""
    for alias, agent in sorted(config.agents.items()):
        profile = config.risk_profiles.get(agent.risk_profile or "")
        if profile is None:
            continue  # reported by the reference rules
        for i, name in enumerate(agent.mcp):
            server = config.mcp_servers.get(name)
            if server is None or server.url is None:
                continue
            if not endpoint_allowed(server.url, profile.allowed_endpoints):
                yield ConfigIssue(
                    ("agents", alias, "mcp", i),
                    f"MCP server {name!r} is at {endpoint_key(server.url)}, which risk profile "
                    f"{agent.risk_profile!r} does not list in allowed_endpoints",
                )


def listed_tools(config: Config, agent: AgentConfig) -> frozenset[str]:
    """The tools an agent has because its config lists what they reach: invoke_adapter
    for `adapters`, skill_read for `skills`, the reminder tools when its risk profile
    grants `reminders`."""
    listed = frozenset(
        name
        for name, listed in ((ADAPTER_TOOL_NAME, agent.adapters), (SKILL_TOOL_NAME, agent.skills))
        if listed
    )
    profile = config.risk_profiles.get(agent.risk_profile or "")
    return listed | REMINDER_TOOLS if profile is not None and profile.reminders else listed


def agent_tool_names(config: Config, agent: AgentConfig) -> frozenset[str]:
    """Every tool name a turn of this agent can be granted (peer_tools' vocabulary)."""
    return (
        BUILTIN_TOOLS
        | DISPATCH_TOOLS
        | frozenset(agent.facades)
        | listed_tools(config, agent)
        | agent_mcp_tools(config, agent)
    )


def rule_budget_origins(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """Each key of `budget.origins` names outside origins that can reach the agent: a
    channel it binds (not a `cli` one: the operator's turns count against the agent's own
    limits), or peers (a known agent other than itself); each origin is named once."""
    owners = channel_owners(config) if any(a.budget.origins for a in config.agents.values()) else {}
    for alias, agent in sorted(config.agents.items()):
        seen: dict[BudgetKey, str] = {}
        for key in sorted(agent.budget.origins):
            path = ("agents", alias, "budget", "origins", key)
            parsed = parse_budget_key(key)
            if isinstance(parsed, str):
                yield ConfigIssue(path, parsed)
                continue
            if parsed in seen:
                yield ConfigIssue(path, f"names the same origins as {seen[parsed]!r}")
                continue
            seen[parsed] = key
            channel = parsed.channel
            if channel == EVERY:
                continue
            if channel == PEER:
                if parsed.form == "one" and parsed.sender not in declared.agents - {alias}:
                    yield ConfigIssue(
                        path, _unknown("agent", parsed.sender, declared.agents - {alias})
                    )
                continue
            if channel.partition(".")[0] == "cli":
                yield ConfigIssue(
                    path,
                    "the operator's turns on a cli channel have no origin budget; the "
                    "agent's own limits (tokens_per_day, ...) apply to them",
                )
            elif channel not in agent.channels and alias not in owners.get(channel, ()):
                bound = ", ".join(agent.channels) or "none"
                yield ConfigIssue(
                    path,
                    f"agent {alias} does not bind channel {channel!r} (it binds: {bound}); "
                    "no sender of it reaches this agent",
                )


def rule_peer_tools(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """peer_tools name tools this agent can have: a built-in one, a sub-agent tool, one of
    its own facades, invoke_adapter when it lists adapters, skill_read when it lists
    skills, or an allowed tool of an MCP server it uses."""
    for alias, agent in sorted(config.agents.items()):
        known = agent_tool_names(config, agent)
        for i, name in enumerate(agent.peer_tools):
            if name not in known:
                yield ConfigIssue(
                    ("agents", alias, "peer_tools", i),
                    f"unknown tool {name!r}{did_you_mean(name, known)}; known: "
                    f"{', '.join(sorted(known))}",
                )


def rule_peer_group_tools(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """A peer group's tools name tools one of its agents can have (the peer_tools
    vocabulary: built-in, sub-agent, a member's facade, invoke_adapter when a member lists
    adapters, skill_read when a member lists skills)."""
    for name, group in sorted(config.peer_groups.items()):
        members = [config.agents[a] for a in group.agents if a in config.agents]
        known = set(BUILTIN_TOOLS | DISPATCH_TOOLS)
        for agent in members:
            known |= agent_tool_names(config, agent)
        for i, tool in enumerate(group.tools):
            if tool not in known:
                yield ConfigIssue(
                    ("peer_groups", name, "tools", i),
                    f"unknown tool {tool!r}{did_you_mean(tool, frozenset(known))}; known: "
                    f"{', '.join(sorted(known))}",
                )


# --------------------------------------------------------------------------- schedules


def rule_schedules(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """A schedule's name is an alias-like name, neither `heartbeat` nor `reminder-...`
    (those are the heartbeat's and the agent's own reminders'); its turns' tools are the
    agent's (a schedule does not make schedules: no reminder tool); it delivers to `log` or
    to a channel the agent binds that can carry a message out (a webhook channel with a
    callback_url, a serial channel)."""
    for alias, agent in sorted(config.agents.items()):
        known = agent_tool_names(config, agent) - REMINDER_TOOLS
        turns: list[tuple[tuple[str | int, ...], object]] = [
            (("agents", alias, "schedules", name), entry)
            for name, entry in sorted(agent.schedules.items())
        ]
        if agent.heartbeat is not None:
            turns.append((("agents", alias, "heartbeat"), agent.heartbeat))
        for key, entry in turns:
            name = key[-1]
            if key[2] == "schedules":
                if not ALIAS_SYNTAX.match(str(name)):
                    yield ConfigIssue(
                        key,
                        "a schedule's name is lowercase letters, digits, '-' and '_', "
                        "a letter first, at most 32",
                    )
                elif name == HEARTBEAT_SCHEDULE or str(name).startswith(REMINDER_PREFIX):
                    yield ConfigIssue(
                        key,
                        f"{name!r} is reserved: 'heartbeat' is [agents.{alias}.heartbeat] "
                        f"and '{REMINDER_PREFIX}...' names the agent's own reminders",
                    )
            for i, tool in enumerate(getattr(entry, "tools", ())):
                if tool in REMINDER_TOOLS:
                    yield ConfigIssue(
                        (*key, "tools", i), f"{tool!r}: a schedule's turn does not make schedules"
                    )
                elif tool not in known:
                    yield ConfigIssue(
                        (*key, "tools", i),
                        f"unknown tool {tool!r}{did_you_mean(tool, known)}; known: "
                        f"{', '.join(sorted(known))}",
                    )
            problem = delivery_problem(config, alias, str(getattr(entry, "deliver_to", "log")))
            if problem is not None:
                yield ConfigIssue((*key, "deliver_to"), problem)
    for name, profile in sorted(config.risk_profiles.items()):
        if profile.reminders is not None and profile.level == "readonly":
            yield ConfigIssue(
                ("risk_profiles", name, "reminders"),
                "a readonly profile makes nothing, reminders included; remove it or raise "
                "the level",
            )


def delivery_problem(config: Config, alias: str, target: str) -> str | None:
    """Why agent `alias` cannot deliver a scheduled run's reply to `target` (None: it can):
    `log`, or a channel it binds that carries a message out."""
    if target == "log":
        return None
    agent = config.agents.get(alias)
    if agent is None or target not in agent.channels:
        bound = ", ".join(agent.channels) if agent is not None and agent.channels else "none"
        return (
            f"{target!r} is not a channel agent {alias!r} binds (its channels: {bound}); "
            "a schedule delivers to 'log' or to one of them"
        )
    kind, _, name = target.partition(".")
    if kind == "webhook":
        hook = config.channels.webhook.get(name)
        if hook is not None and hook.callback_url is None:
            return f"{target!r} has no callback_url: a webhook delivers a run's reply there"
        return None
    if kind == "serial":
        return None
    return f"{target!r}: a {kind} channel has nobody to deliver a scheduled reply to"


# --------------------------------------------------------------------------- peer groups


def rule_peer_groups(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """The group's channel exists; members exist and each binds the group's channel. When no
    agent binds any channel, the fallback owner owns every channel (`channel_owners`), so
    it may be a member of a group on any: that is how a legacy install, bindings never
    written, admits its outside senders (ADR-011's compatibility fallback)."""
    channel_types = set(ChannelsTable.model_fields) | {API_CHANNEL_TYPE}
    fallback_owner = (
        default_owner(config)
        if not any(agent.channels for agent in config.agents.values())
        else None
    )
    # A gateway token's channel: its members are the agents the token lists, not bindings.
    reach = api_reach(config)
    channels = declared.channels | frozenset(reach)
    for name, group in sorted(config.peer_groups.items()):
        base = ("peer_groups", name)
        channel = group.channel
        if channel.partition(".")[0] == API_CHANNEL_TYPE:
            yield from _api_group_members(base, group.channel, group.agents, reach)
            continue
        if "." in channel:
            channel_ok = channel in channels
            if not channel_ok:
                yield ConfigIssue((*base, "channel"), _unknown("channel", channel, channels))
        elif channel not in channel_types:
            channel_ok = False
            known = frozenset(channel_types)
            yield ConfigIssue(
                (*base, "channel"),
                f"unknown channel type {channel!r}{did_you_mean(channel, known)}; "
                f"use a type ({', '.join(sorted(known))}) or a '<type>.<alias>' channel",
            )
        else:
            channel_ok = any(c.partition(".")[0] == channel for c in declared.channels)
            if not channel_ok:
                yield ConfigIssue(
                    (*base, "channel"),
                    f"no channel of type {channel!r} is configured; "
                    f"add [channels.{channel}.<alias>]",
                )
        for i, member in enumerate(group.agents):
            if member not in declared.agents:
                yield ConfigIssue((*base, "agents", i), _unknown("agent", member, declared.agents))
                continue
            agent = config.agents.get(member)
            if agent is None or not channel_ok or member == fallback_owner:
                continue  # broken itself, the channel error said, or it owns every channel
            if not any(channel_matches(channel, bound) for bound in agent.channels):
                yield ConfigIssue(
                    (*base, "agents", i),
                    f"agent {member!r} does not bind channel {channel!r}; add a matching "
                    f"channel to agents.{member}.channels",
                )


def _api_group_members(
    base: tuple[str, ...],
    channel: str,
    members: Sequence[str],
    reach: Mapping[str, Sequence[str]],
) -> Iterator[ConfigIssue]:
    """A group on a gateway token's channel (`api.<name>`, or `api` for every token): the
    channel is a token's, and each member is an agent such a token lists."""
    if "." in channel and channel not in reach:
        yield ConfigIssue((*base, "channel"), _unknown("channel", channel, frozenset(reach)))
        return
    if not reach:
        yield ConfigIssue(
            (*base, "channel"), "no gateway token is configured; add [gateway.tokens.<name>]"
        )
        return
    listed = {a for key, agents in reach.items() if channel_matches(channel, key) for a in agents}
    for i, member in enumerate(members):
        if member not in listed:
            yield ConfigIssue(
                (*base, "agents", i),
                f"no gateway token on {channel!r} lists agent {member!r}; add it to that "
                "token's agents",
            )


def rule_gateway(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """The gateway listens on loopback unless `allow_remote`, which then needs TLS; its
    tokens' names are aliases, their agents exist, and no two credentials share a
    variable (an API token that is the operator's would open the dashboard; one that is
    a provider's key is in that agent's environment)."""
    gateway = config.gateway
    if gateway is None:
        return
    base = ("gateway",)
    if not gateway.allow_remote and not listen_is_loopback(gateway.listen):
        yield ConfigIssue(
            (*base, "listen"),
            f"{gateway.listen!r} is not a loopback address; set allow_remote = true (with "
            "tls_cert and tls_key) to accept requests from other hosts",
        )
    if gateway.allow_remote and gateway.tls_cert is None:
        yield ConfigIssue(
            (*base, "allow_remote"),
            "a gateway reachable from other hosts needs TLS: set tls_cert and tls_key "
            "(bearer tokens and the dashboard's cookie must not cross a network in clear)",
        )
    others = {
        hook.listen.rpartition(":")[2]: f"channels.webhook.{alias}"
        for alias, hook in config.channels.webhook.items()
    }
    if config.daemon.metrics_listen is not None:
        others[config.daemon.metrics_listen.rpartition(":")[2]] = "daemon.metrics_listen"
    port = gateway.listen.rpartition(":")[2]
    if port in others:
        yield ConfigIssue(
            (*base, "listen"), f"port {port} is also {others[port]}'s; give each its own port"
        )
    credentials: dict[str, str] = {}
    if config.daemon.metrics_token_env is not None:
        credentials[config.daemon.metrics_token_env] = "daemon.metrics_token_env"
    for kind in type(config.providers).model_fields:
        for alias, provider in sorted(getattr(config.providers, kind).items()):
            name = getattr(provider, "api_key_env", None)
            if name is not None:
                credentials.setdefault(name, f"providers.{kind}.{alias}.api_key_env")
    if gateway.operator_token_env is not None:
        if gateway.operator_token_env in credentials:
            yield ConfigIssue(
                (*base, "operator_token_env"),
                f"{gateway.operator_token_env} is also {credentials[gateway.operator_token_env]}"
                "; give the operator's token a variable of its own",
            )
        credentials[gateway.operator_token_env] = "gateway.operator_token_env"
    for name, token in sorted(gateway.tokens.items()):
        key = (*base, "tokens", name)
        if not ALIAS_SYNTAX.match(name):
            yield ConfigIssue(key, f"token name {name!r} must match [a-z][a-z0-9_-]{{0,31}}")
        if token.token_env in credentials:
            yield ConfigIssue(
                (*key, "token_env"),
                f"{token.token_env} is also {credentials[token.token_env]}; give each token "
                "a variable of its own",
            )
        credentials[token.token_env] = f"gateway.tokens.{name}.token_env"
        for i, agent in enumerate(token.agents):
            if agent not in declared.agents:
                yield ConfigIssue((*key, "agents", i), _unknown("agent", agent, declared.agents))


# --------------------------------------------------------------------------- serial channels


def rule_serial_devices_distinct(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """Two serial channels never name one device: each would steal the other's lines.
    Paths are compared as written, normalised (no filesystem access: a symlink to the
    same device is not caught here)."""
    first: dict[str, str] = {}
    for alias, channel in sorted(config.channels.serial.items()):
        device = os.path.normpath(channel.port)
        other = first.setdefault(device, alias)
        if other != alias:
            yield ConfigIssue(
                ("channels", "serial", alias, "port"),
                f"device {channel.port!r} is already channels.serial.{other}'s; "
                "each serial device belongs to one channel",
            )


# --------------------------------------------------------------------------- workspaces


def rule_distinct_workspaces(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """Two agents never share a workspace, nor does one live inside another's.

    Sorting the paths' parts puts every path right after its ancestors, so one sweep with
    a stack of open ancestors finds each offender in O(n log n) instead of comparing pairs.
    """
    paths = daemon_paths(config, env)
    entries = sorted((workspace_path(config, alias, paths).parts, alias) for alias in config.agents)
    open_ancestors: list[tuple[tuple[str, ...], str]] = []
    for parts, alias in entries:
        while open_ancestors and parts[: len(open_ancestors[-1][0])] != open_ancestors[-1][0]:
            open_ancestors.pop()
        if open_ancestors:
            outer_parts, outer = open_ancestors[-1]
            mine, theirs = Path(*parts), Path(*outer_parts)
            key = ("agents", alias, "workspace", "path")
            if parts == outer_parts:
                message = f"same workspace as agents.{outer} ({mine}); each agent needs its own"
            else:
                message = (
                    f"workspace {mine} lies inside the workspace of agents.{outer} ({theirs}); "
                    "workspaces may not be nested, each agent needs a separate directory tree"
                )
            yield ConfigIssue(key, message)
        open_ancestors.append((parts, alias))


def rule_workspace_not_forbidden(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """An agent whose workspace lies under its own forbidden paths could never use it."""
    paths = daemon_paths(config, env)
    for alias, agent in sorted(config.agents.items()):
        if agent.risk_profile is None or agent.risk_profile not in config.risk_profiles:
            continue
        workspace = workspace_path(config, alias, paths)
        profile = config.risk_profiles[agent.risk_profile]
        for forbidden in profile.forbidden_paths:
            root = expand_path(forbidden, env)
            if root is not None and (workspace == root or workspace.is_relative_to(root)):
                yield ConfigIssue(
                    ("agents", alias, "workspace", "path"),
                    f"workspace {workspace} lies under {forbidden!r}, a forbidden path of risk "
                    f"profile {agent.risk_profile!r}; the agent could not touch its own files",
                )
                break


def rule_workspace_holds_no_daemon_dir(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """A workspace around the state or runtime dir would hand its agent every agent's
    memory and the daemon's sockets: Landlock grants a workspace whole (ADR 0015)."""
    paths = daemon_paths(config, env)
    for alias in sorted(config.agents):
        workspace = workspace_path(config, alias, paths)
        for what, inner in (("state_dir", paths.state_dir), ("runtime_dir", paths.runtime_dir)):
            if inner == workspace or inner.is_relative_to(workspace):
                yield ConfigIssue(
                    ("agents", alias, "workspace", "path"),
                    f"workspace {workspace} contains the daemon's {what} ({inner}); no agent "
                    "may reach the daemon's own files, so keep them apart",
                )


def listen_is_loopback(listen: str) -> bool:
    """Whether a webhook's `host:port` binds only the loopback interface."""
    host = listen.rpartition(":")[0].removeprefix("[").removesuffix("]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def url_is_loopback(url: str) -> bool:
    """Whether an http(s) URL's host is the loopback interface."""
    try:
        host, port = urlsplit(url).hostname, urlsplit(url).port
    except ValueError:  # a port that is not a number
        return False
    if host is None:
        return False
    return listen_is_loopback(f"[{host}]:{port or 80}")


def rule_webhook_listen(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """A webhook listens on loopback unless its entry says `allow_remote = true`: exposing
    the daemon to a network is a decision the operator writes down; so is sending replies
    to another host (`callback_url`). Two webhooks on one port must name the same host
    (they then share one server); a wildcard and a specific host on one port could not
    both bind."""
    by_port: dict[str, tuple[str, str]] = {}
    for alias, hook in sorted(config.channels.webhook.items()):
        if not hook.allow_remote and not listen_is_loopback(hook.listen):
            yield ConfigIssue(
                ("channels", "webhook", alias, "listen"),
                f"{hook.listen!r} is not a loopback address; set allow_remote = true to "
                "accept requests from other hosts",
            )
        url = hook.callback_url
        if url is not None and not hook.allow_remote and not url_is_loopback(url):
            yield ConfigIssue(
                ("channels", "webhook", alias, "callback_url"),
                f"{url!r} is not on a loopback address; set allow_remote = true to send "
                "replies to other hosts",
            )
        host, _, port = hook.listen.rpartition(":")
        first = by_port.setdefault(port, (alias, host))
        if first[1] != host:
            yield ConfigIssue(
                ("channels", "webhook", alias, "listen"),
                f"port {port} is also bound by webhook {first[0]!r} on host {first[1]!r}; "
                "webhooks sharing a port must name the same host (they share one server)",
            )


def rule_telegram_bots(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """A bot's token travels in its Bot API URL: plain http only to loopback (a local Bot
    API server), and its variable is no provider key's (agents receive their provider's
    key, and would then hold the bot). Two channels never poll one bot: Telegram gives
    each update to one getUpdates caller, so each would miss the other's messages."""
    providers = {
        getattr(provider, "api_key_env", None)
        for kind in type(config.providers).model_fields
        for provider in getattr(config.providers, kind).values()
    }
    by_token: dict[str, str] = {}
    for alias, bot in sorted(config.channels.telegram.items()):
        if bot.api_url.startswith("http://") and not url_is_loopback(bot.api_url):
            yield ConfigIssue(
                ("channels", "telegram", alias, "api_url"),
                f"{bot.api_url!r} is plain http to another host: the bot's token would cross "
                "the network in clear; use https://",
            )
        if bot.token_env in providers:
            yield ConfigIssue(
                ("channels", "telegram", alias, "token_env"),
                f"{bot.token_env} is also a provider's api_key_env, which agents using it "
                "receive; give the bot's token a variable of its own",
            )
        first = by_token.setdefault(bot.token_env, alias)
        if first != alias:
            yield ConfigIssue(
                ("channels", "telegram", alias, "token_env"),
                f"{bot.token_env} is also channels.telegram.{first}'s token: one bot is "
                "polled by one channel",
            )
        yield from _telegram_webhook(config, alias, bot)


def _telegram_webhook(config: Config, alias: str, bot: TelegramChannel) -> Iterator[ConfigIssue]:
    """Webhook mode: the gateway serves the path Telegram POSTs to, so it must be
    configured; the URL is where Telegram sends every update (and the secret token with
    each), so https unless loopback (a test's); its path must be the gateway's."""
    where = ("channels", "telegram", alias, "webhook_url")
    url = bot.webhook_url
    if bot.mode == "poll":
        if url is not None:
            yield ConfigIssue(where, 'is read in webhook mode only; set mode = "webhook"')
        return
    if config.gateway is None:
        yield ConfigIssue(
            ("channels", "telegram", alias, "mode"),
            "webhook mode needs the gateway (a [gateway] table), which serves Telegram's POSTs",
        )
    if url is None:
        yield ConfigIssue(where, "webhook mode needs the public URL Telegram is to POST to")
        return
    parts = urlsplit(url)
    if "\\" in url or "@" in parts.netloc:
        # Parsers disagree on where such a URL goes: ours reads http://evil\@127.0.0.1/
        # as loopback, a WHATWG parser as plain http to evil (attack pass, issue 30).
        yield ConfigIssue(
            where,
            f"{url!r} holds a backslash or a user@ part: give the plain public URL "
            "(https://host/.../telegram/<alias>)",
        )
        return
    if url.startswith("http://") and not url_is_loopback(url):
        yield ConfigIssue(
            where,
            f"{url!r} is plain http to another host: Telegram sends the updates and their "
            "secret token in clear (and refuses it); use https://",
        )
    path = parts.path
    if not path.endswith(f"/telegram/{alias}"):
        yield ConfigIssue(
            where,
            f"its path must end with /telegram/{alias}, where the gateway takes this bot's updates",
        )


def rule_matrix_homeserver(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """A Matrix account's token (or password) crosses the network only over https: plain
    http is accepted on loopback alone (a homeserver on this host, the tests' Synapse)."""
    for alias, account in sorted(config.channels.matrix.items()):
        url = account.homeserver
        if not url.startswith("https://") and not url_is_loopback(url):
            yield ConfigIssue(
                ("channels", "matrix", alias, "homeserver"),
                f"{url!r} is plain http to another host: the access token would cross the "
                "network in the clear; use https://",
            )


def rule_metrics_token_is_its_own(
    config: Config, declared: Declared, env: Mapping[str, str]
) -> Iterator[ConfigIssue]:
    """The metrics token's variable is no provider key's: an agent gets its provider's key
    in its environment, and would then hold the scrape credential too (ADR 0045)."""
    name = config.daemon.metrics_token_env
    if name is None:
        return
    for kind in type(config.providers).model_fields:
        for alias, provider in sorted(getattr(config.providers, kind).items()):
            if getattr(provider, "api_key_env", None) == name:
                yield ConfigIssue(
                    ("daemon", "metrics_token_env"),
                    f"{name} is also providers.{kind}.{alias}'s api_key_env, which agents "
                    "using it receive; give the metrics token a variable of its own",
                )


def daemon_refusals(
    config: Config,
    env: Mapping[str, str],
    config_path: Path,
    code_paths: Sequence[str] = (),
    resolve: Callable[[str], str] = os.path.realpath,
) -> list[ConfigIssue]:
    """Why the daemon refuses to run a config that is otherwise valid (ADR 0015): `config
    validate` reports these as warnings, the daemon and a reload as errors.

    `code_paths` (resolved): the daemon's own code, read-only to every agent (ADR 0044). A
    workspace inside it could never be written, so it is refused here rather than found
    out at the agent's first write; a code path inside a workspace is carved out instead.
    The skills dirs are kept apart from workspaces and the daemon's files (ADR 0056); the
    skills themselves are judged by `zeroclaw.skills.load_catalogue`, which reads them."""
    issues: list[ConfigIssue] = []
    if not any(agent.enabled for agent in config.agents.values()):
        issues.append(
            ConfigIssue(
                ("agents",),
                "no enabled agent: the daemon would have nothing to run (an empty or "
                "truncated file?); add an [agents.<alias>] entry or enable one",
            )
        )
    owners = channel_owners(config)
    for alias, hook in sorted(config.channels.webhook.items()):
        # Only a served (owned) webhook needs its secret: an unsigned listener never runs.
        if owners.get(f"webhook.{alias}") and not env.get(hook.secret_env):
            issues.append(
                ConfigIssue(
                    ("channels", "webhook", alias, "secret_env"),
                    f"webhook.{alias} is bound but its signing secret variable "
                    f"{hook.secret_env} is not set in the environment",
                )
            )
    for alias, bot in sorted(config.channels.telegram.items()):
        if owners.get(f"telegram.{alias}") and not env.get(bot.token_env):
            issues.append(
                ConfigIssue(
                    ("channels", "telegram", alias, "token_env"),
                    f"telegram.{alias} is bound but its bot token variable "
                    f"{bot.token_env} is not set in the environment",
                )
            )
    issues.extend(_gateway_credentials_set(config, env))
    for alias, account in sorted(config.channels.matrix.items()):
        # As a webhook's secret: an account nobody owns never logs in.
        variable = account.access_token_env or account.password_env
        if owners.get(f"matrix.{alias}") and variable is not None and not env.get(variable):
            key = "access_token_env" if account.access_token_env else "password_env"
            issues.append(
                ConfigIssue(
                    ("channels", "matrix", alias, key),
                    f"matrix.{alias} is bound but its credential variable {variable} is not "
                    "set in the environment",
                )
            )
    paths = daemon_paths(config, env)
    for alias in sorted(config.agents):
        workspace = workspace_path(config, alias, paths)
        if config_path.is_relative_to(workspace):
            issues.append(
                ConfigIssue(
                    ("agents", alias, "workspace", "path"),
                    f"workspace {workspace} contains the config file {config_path}; no agent "
                    "may reach the daemon's own files, so keep them apart",
                )
            )
        real = PurePosixPath(resolve(str(workspace)))
        for code in map(PurePosixPath, code_paths):
            if real == code or code in real.parents:
                issues.append(
                    ConfigIssue(
                        ("agents", alias, "workspace", "path"),
                        f"workspace {workspace} is inside the daemon's own code {code}, "
                        "which no agent may write (ADR 0044); put workspaces elsewhere "
                        "(`python -m zeroclaw` puts its cwd on sys.path: start the installed "
                        "`zeroclaw` script, or `python -P -m zeroclaw`)",
                    )
                )
                break
    issues.extend(_skills_dirs_apart(config, env, config_path, resolve))
    return issues


def _gateway_credentials_set(config: Config, env: Mapping[str, str]) -> Iterator[ConfigIssue]:
    """Every credential the gateway names is in the environment, each with a value of its
    own (never a value said): a token pasted twice would make an API key the operator's
    sign-in, or one key taken for another (its sessions, reach and rate)."""
    gateway = config.gateway
    if gateway is None:
        return
    named: list[tuple[tuple[str, ...], str]] = [
        (("gateway", "tokens", name, "token_env"), token.token_env)
        for name, token in sorted(gateway.tokens.items())
    ]
    if gateway.operator_token_env is not None:
        named.append((("gateway", "operator_token_env"), gateway.operator_token_env))
    first: dict[str, str] = {}  # a value -> the variable that holds it first
    for key, variable in named:
        value = env.get(variable)
        if not value:
            yield ConfigIssue(key, f"the gateway's token variable {variable} is not set")
        elif first.setdefault(value, variable) != variable:
            yield ConfigIssue(
                key,
                f"the gateway's token variable {variable} holds the same token as "
                f"{first[value]}; give each token (and the operator's) a value of its own",
            )


def _skills_dirs_apart(
    config: Config, env: Mapping[str, str], config_path: Path, resolve: Callable[[str], str]
) -> Iterator[ConfigIssue]:
    """A skills dir shares no tree with a workspace, nor holds the daemon's state or
    runtime dir or the config file: it is protected from every agent (which reads its own
    skills there through skill_read only), so it can be neither granted whole as a
    workspace nor cover the daemon's files. Real paths: a symlinked dir is judged by where
    it leads. Only when some enabled agent lists skills (`skills_dirs` is empty else)."""
    paths = daemon_paths(config, env)
    daemon = [
        ("state_dir", paths.state_dir),
        ("runtime_dir", paths.runtime_dir),
        ("config file", config_path),
    ]
    workspaces = [(a, workspace_path(config, a, paths)) for a in sorted(config.agents)]
    for i, directory in enumerate(skills_dirs(config, config_path)):
        key: tuple[str | int, ...] = ("skills", "dirs", i) if config.skills.dirs else ("skills",)
        real = PurePosixPath(resolve(str(directory)))
        for what, inner in daemon:
            if _beneath(PurePosixPath(resolve(str(inner))), real):
                yield ConfigIssue(
                    key,
                    f"skills dir {directory} contains the daemon's {what} ({inner}); keep "
                    "skills in a directory of their own",
                )
        for alias, workspace in workspaces:
            other = PurePosixPath(resolve(str(workspace)))
            if _beneath(other, real) or _beneath(real, other):
                yield ConfigIssue(
                    key,
                    f"skills dir {directory} and agents.{alias}'s workspace {workspace} share "
                    "a tree; an agent could rewrite a skill, so keep them apart",
                )


def _beneath(path: PurePosixPath, root: PurePosixPath) -> bool:
    return path == root or root in path.parents


RULES: tuple[Rule, ...] = (
    rule_alias_syntax,
    rule_reserved_aliases,
    rule_agent_references,
    rule_no_self_references,
    rule_enabled_agent_complete,
    rule_facades,
    rule_mcp_servers,
    rule_mcp_endpoints,
    rule_budget_origins,
    rule_peer_tools,
    rule_peer_group_tools,
    rule_schedules,
    rule_peer_groups,
    rule_distinct_workspaces,
    rule_workspace_not_forbidden,
    rule_workspace_holds_no_daemon_dir,
    rule_serial_devices_distinct,
    rule_webhook_listen,
    rule_telegram_bots,
    rule_matrix_homeserver,
    rule_metrics_token_is_its_own,
    rule_gateway,
)
