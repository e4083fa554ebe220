"""The agent process: its start contract, its link to the daemon, its main."""

from ._link import (
    MAX_LINK_FRAME,
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
from ._process import agent_main, serve_agent
from ._spec import AgentSpec

__all__ = [
    "MAX_LINK_FRAME",
    "AgentSpec",
    "Keys",
    "LinkMessage",
    "Neighbours",
    "Ping",
    "Pong",
    "ProbeCommand",
    "ProbeResult",
    "agent_main",
    "decode_link",
    "encode_link",
    "serve_agent",
]
