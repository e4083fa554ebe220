"""The contract between the supervisor and an agent process: what the agent starts with.

Plain msgspec structs only: the zygote decodes them from msgpack, and an agent process
never imports the config models (pydantic).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..policy import GrantMode, PathRules, rules_for
from ..providers import NamedProvider, ProviderSpec


class RiskSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The agent's effective risk policy (its profile combined with its workspace settings)."""

    profile: str
    level: Literal["readonly", "supervised", "full"]
    workspace_only: bool
    allowed_commands: tuple[str, ...]
    forbidden_paths: tuple[str, ...]  # absolute, '~' expanded
    require_approval_for_medium_risk: bool
    block_high_risk_commands: bool
    sandbox: Literal["auto", "landlock", "none"]
    approval_timeout_secs: float = 120.0  # no yes in time on the turn's channel: denied

    @property
    def may_act(self) -> bool:
        """Writes and shell commands: anything but `readonly`."""
        return self.level != "readonly"

    @property
    def asks_approval(self) -> bool:
        return self.level == "supervised" and self.require_approval_for_medium_risk


class RuntimeSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The turn limits of the agent's runtime profile."""

    max_tool_iterations: int
    max_actions_per_hour: int
    shell_timeout_secs: float


class MemorySpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a turn is given from memory (`[agents.<a>.memory]`, ADR 0059)."""

    recall: bool = True
    recall_k: int = 5
    recall_budget_tokens: int = 1000
    history_budget_tokens: int = 8000
    compact: bool = True


class SubagentRuntime(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What makes a process a sub-agent runtime instead of an agent (issue 12): the one
    revision it serves. Its prompt, skills and schemas are read from `snapshot`, the
    revision's read-only directory, which is all Landlock lets it read besides the system."""

    agent_id: str
    digest: str
    snapshot: str  # <state_dir>/revisions/<digest>
    max_tool_calls: int
    timeout_secs: float


class McpServerSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One MCP server the agent uses (issue 26), as `[mcp_servers.<name>]` says. A stdio
    server is the agent's own child, in a sandbox nested in the agent's; its environment is
    the variables `env` names (their values are in the agent's environment, which the daemon
    gave it: see `AgentSpec.secret_env`) and nothing else."""

    name: str
    transport: Literal["stdio", "http"]
    command: str = ""  # stdio: as configured; resolved on the agent's PATH
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()  # stdio: variable names
    url: str = ""  # http
    headers_env: dict[str, str] = msgspec.field(default_factory=dict)  # header -> variable
    timeout_secs: float = 30.0
    max_result_bytes: int = 64 * 1024
    tools: tuple[str, ...] = ()  # the allowlist, by the server's own names
    startup_timeout_secs: float = 30.0  # spawn (or connect) to an answered initialize


class SkillSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One skill the daemon loaded for this agent (ADR 0056): its name and one-line
    description are listed in the agent's system prompt, its files read with skill_read
    under `folder` (a real path), which the agent's Landlock domain may read and not
    write."""

    name: str
    description: str
    folder: str


class AgentSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything an agent process needs at start; sent to the zygote as msgpack."""

    alias: str
    workspace: str
    activation: str
    idle_stop_secs: float
    provider: str  # "kind.alias"
    provider_config: ProviderSpec
    risk: RiskSpec
    runtime: RuntimeSpec
    channels: tuple[str, ...]
    delegates: tuple[str, ...]
    access: dict[str, tuple[str, GrantMode]]  # alias -> (workspace path, mode)
    other_workspaces: tuple[str, ...]  # every other agent's workspace (refused even to full)
    read_memory_from: tuple[str, ...]
    secret_env: tuple[str, ...]  # names of the env vars this agent is bound to
    state_dir: str
    runtime_dir: str
    log_format: str
    log_level: str
    # The daemon's own files (state and runtime dirs, config file, /proc/<daemon>,
    # /proc/<zygote>): refused to every tool under every profile, never granted by
    # Landlock (ADR 0015).
    protected_paths: tuple[str, ...] = ()
    # The daemon's own code (ADR 0044): the interpreter, prefixes, site-packages, the
    # package, sys.path and editable sources, as the daemon found them at its start.
    # Never writable (policy and Landlock, every profile); always readable.
    code_paths: tuple[str, ...] = ()
    # Tools a turn started by a peer (ask/delegate over the bus) may use; the operator's
    # own chat keeps every tool (ADR 0015).
    peer_tools: tuple[str, ...] = ()
    # Sub-agents (issue 12): `agent_catalog`/`agent_dispatch` are offered when some
    # sub-agent lists this agent in its allowedCallers; `facades` maps a tool name of this
    # agent to the sub-agent id it dispatches to.
    dispatch_tools: bool = False
    facades: dict[str, str] = msgspec.field(default_factory=dict)
    # Discovered adapters this agent may call with invoke_adapter (issue 15); the daemon
    # admits each call again.
    adapters: tuple[str, ...] = ()
    # MCP servers this agent uses (issue 26), in its [agents] mcp order.
    mcp_servers: tuple[McpServerSpec, ...] = ()
    # Skills the daemon loaded for it (ADR 0056), in its [agents] skills order.
    skills: tuple[SkillSpec, ...] = ()
    # Set only for a sub-agent revision's runtime process (its alias is its bus identity).
    subagent: SubagentRuntime | None = None
    # The rest of its fallback chain after `provider` (ADR 0058), in order.
    fallbacks: tuple[NamedProvider, ...] = ()
    # Recall into its turns, its sessions' history budget and compaction (ADR 0059).
    memory: MemorySpec = msgspec.field(default_factory=MemorySpec)

    def provider_chain(self) -> tuple[NamedProvider, ...]:
        """Every provider it may ask, in order: `provider`, then its fallbacks."""
        return (NamedProvider(self.provider, self.provider_config), *self.fallbacks)

    @property
    def skill_folders(self) -> tuple[tuple[str, str], ...]:
        """(name, folder) of each of its skills, as its skill_read tool takes them."""
        return tuple((skill.name, skill.folder) for skill in self.skills)


def path_rules(spec: AgentSpec, other_workspaces: tuple[str, ...] | None = None) -> PathRules:
    """The agent's path rules, as its tools apply them (and as the daemon builds the sandbox
    of an adapter it runs for the agent). `other_workspaces`: a reload's newer list."""
    risk = spec.risk
    return rules_for(
        spec.workspace,
        workspace_only=risk.workspace_only,
        may_write=risk.may_act,
        forbidden=risk.forbidden_paths,
        grants=[(alias, path, mode) for alias, (path, mode) in spec.access.items()],
        other_workspaces=spec.other_workspaces if other_workspaces is None else other_workspaces,
        protected=spec.protected_paths,
        code=spec.code_paths,
    )
