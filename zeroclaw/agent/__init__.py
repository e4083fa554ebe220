"""The agent process: its start contract, its link to the daemon, its main.

It reaches memory, peers and sub-agents only through the daemon (ADR 0049): the CLI's
in-process run (`chat -m` with no daemon) composes its own reach over the memory store.
"""

from __future__ import annotations

from ._link import (
    MAX_LINK_FRAME,
    Busy,
    Fatal,
    Keys,
    LinkMessage,
    Neighbours,
    Ping,
    Pong,
    ProbeCommand,
    ProbeResult,
    decode_link,
    encode_link,
)
from ._process import LinkSender, agent_main, say_fatal, serve_agent
from ._sandbox import (
    InProcessSandbox,
    InProcessSandboxRequired,
    agent_plan,
    command_home_root,
    confine_in_process,
)
from ._spec import (
    AgentSpec,
    McpServerSpec,
    MemorySpec,
    RiskSpec,
    RuntimeSpec,
    SkillSpec,
    SubagentRuntime,
    path_rules,
)
from ._turn import TurnEngine

__all__ = [
    "MAX_LINK_FRAME",
    "AgentSpec",
    "Busy",
    "Fatal",
    "InProcessSandbox",
    "InProcessSandboxRequired",
    "Keys",
    "LinkMessage",
    "LinkSender",
    "McpServerSpec",
    "MemorySpec",
    "Neighbours",
    "Ping",
    "Pong",
    "ProbeCommand",
    "ProbeResult",
    "RiskSpec",
    "RuntimeSpec",
    "SkillSpec",
    "SubagentRuntime",
    "TurnEngine",
    "agent_main",
    "agent_plan",
    "command_home_root",
    "confine_in_process",
    "decode_link",
    "encode_link",
    "path_rules",
    "say_fatal",
    "serve_agent",
]
