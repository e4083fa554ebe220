"""The contract between the supervisor and an agent process: what the agent starts with."""

from __future__ import annotations

import msgspec


class AgentSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything an agent process needs at start; sent to the zygote as msgpack."""

    alias: str
    workspace: str
    activation: str
    idle_stop_secs: float
    provider: str
    provider_config: dict[str, object]
    risk: dict[str, object]
    runtime: dict[str, object]
    channels: tuple[str, ...]
    delegates: tuple[str, ...]
    access: dict[str, tuple[str, str]]  # alias -> (workspace path, mode)
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
    # Tools a turn started by a peer (ask/delegate over the bus) may use; the operator's
    # own chat keeps every tool (ADR 0015).
    peer_tools: tuple[str, ...] = ()
