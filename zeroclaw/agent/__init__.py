"""The agent process: its start contract, its link to the daemon, its main.

It reaches memory, peers and sub-agents only through the daemon (ADR 0049): the CLI's
in-process run (`chat -m` with no daemon) composes its own reach over the memory store.

The daemon imports this package for the start contract (the spec, the link, the sandbox
plan); the agent's main and its turn engine (tools, providers, the bus client) load on
first use, so the daemon never does (ADR 0067).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
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
from ._sandbox import (
    InProcessSandbox,
    InProcessSandboxRequired,
    agent_plan,
    command_home_root,
    confine_in_process,
    for_agent,
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

if TYPE_CHECKING:
    from ._process import LinkSender, agent_main, say_fatal, serve_agent
    from ._turn import TurnEngine

_load = lazy_attributes(
    __name__,
    {
        "LinkSender": "._process",
        "agent_main": "._process",
        "say_fatal": "._process",
        "serve_agent": "._process",
        "TurnEngine": "._turn",
    },
)


def __getattr__(name: str) -> object:
    return _load(name, globals())


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
    "for_agent",
    "path_rules",
    "say_fatal",
    "serve_agent",
]
