"""The message bus: wire protocol, peer-group policy, trio<->zmq socket owner, router, client."""

from ._client import AgentBus, BusCredentials, Outcome
from ._policy import PeerPolicy, RouteDecision
from ._router import AgentKeys, Router
from ._wire import (
    PROTOCOL_VERSION,
    REFUSAL_CODES,
    Ack,
    Deliver,
    Heartbeat,
    Hello,
    Message,
    Refusal,
    Request,
    Response,
    Send,
    WireError,
    decode_from_agent,
    decode_from_router,
    encode,
)
from ._zsocket import SocketOwner

__all__ = [
    "PROTOCOL_VERSION",
    "REFUSAL_CODES",
    "Ack",
    "AgentBus",
    "AgentKeys",
    "BusCredentials",
    "Deliver",
    "Heartbeat",
    "Hello",
    "Message",
    "Outcome",
    "PeerPolicy",
    "Refusal",
    "Request",
    "Response",
    "RouteDecision",
    "Router",
    "Send",
    "SocketOwner",
    "WireError",
    "decode_from_agent",
    "decode_from_router",
    "encode",
]
