"""Messages on the control socket (operator CLI ⇄ daemon), as msgspec structs in msgpack.

Requests are a tagged union on `cmd`; every request gets one or more Replies (`more=True`
on all but the last, for streaming commands added by later features).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .._decode import decode_msgpack

PROTOCOL_VERSION = 1
MAX_CONTROL_FRAME = 4 * 1024 * 1024


class Request(msgspec.Struct, tag_field="cmd", forbid_unknown_fields=True, frozen=True):
    pass


class Status(Request, tag="status", frozen=True):
    pass


class AgentsList(Request, tag="agents.list", frozen=True):
    pass


class AgentStart(Request, tag="agents.start", frozen=True):
    alias: str


class AgentStop(Request, tag="agents.stop", frozen=True):
    alias: str


class AgentRestart(Request, tag="agents.restart", frozen=True):
    alias: str


class RouteProbe(Request, tag="route.probe", frozen=True):
    """Make agent `from_` send a probe to `to` through the router."""

    from_: str = msgspec.field(name="from")
    to: str
    channel: str | None = None


class MemoryCommand(Request, tag="memory", frozen=True):
    """An operator memory operation on one agent's namespace."""

    op: str
    agent: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class Chat(Request, tag="chat", frozen=True):
    """One chat turn with an agent. Replies stream events (`more=True`): {"event": "delta",
    "text"}, {"event": "tool", ...}, {"event": "approval", "what"}; the last reply carries
    the result. While it runs the client may send ChatCancel or ChatApproval."""

    agent: str
    text: str
    session: str = "default"
    interactive: bool = False  # someone is there to answer approval prompts


class ChatOpen(Request, tag="chat.open", frozen=True):
    """Sent first by an interactive `zeroclaw chat`: the connection is a chat session from
    now on, which the daemon never closes for being idle (someone is thinking or typing)."""

    agent: str


class ChatCancel(Request, tag="chat.cancel", frozen=True):
    pass


class ChatApproval(Request, tag="chat.approval", frozen=True):
    approved: bool


class Reload(Request, tag="reload", frozen=True):
    pass


class Shutdown(Request, tag="shutdown", frozen=True):
    pass


AnyRequest = (
    Status
    | AgentsList
    | AgentStart
    | AgentStop
    | AgentRestart
    | RouteProbe
    | MemoryCommand
    | Chat
    | ChatOpen
    | ChatCancel
    | ChatApproval
    | Reload
    | Shutdown
)


class Reply(msgspec.Struct, frozen=True, omit_defaults=True):
    ok: bool
    data: dict[str, Any] | None = None
    error: str | None = None  # a stable code, e.g. "unknown_agent"
    message: str | None = None  # for people
    more: bool = False


_request_encoder = msgspec.msgpack.Encoder()
_request_decoder = msgspec.msgpack.Decoder(AnyRequest)
_reply_decoder = msgspec.msgpack.Decoder(Reply)


def encode(message: Request | Reply) -> bytes:
    return _request_encoder.encode(message)


def decode_request(payload: bytes) -> AnyRequest:
    """Raises DecodeFailure (code `malformed` or `too_large`) on anything else, however
    deep or broken (ADR 0014)."""
    return decode_msgpack(_request_decoder, payload, max_bytes=MAX_CONTROL_FRAME)


def decode_reply(payload: bytes) -> Reply:
    """Raises DecodeFailure as decode_request does."""
    return decode_msgpack(_reply_decoder, payload, max_bytes=MAX_CONTROL_FRAME)


def error_reply(code: str, message: str) -> Reply:
    return Reply(ok=False, error=code, message=message)
