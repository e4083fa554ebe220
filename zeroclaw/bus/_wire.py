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

import logging
from collections.abc import Awaitable
from typing import Any, Literal, NamedTuple, TypeVar, get_args

import msgspec

from .._decode import (
    MAX_DEPTH,
    MSGPACK_HEADERS,
    DecodeErrorCode,
    DecodeFailure,
    could_nest_deeper,
    decode_msgpack,
)
from .._ops import BodyError, Nothing, OpTable, decode_body, encode_body
from .._refusals import REFUSAL_CODES as REFUSAL_CODES  # the bus modules name them here
from .._refusals import RefusalCode as RefusalCode

# 2: bodies are typed structs carried as msgspec.Raw (ADR 0048)
# 3: a question's tools are the router's stamp on the envelope, not the asker's word (ADR 0052)
PROTOCOL_VERSION = 3
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
    """The body of an `ask` or `delegate`. What the callee's turn may use is not the
    asker's to say: the router stamps it on the envelope (`Message.tools`, ADR 0052)."""

    text: str


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
    """One agent-to-agent message. The router sets `from` (the authenticated alias),
    `depth` (how many questions led to this one, by its own count) and, on a question,
    `tools`; a sender's are ignored.

    `turn`: the asker's word for which of its turns a question comes from (the daemon's
    chat's id, or the `turn` the router stamped on a question it was asked). The router
    looks that turn up among the ones it knows this sender holds and stamps its grant as
    `tools` (None: not narrowed; an unknown turn: no tools), so an agent can claim only a
    grant it holds (ADR 0052). On a delivered question, `turn` is the router's name for
    the callee's turn (`asker/id`: an id alone is the asker's to choose)."""

    id: str
    to: str
    channel: str
    body: msgspec.Raw  # the encoded struct its kind names (MESSAGE_BODIES)
    sent_at: float
    from_: str = msgspec.field(default="", name="from")
    session: str | None = None
    kind: MessageKind = "message"
    depth: int = 0
    turn: str | None = None
    tools: tuple[str, ...] | None = None


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
    """Still accepted (and counted) from an agent that sends one; ours no longer do
    (ADR 0069): the runner's ping over the link is the agent's liveness."""

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


class SalvagedIds(NamedTuple):
    message: str | None  # a Send's message id: refused to its sender by it
    request: str | None  # a Request's id: answered, so its caller does not wait it out


def salvage_ids(payload: bytes) -> SalvagedIds:
    """Best effort: the id inside a frame that failed to decode, to refuse it. Read from the
    frame's leading fields only (msgspec writes `t` and `id` before a body, and a message's
    `id` first), so a body nested past any depth is never walked."""
    try:
        fields, inner = _leading_strings(payload, 0, descend="message")
    except (IndexError, UnicodeDecodeError):
        return SalvagedIds(None, None)
    message, request = inner.get("id"), fields.get("id")
    if fields.get("t") == "send":
        return SalvagedIds(_short(message), None)
    if fields.get("t") == "request":
        return SalvagedIds(None, _short(request))
    return SalvagedIds(None, None)


def salvage_message_id(payload: bytes) -> str | None:
    """Best effort: the message id inside a Send that failed to decode."""
    return salvage_ids(payload).message


def _short(value: str | None) -> str | None:
    return value if value is not None and len(value) <= 128 else None


# A frame's ids are among its first fields (`t`, `v`, `id`; a message's `id` first); a
# map's header may claim 2**32-1 entries, and each is a step of this loop in Python.
MAX_LEADING_FIELDS = 8


def _leading_strings(
    data: bytes, pos: int, descend: str | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """The string fields of the msgpack map at `pos`, up to its first container or its
    MAX_LEADING_FIELDS-th field, and those of the map under key `descend`, read the same
    way (one level only: a key is never a path, and no nesting is followed)."""
    found: dict[str, str] = {}
    inner: dict[str, str] = {}
    header = _map_header(data, pos)
    if header is None:
        return found, inner
    count, pos = header
    for _ in range(min(count, MAX_LEADING_FIELDS)):
        key = _string(data, pos)
        if key is None:
            break
        name, pos = key
        if descend is not None and name == descend and _map_header(data, pos) is not None:
            inner = _leading_strings(data, pos)[0]
            break
        value = _string(data, pos)
        if value is not None:
            found[name], pos = value
            continue
        after = _after_scalar(data, pos)
        if after is None:
            break  # a container: what follows is not read
        pos = after
    return found, inner


def _map_header(data: bytes, pos: int) -> tuple[int, int] | None:
    first = data[pos]
    if 0x80 <= first <= 0x8F:
        return first & 0x0F, pos + 1
    if first == 0xDE:
        return int.from_bytes(data[pos + 1 : pos + 3], "big"), pos + 3
    if first == 0xDF:
        return int.from_bytes(data[pos + 1 : pos + 5], "big"), pos + 5
    return None


def _string(data: bytes, pos: int) -> tuple[str, int] | None:
    first = data[pos]
    if 0xA0 <= first <= 0xBF:
        size, start = first & 0x1F, pos + 1
    elif first in _STR_LENGTH_BYTES:
        width = _STR_LENGTH_BYTES[first]
        size, start = int.from_bytes(data[pos + 1 : pos + 1 + width], "big"), pos + 1 + width
    else:
        return None
    raw = data[start : start + size]
    if len(raw) < size:
        raise IndexError("a string past the frame's end")
    return raw.decode(), start + size


_STR_LENGTH_BYTES = {0xD9: 1, 0xDA: 2, 0xDB: 4}
# The scalars a leading field may be (msgpack's type byte -> its whole size); a bin's is its
# header's, plus the length it gives.
_SCALAR_SIZES = {0xC0: 1, 0xC2: 1, 0xC3: 1, 0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5}
_SCALAR_SIZES |= {0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9}
_BIN_LENGTH_BYTES = {0xC4: 1, 0xC5: 2, 0xC6: 4}


def _after_scalar(data: bytes, pos: int) -> int | None:
    first = data[pos]
    if first <= 0x7F or first >= 0xE0:  # a fixint
        return pos + 1
    if first in _SCALAR_SIZES:
        return pos + _SCALAR_SIZES[first]
    if first in _BIN_LENGTH_BYTES:
        width = _BIN_LENGTH_BYTES[first]
        return pos + 1 + width + int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
    return None


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


C = TypeVar("C")


async def serve_op(
    table: OpTable[C, Awaitable[Response]],
    ctx: C,
    request: Request,
    *,
    log: logging.Logger,
    service: str,
    sender: str,
) -> Response:
    """A daemon bus service's answer to `request`: its table's handler for the op. A body
    that does not decode is `bad_request`; a handler's unexpected failure is this request's
    `internal_error`, logged, never the router's (whose nursery runs it)."""
    try:
        return await table.run(ctx, request.op, request.body)
    except BodyError as exc:
        return refusal(request, "bad_request", exc.detail)
    except Exception as exc:
        log.exception("%s failed a request of %s", service, sender)
        return refusal(request, "internal_error", repr(exc))
