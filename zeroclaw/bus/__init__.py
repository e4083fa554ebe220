"""The message bus: wire protocol, peer-group policy, trio<->zmq socket owner, router, client.

The router and the policy (which need the config models) load on first use, so agent
processes, which only need the client, start without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._delegation import MAX_DELEGATION_DEPTH
from .._lazy import lazy_attributes
from .._refusals import REFUSAL_CODES, RefusalCode  # the router's vocabulary too
from .._sender_names import normalize_sender
from ._client import AgentBus, BusCredentials, Outcome
from ._origin import (
    DAEMON_SENDER,
    ORIGIN_KINDS,
    SCHEDULE_CHANNEL,
    SUBAGENT_ORIGIN_CHANNEL,
    Origin,
    OriginKind,
)
from ._sessions import (
    DEFAULT_SESSION,
    SessionNameRefused,
    SessionOwner,
    origin_namespace,
    session_key,
    session_owner,
)
from ._wire import (
    EMPTY_BODY,
    MESSAGE_BODIES,
    MESSAGE_KINDS,
    PROTOCOL_VERSION,
    QUESTION_KINDS,
    Ack,
    Deliver,
    Heartbeat,
    Hello,
    Message,
    MessageKind,
    PeerAnswer,
    PeerNote,
    PeerQuestion,
    Refusal,
    Request,
    Response,
    Send,
    WireError,
    answer,
    answered_question,
    decode_from_agent,
    decode_from_router,
    encode,
    refusal,
    serve_op,
)
from ._zsocket import SocketOwner

if TYPE_CHECKING:
    from ._grants import (
        ApprovalRoute,
        GroupGrant,
        OriginGrant,
        origin_grant,
        sender_grant,
    )
    from ._policy import OriginRule, PeerPolicy, RouteDecision
    from ._router import AgentKeys, NoHooks, Router, RouterHooks, ServiceHandler
    from ._router_core import RouterCore

_LAZY = {
    "ApprovalRoute": "._grants",
    "GroupGrant": "._grants",
    "OriginGrant": "._grants",
    "origin_grant": "._grants",
    "sender_grant": "._grants",
    "PeerPolicy": "._policy",
    "RouteDecision": "._policy",
    "OriginRule": "._policy",
    "AgentKeys": "._router",
    "NoHooks": "._router",
    "Router": "._router",
    "RouterHooks": "._router",
    "ServiceHandler": "._router",
    "RouterCore": "._router_core",
}


_load = lazy_attributes(__name__, _LAZY)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "DAEMON_SENDER",
    "DEFAULT_SESSION",
    "EMPTY_BODY",
    "MAX_DELEGATION_DEPTH",
    "MESSAGE_BODIES",
    "MESSAGE_KINDS",
    "ORIGIN_KINDS",
    "PROTOCOL_VERSION",
    "QUESTION_KINDS",
    "REFUSAL_CODES",
    "SCHEDULE_CHANNEL",
    "SUBAGENT_ORIGIN_CHANNEL",
    "Ack",
    "AgentBus",
    "AgentKeys",
    "ApprovalRoute",
    "BusCredentials",
    "Deliver",
    "GroupGrant",
    "Heartbeat",
    "Hello",
    "Message",
    "MessageKind",
    "NoHooks",
    "Origin",
    "OriginGrant",
    "OriginKind",
    "OriginRule",
    "Outcome",
    "PeerAnswer",
    "PeerNote",
    "PeerPolicy",
    "PeerQuestion",
    "Refusal",
    "RefusalCode",
    "Request",
    "Response",
    "RouteDecision",
    "Router",
    "RouterCore",
    "RouterHooks",
    "Send",
    "ServiceHandler",
    "SessionNameRefused",
    "SessionOwner",
    "SocketOwner",
    "WireError",
    "answer",
    "answered_question",
    "decode_from_agent",
    "decode_from_router",
    "encode",
    "normalize_sender",
    "origin_grant",
    "origin_namespace",
    "refusal",
    "sender_grant",
    "serve_op",
    "session_key",
    "session_owner",
]
