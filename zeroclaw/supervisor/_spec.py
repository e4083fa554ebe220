"""What each agent process is started with, computed purely from a config snapshot.

`AgentSpec` is the agent's *effective config*: reload compares specs, so an agent is
restarted exactly when something it was started with changed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ..agent import (
    AgentSpec,
    McpServerSpec,
    MemorySpec,
    RiskSpec,
    RuntimeSpec,
    SkillSpec,
    SubagentRuntime,
)
from ..config import (
    AgentConfig,
    Config,
    EffectiveRiskPolicy,
    McpServerConfig,
    ProviderConfig,
    RuntimeProfile,
    daemon_paths,
    effective_risk_policy,
    skills_dirs,
    subagents_dir,
    workspace_path,
)
from ..config import AnthropicProvider as AnthropicConfig
from ..config import OpenAIProvider as OpenAIConfig
from ..discovery import PROJECT_DIRS
from ..providers import AnthropicSpec, NamedProvider, OfflineSpec, OpenAISpec, ProviderSpec
from ..skills import SkillCatalogue
from ..subagents import LoadedRevision
from ..turns import McpBinding

ENV_FILE = "env"  # beside the config: the unit's EnvironmentFile= as the README names it


def protected_paths(
    config: Config, env: Mapping[str, str], config_path: Path | None, daemon_pids: Sequence[int]
) -> tuple[str, ...]:
    """The daemon's own files, which no agent may touch under any profile (ADR 0015): the
    state dir (memory of every agent; the workspaces inside it are carved out by the path
    policy), the runtime dir (sockets, lock), the config file, what beside it decides what
    runs with which variables (the sub-agent bundles; adapters/, capabilities/ and mcp/,
    issue 15: an agent that rewrote a manifest could hand an adapter a provider key), the
    skills dirs (ADR 0056: a rewritten skill would instruct every agent that uses it; each
    agent reads its own skills through skill_read, which its sandbox allows), the
    `env` file beside it (the unit's EnvironmentFile=, holding the keys), and
    the /proc entries of the daemon and the zygote (their environment holds every key)."""
    paths = daemon_paths(config, env)
    found = [str(paths.state_dir), str(paths.runtime_dir)]
    if config_path is not None:
        found.append(os.path.abspath(config_path))
        found.append(str(subagents_dir(config, config_path)))
        beside = Path(os.path.abspath(config_path)).parent
        found.extend(str(beside / name) for name in PROJECT_DIRS)
        found.extend(str(directory) for directory in skills_dirs(config, config_path))
        # The README's EnvironmentFile= (/etc/zeroclaw/env): every provider key and the
        # metrics token; a root daemon's `full` agent read it (the attack pass).
        found.append(str(beside / ENV_FILE))
    found.extend(f"/proc/{pid}" for pid in daemon_pids)
    return tuple(dict.fromkeys(found))


def provider_chain(config: Config, refs: tuple[str, ...]) -> tuple[NamedProvider, ...]:
    """An agent's providers, in chain order, as typed settings (validated references)."""
    chain = []
    for ref in refs:
        provider = config.provider(ref)
        assert provider is not None
        chain.append(NamedProvider(ref, provider_spec(provider)))
    return tuple(chain)


def _key_env(spec: ProviderSpec) -> str | None:
    return None if isinstance(spec, OfflineSpec) else spec.api_key_env


def provider_spec(provider: ProviderConfig) -> ProviderSpec:
    """A validated provider table as the agent's typed settings."""
    if isinstance(provider, OpenAIConfig):
        return OpenAISpec(
            base_url=str(provider.base_url),
            model=provider.model,
            api_key_env=provider.api_key_env,
            timeout_secs=provider.timeout_secs,
            max_retries=provider.max_retries,
            answer_timeout_secs=provider.answer_timeout_secs,
            stream_usage=provider.stream_usage,
            breaker_failures=provider.breaker_failures,
            breaker_open_secs=provider.breaker_open_secs,
        )
    if isinstance(provider, AnthropicConfig):
        return AnthropicSpec(
            base_url=str(provider.base_url),
            model=provider.model,
            api_key_env=provider.api_key_env,
            max_tokens=provider.max_tokens,
            timeout_secs=provider.timeout_secs,
            max_retries=provider.max_retries,
            answer_timeout_secs=provider.answer_timeout_secs,
            breaker_failures=provider.breaker_failures,
            breaker_open_secs=provider.breaker_open_secs,
        )
    return OfflineSpec()


def risk_spec(policy: EffectiveRiskPolicy) -> RiskSpec:
    return RiskSpec(
        profile=policy.profile,
        level=policy.level,
        workspace_only=policy.workspace_only,
        allowed_commands=tuple(sorted(policy.allowed_commands)),
        forbidden_paths=tuple(str(p) for p in policy.forbidden_paths),
        require_approval_for_medium_risk=policy.require_approval_for_medium_risk,
        block_high_risk_commands=policy.block_high_risk_commands,
        sandbox=policy.sandbox,
        approval_timeout_secs=policy.approval_timeout_secs,
    )


def runtime_spec(runtime: RuntimeProfile) -> RuntimeSpec:
    return RuntimeSpec(
        max_tool_iterations=runtime.max_tool_iterations,
        max_actions_per_hour=runtime.max_actions_per_hour,
        shell_timeout_secs=runtime.shell_timeout_secs,
    )


def build_specs(
    config: Config,
    env: Mapping[str, str],
    base_dir: Path | None,
    *,
    config_path: Path | None = None,
    daemon_pids: Sequence[int] = (),
    dispatch_callers: frozenset[str] = frozenset(),
    code_paths: Sequence[str] = (),
    skills: SkillCatalogue | None = None,
) -> dict[str, AgentSpec]:
    """Specs of every enabled agent, keyed by alias. `config_path` and `daemon_pids` (the
    daemon's and the zygote's) name what every agent is kept away from. `dispatch_callers`
    are the aliases some loaded sub-agent lists in its allowedCallers: those agents (and
    any agent with facades) get `agent_catalog`/`agent_dispatch` (issue 12). The daemon's
    dispatch service still decides each call; the tools only spare the others a tool that
    could never work. `code_paths`: the daemon's own code (ADR 0044), gathered once at its
    start, read-only to every agent. `skills`: what each agent loads (ADR 0056; the
    caller loaded them and refused the config if any was refused)."""
    paths = daemon_paths(config, env)
    code = tuple(code_paths)
    protected = protected_paths(config, env, config_path, daemon_pids)
    # Once per agent, not once per pair: every spec lists every other workspace, and a
    # workspace path costs pathlib work (100 agents: 10,000 of them, most of start-up).
    workspaces = {alias: str(workspace_path(config, alias, paths)) for alias in config.agents}
    in_order = sorted(workspaces.items())
    specs: dict[str, AgentSpec] = {}
    for alias, agent in sorted(config.agents.items()):
        if not agent.enabled:
            continue
        # Both guaranteed by validation for an enabled agent.
        assert agent.model_provider is not None
        assert agent.runtime_profile is not None
        chain = provider_chain(config, agent.provider_chain)
        runtime = config.runtime_profiles[agent.runtime_profile]
        policy = effective_risk_policy(config, alias, env, base_dir)
        secrets = [key for member in chain if (key := _key_env(member.config))]
        servers = mcp_server_specs(config, agent)
        specs[alias] = AgentSpec(
            alias=alias,
            workspace=workspaces[alias],
            activation=runtime.activation,
            idle_stop_secs=runtime.idle_stop_secs,
            provider=chain[0].name,
            provider_config=chain[0].config,
            fallbacks=chain[1:],
            risk=risk_spec(policy),
            runtime=runtime_spec(runtime),
            channels=agent.channels,
            delegates=agent.delegates,
            access={
                other: (workspaces[other], mode)
                for other, mode in sorted(agent.workspace.access.items())
            },
            other_workspaces=tuple(path for other, path in in_order if other != alias),
            read_memory_from=agent.memory.read_memory_from,
            secret_env=tuple(dict.fromkeys((*secrets, *mcp_env(servers)))),
            state_dir=str(paths.state_dir),
            runtime_dir=str(paths.runtime_dir),
            log_format=config.daemon.log_format,
            log_level=config.daemon.log_level,
            protected_paths=protected,
            code_paths=code,
            peer_tools=agent.peer_tools,
            dispatch_tools=alias in dispatch_callers or bool(agent.facades),
            facades=dict(sorted(agent.facades.items())),
            adapters=agent.adapters,
            reminders=config.risk_profiles[agent.risk_profile].reminders is not None
            if agent.risk_profile in config.risk_profiles
            else False,
            mcp_servers=servers,
            skills=skill_specs(skills, alias),
            memory=memory_spec(agent),
        )
    return specs


def skill_specs(catalogue: SkillCatalogue | None, alias: str) -> tuple[SkillSpec, ...]:
    """The skills `alias` loaded, as its process is told them."""
    if catalogue is None:
        return ()
    return tuple(
        SkillSpec(s.name, s.description, s.folder) for s in catalogue.loaded.get(alias, ())
    )


def memory_spec(agent: AgentConfig) -> MemorySpec:
    """An agent's `[agents.<a>.memory]` context settings, as its process takes them."""
    memory = agent.memory
    return MemorySpec(
        recall=memory.recall,
        recall_k=memory.recall_k,
        recall_budget_tokens=memory.recall_budget_tokens,
        history_budget_tokens=memory.history_budget_tokens,
        compact=memory.compact,
    )


def mcp_server_specs(config: Config, agent: AgentConfig) -> tuple[McpServerSpec, ...]:
    """The MCP servers an agent uses, as its process needs them (unknown names are the
    config rules' to report; they are left out here)."""
    return tuple(
        _server_spec(name, server, server.tools)
        for name in agent.mcp
        if (server := config.mcp_servers.get(name)) is not None
    )


def bound_server_specs(config: Config, bindings: Sequence[McpBinding]) -> tuple[McpServerSpec, ...]:
    """The MCP servers a sub-agent bundle binds (issue 26), each with the tools its binding
    names that the server's `tools` allowlist also names, in the server's order; a binding
    the bundle loader refused (unknown server) is left out here too."""
    return tuple(
        _server_spec(b.server, server, tuple(t for t in server.tools if t in b.tools))
        for b in bindings
        if (server := config.mcp_servers.get(b.server)) is not None
    )


def _server_spec(name: str, server: McpServerConfig, tools: tuple[str, ...]) -> McpServerSpec:
    return McpServerSpec(
        name=name,
        transport=server.transport,
        command=server.command or "",
        args=server.args,
        env=server.env,
        url=server.url or "",
        headers_env=dict(sorted(server.headers_env.items())),
        timeout_secs=server.timeout_secs,
        max_result_bytes=server.max_result_bytes,
        tools=tools,
        startup_timeout_secs=server.startup_timeout_secs,
    )


def mcp_env(servers: tuple[McpServerSpec, ...]) -> tuple[str, ...]:
    """The variables the agent's process must have for its MCP servers: what each stdio
    server gets, and what each HTTP server's headers are made of."""
    return tuple(dict.fromkeys(name for s in servers for name in (*s.env, *s.headers_env.values())))


@dataclass(frozen=True)
class SpecDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]


def _restart_relevant(spec: AgentSpec) -> AgentSpec:
    # Other agents' workspaces reach a running agent over its link (Neighbours): adding
    # or removing an agent must not restart every other one.
    return msgspec.structs.replace(spec, other_workspaces=())


def diff_specs(old: Mapping[str, AgentSpec], new: Mapping[str, AgentSpec]) -> SpecDiff:
    both = old.keys() & new.keys()
    same = {a for a in both if _restart_relevant(old[a]) == _restart_relevant(new[a])}
    return SpecDiff(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(sorted(both - same)),
        unchanged=tuple(sorted(same)),
    )


RUNTIME_IDLE_STOP_SECS = 300.0  # a revision's runtime with no invocation this long stops


def subagent_runtime_spec(
    config: Config,
    env: Mapping[str, str],
    revision: LoadedRevision,
    *,
    config_path: Path | None = None,
    daemon_pids: Sequence[int] = (),
    code_paths: Sequence[str] = (),
) -> AgentSpec:
    """The spec of one sub-agent revision's runtime process (issue 12): least privilege.

    It is started on demand under its revision's identity, sees its read-only snapshot as
    its workspace and nothing of any agent's, holds no memory, sessions, peers, channels or
    shell, and is bound only to its own provider's key variable and the variables its bound
    MCP servers get (issue 26). Those servers are its children, nested in its read-only
    sandbox; being readonly, it is offered only the bound tools the server annotates
    read-only, which every caller's risk profile allows without approval."""
    paths = daemon_paths(config, env)
    manifest = revision.bundle.manifest
    provider = config.provider(manifest.model_provider)
    if provider is None:
        raise ValueError(f"provider {manifest.model_provider!r} is not configured any more")
    secret = getattr(provider, "api_key_env", None)
    servers = bound_server_specs(config, manifest.mcp)
    return AgentSpec(
        alias=revision.identity,
        workspace=str(revision.snapshot),
        activation="on-demand",
        idle_stop_secs=RUNTIME_IDLE_STOP_SECS,
        provider=manifest.model_provider,
        provider_config=provider_spec(provider),
        risk=RiskSpec(
            profile="subagent",
            level="readonly",
            workspace_only=True,
            allowed_commands=(),
            forbidden_paths=(),
            require_approval_for_medium_risk=True,
            block_high_risk_commands=True,
            sandbox="auto",
        ),
        runtime=RuntimeSpec(
            max_tool_iterations=manifest.policy.maxToolCalls,
            max_actions_per_hour=1_000_000,  # its bound is maxToolCalls per invocation
            shell_timeout_secs=1.0,
        ),
        channels=(),
        delegates=(),
        access={},
        other_workspaces=tuple(
            str(workspace_path(config, alias, paths)) for alias in sorted(config.agents)
        ),
        read_memory_from=(),
        secret_env=tuple(dict.fromkeys((*((secret,) if secret else ()), *mcp_env(servers)))),
        state_dir=str(paths.state_dir),
        runtime_dir=str(paths.runtime_dir),
        log_format=config.daemon.log_format,
        log_level=config.daemon.log_level,
        protected_paths=protected_paths(config, env, config_path, daemon_pids),
        code_paths=tuple(code_paths),
        mcp_servers=servers,
        subagent=SubagentRuntime(
            agent_id=manifest.id,
            digest=revision.bundle.digest,
            snapshot=str(revision.snapshot),
            max_tool_calls=manifest.policy.maxToolCalls,
            timeout_secs=manifest.policy.timeoutSeconds,
        ),
    )
