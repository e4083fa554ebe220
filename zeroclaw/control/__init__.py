"""The operator control protocol: framing, messages and a blocking client."""

from ._client import ControlClient, DaemonUnreachable
from ._framing import FrameDecoder, FrameTooLarge, encode_frame
from ._protocol import (
    MAX_CONTROL_FRAME,
    PROTOCOL_VERSION,
    AgentRestart,
    AgentsList,
    AgentStart,
    AgentStop,
    AnyRequest,
    Reload,
    Reply,
    Request,
    RouteProbe,
    Shutdown,
    Status,
    decode_reply,
    decode_request,
    encode,
    error_reply,
)

__all__ = [
    "MAX_CONTROL_FRAME",
    "PROTOCOL_VERSION",
    "AgentRestart",
    "AgentStart",
    "AgentStop",
    "AgentsList",
    "AnyRequest",
    "ControlClient",
    "DaemonUnreachable",
    "FrameDecoder",
    "FrameTooLarge",
    "Reload",
    "Reply",
    "Request",
    "RouteProbe",
    "Shutdown",
    "Status",
    "decode_reply",
    "decode_request",
    "encode",
    "encode_frame",
    "error_reply",
]
