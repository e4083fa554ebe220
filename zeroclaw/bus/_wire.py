"""The bus wire protocol: msgspec structs as msgpack, a tagged union with a version.

Agent → router:  Hello, Send, Ack, Heartbeat, Request
Router → agent:  Deliver, Ack, Refusal, Response
Every struct carries `v` (PROTOCOL_VERSION); a frame with another version, an unknown tag
or bad fields is `malformed`: dropped, counted, and refused to its sender when its id
can be read. See ADR 0005 for the table of message types.

Bodies (a message's, a request's, a response's) are `msgspec.Raw`: the encoded struct its
kind or op names, relayed by the router undecoded and decoded by whoever receives it
(ADR 0048). `MESSAGE_BODIES` names the struct of each message kind.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

from .._decode import (
    MAX_DEPTH,
    MSGPACK_HEADERS,
    DecodeErrorCode,
    DecodeFailure,
    could_nest_deeper,
    decode_msgpack,
)
from .._ops import BodyError, Nothing, decode_body, encode_body
from .._refusals import REFUSAL_CODES as REFUSAL_CODES  # the bus modules name them here
from .._refusals import RefusalCode as RefusalCode

# 2: bodies are typed structs carried as msgspec.Raw (ADR 0048)
PROTOCOL_VERSION = 2
# A ceiling for decoding whatever a socket hands over; the router's configured
# max_frame_bytes (at most this) is checked before decoding.
MAX_WIRE_FRAME = 64 * 1024 * 1024


# Every kind of agent message. A frame with any other kind is `malformed`.
#   message, probe   agent to agent (a probe is `route probe`'s measured round trip)
#   ask, delegate    a question to a peer; the asker waits for its `reply`
#   reply            the answer to an ask/delegate (`body.in_reply_to` names it)
#   chat, cancel     from the daemon only: an operator's chat turn, and its cancellation
MessageKind = Literal["message", "probe", "ask", "delegate", "reply", "chat", "cancel"]
MESSAGE_KINDS: tuple[str, ...] = get_args(MessageKind)
QUESTION_KINDS = frozenset({"ask", "delegate"})  # kinds whose sender waits for a `reply`


class PeerQuestion(msgspec.Struct, frozen=True):
    """The body of an `ask` or `delegate`. `tools`: what the daemon granted the origin of
    the turn that asks (None: not narrowed, the operator's or a dispatch's), carried along
    the chain so that no hop widens it (ADR 0042): the callee's turn gets its peer_tools
    among those only."""

    text: str
    tools: tuple[str, ...] | None = None


class PeerAnswer(msgspec.Struct, frozen=True, omit_defaults=True):
    """The body of a `reply`: the answer to question `in_reply_to`, or why there is none."""

    in_reply_to: str
    text: str = ""
    error: str | None = None


class PeerNote(msgspec.Struct, frozen=True):
    """The body of a plain `message` (no answer awaited)."""

    text: str


# An encoded empty map: the body of a request whose struct has no field to fill.
EMPTY_BODY = msgspec.Raw(b"\x80")


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """One agent-to-agent message. The router sets `from` (the authenticated alias) and
    `depth` (how many questions led to this one, by its own count); a sender's are ignored."""

    id: str
    to: str
    channel: str
    body: msgspec.Raw  # the encoded struct its kind names (MESSAGE_BODIES)
    sent_at: float
    from_: str = msgspec.field(default="", name="from")
    session: str | None = None
    kind: MessageKind = "message"
    depth: int = 0


class _Wire(msgspec.Struct, frozen=True, tag_field="t"):
    v: int = PROTOCOL_VERSION


class Hello(_Wire, tag="hello", frozen=True):
    """An agent joins the bus. `sandbox` and `sandbox_in_force` are its own account of its
    OS sandbox, for `status` (ADR 0031); their defaults keep an older agent's Hello valid."""

    pid: int = 0
    sandbox: str = ""
    sandbox_in_force: bool = False


class Send(_Wire, tag="send", frozen=True):
    message: Message | None = None


class Deliver(_Wire, tag="deliver", frozen=True):
    rid: int = 0  # the router's id for this delivery; the destination acks it
    message: Message | None = None


class Ack(_Wire, tag="ack", frozen=True):
    """Destination → router: `rids` delivered. Router → sender: message `ids` acknowledged."""

    rids: tuple[int, ...] = ()
    ids: tuple[str, ...] = ()


class Refusal(_Wire, tag="refusal", frozen=True):
    id: str | None = None
    code: str = "malformed"  # a RefusalCode; a str so that a newer router's code still decodes
    detail: str = ""


class Heartbeat(_Wire, tag="heartbeat", frozen=True):
    seq: int = 0


class Request(_Wire, tag="request", frozen=True):
    """A call to a daemon service (memory, dispatch) through the router."""

    id: str = ""
    service: str = ""
    op: str = ""  # the operation's name: the tag that picks the body's struct
    body: msgspec.Raw = EMPTY_BODY  # the encoded request struct of `op`


class Response(_Wire, tag="response", frozen=True):
    """A service's answer: `body` is the encoded answer struct of the op when `ok`;
    otherwise `error` is a code of the op's family (or the bus's: timeout, ...)."""

    id: str = ""
    ok: bool = True
    body: msgspec.Raw = EMPTY_BODY
    error: str | None = None  # a str so that a newer service's code still decodes
    detail: str = ""


AgentFrame = Hello | Send | Ack | Heartbeat | Request
RouterFrame = Deliver | Ack | Refusal | Response

_encoder = msgspec.msgpack.Encoder()
_from_agent = msgspec.msgpack.Decoder(AgentFrame)
_from_router = msgspec.msgpack.Decoder(RouterFrame)
_untyped: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder()


class _IdField(msgspec.Struct):
    # every other field is skipped unread, so a deep body does not count
    id: msgspec.Raw = msgspec.Raw(b"\xc0")  # nil when absent


class _IdOnly(msgspec.Struct):
    message: _IdField | None = None


_id_probe = msgspec.msgpack.Decoder(_IdOnly)


class WireError(Exception):
    """A frame that is not a valid message of this protocol version (`malformed`, also
    when it nests too deeply), or too big to decode (`too_large`)."""

    def __init__(self, detail: str, code: DecodeErrorCode = "malformed") -> None:
        super().__init__(detail)
        self.code: DecodeErrorCode = code


def encode(frame: AgentFrame | RouterFrame) -> bytes:
    return _encoder.encode(frame)


def _decode(decoder: msgspec.msgpack.Decoder[Any], payload: bytes) -> Any:
    try:
        frame = decode_msgpack(decoder, payload, max_bytes=MAX_WIRE_FRAME)
        if could_nest_deeper(payload, MAX_DEPTH - 1, MSGPACK_HEADERS):
            # A body is Raw (not walked above): a frame that may nest too deeply is walked
            # whole, so a deep body is refused here, with its id, as any deep frame is.
            decode_msgpack(_untyped, payload, max_bytes=MAX_WIRE_FRAME)
    except DecodeFailure as exc:
        raise WireError(exc.detail, exc.code) from None
    if frame.v != PROTOCOL_VERSION:
        raise WireError(f"protocol version {frame.v}, expected {PROTOCOL_VERSION}")
    return frame


def decode_from_agent(payload: bytes) -> AgentFrame:
    frame: AgentFrame = _decode(_from_agent, payload)
    return frame


def decode_from_router(payload: bytes) -> RouterFrame:
    frame: RouterFrame = _decode(_from_router, payload)
    return frame


def salvage_message_id(payload: bytes) -> str | None:
    """Best effort: the message id inside a frame that failed to decode, to refuse it."""
    try:
        probe = decode_msgpack(_id_probe, payload, max_bytes=4 * MAX_WIRE_FRAME)
    except DecodeFailure:
        return None
    if probe.message is None:
        return None
    try:
        value = msgspec.msgpack.decode(probe.message.id, type=str)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return value if len(value) <= 128 else None


# The body of each kind of message; the turn's own (chat: TurnInput, cancel: TurnCancel)
# are declared by the turns wire, which the bus does not import.
MESSAGE_BODIES: dict[str, type[msgspec.Struct]] = {
    "message": PeerNote,
    "probe": Nothing,
    "ask": PeerQuestion,
    "delegate": PeerQuestion,
    "reply": PeerAnswer,
}


def answered_question(message: Message) -> str | None:
    """The question a `reply` answers (its body's `in_reply_to`); None if it does not
    decode as a PeerAnswer."""
    try:
        return decode_body(message.body, PeerAnswer).in_reply_to
    except BodyError:
        return None


def answer(request: Request, body: msgspec.Struct) -> Response:
    """A service's answer to `request`: its op's answer struct."""
    return Response(id=request.id, ok=True, body=encode_body(body))


def refusal(request: Request, code: str, detail: str = "") -> Response:
    """A service's refusal of `request`: a code of the op's family."""
    return Response(id=request.id, ok=False, error=code, detail=detail)
