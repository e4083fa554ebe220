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
