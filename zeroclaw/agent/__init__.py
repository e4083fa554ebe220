"""The agent process: its start contract, its link to the daemon, its main."""

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
from ._spec import AgentSpec, RiskSpec, RuntimeSpec

__all__ = [
    "MAX_LINK_FRAME",
    "AgentSpec",
    "Busy",
    "Fatal",
    "Keys",
    "LinkMessage",
    "LinkSender",
    "Neighbours",
    "Ping",
    "Pong",
    "ProbeCommand",
    "ProbeResult",
    "RiskSpec",
    "RuntimeSpec",
    "agent_main",
    "decode_link",
    "encode_link",
    "say_fatal",
    "serve_agent",
]
