"""The agent process: its start contract, its link to the daemon, its main.

`LocalReach` (an agent run inside the CLI, memory straight from the store) loads on first
use: agent processes never need the memory store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from ._process import LinkSender, agent_main, say_fatal, serve_agent
from ._sandbox import (
    InProcessSandbox,
    InProcessSandboxRequired,
    agent_plan,
    command_home_root,
    confine_in_process,
)
from ._spec import AgentSpec, RiskSpec, RuntimeSpec, SubagentRuntime, path_rules
from ._turn import TurnEngine

if TYPE_CHECKING:
    from ._local import LocalReach

_load = lazy_attributes(__name__, {"LocalReach": "._local"})


def __getattr__(name: str) -> Any:
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
    "LocalReach",
    "Neighbours",
    "Ping",
    "Pong",
    "ProbeCommand",
    "ProbeResult",
    "RiskSpec",
    "RuntimeSpec",
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
