"""A daemon service's operations, each declared once, and how a body crosses the bus typed.

A service's neutral wire module (`memory/_wire.py`, `turns/_wire.py`, ...) declares each
operation as one `Operation`: the service it belongs to, its name (the `op` of a bus
`Request`, the tag of the service's union of requests), its request struct, its answer
struct and the family of error codes a refusal of it carries. The sender builds the
request struct and gets the answer struct back (`AgentBus.call`); the receiver decodes the
body from ONE `OpTable` (op -> request type -> handler), never a string switch.

Bodies travel as `msgspec.Raw` inside the frames (ADR 0048): the router relays them
undecoded, and only the process that receives one decodes it, into the struct its kind or
op names. Light on purpose (msgspec only): an agent process imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from ._decode import DecodeFailure, decode_msgpack

Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)
B = TypeVar("B", bound=msgspec.Struct)
C = TypeVar("C")
R = TypeVar("R")

# A body no bigger than the frame that carried it: the frame's own bound already applied.
MAX_BODY = 64 * 1024 * 1024

_encoder = msgspec.msgpack.Encoder()
_decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {}


class Nothing(msgspec.Struct, frozen=True):
    """The answer of an operation nobody answers (a posted turn event), and the body of a
    message kind that carries nothing (a probe)."""


@dataclass(frozen=True, slots=True)
class Operation(Generic[Req, Ans]):
    """One operation of one service: declared once, in the service's wire module."""

    service: str
    name: str
    request: type[Req]
    answer: type[Ans]
    errors: tuple[str, ...] = ()  # the family's codes (get_args of its Literal)


class BodyError(Exception):
    """A body that is not the struct its op or kind names (`malformed`), or an op the
    service does not have (`unknown_op`)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class CallRefused(Exception):
    """A call the service (a code of its family) or the bus (timeout, unknown_service,
    malformed, ...) refused."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail or code)
        self.code = code
        self.detail = detail


def encode_body(body: msgspec.Struct) -> msgspec.Raw:
    """A struct as the bytes a frame carries for it."""
    return msgspec.Raw(_encoder.encode(body))


def decode_body(raw: msgspec.Raw | bytes, kind: type[B]) -> B:
    """The struct `kind` from a body; BodyError("malformed") saying what is wrong."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.msgpack.Decoder(kind)
    try:
        value: B = decode_msgpack(decoder, bytes(raw), max_bytes=MAX_BODY)
    except DecodeFailure as exc:
        raise BodyError("malformed", f"a {kind.__name__} body: {exc.detail}") from None
    return value


class OpTable(Generic[C, R]):
    """A service's receiving end: op name -> (its operation, its handler). Built once at
    start-up; `require` fails then if an operation of the service has no handler."""

    def __init__(self, service: str) -> None:
        self.service = service
        self._ops: dict[str, tuple[Operation[Any, Any], Callable[[C, Any], R]]] = {}

    def on(self, op: Operation[Req, Any], handler: Callable[[C, Req], R]) -> OpTable[C, R]:
        if op.service != self.service:
            raise ValueError(f"{op.service}.{op.name} is not an operation of {self.service}")
        if op.name in self._ops:
            raise ValueError(f"{self.service}.{op.name} has a handler already")
        self._ops[op.name] = (op, handler)
        return self

    def require(self, ops: Iterable[Operation[Any, Any]]) -> OpTable[C, R]:
        missing = sorted(op.name for op in ops if op.name not in self._ops)
        if missing:
            raise ValueError(f"{self.service}: no handler for {', '.join(missing)}")
        return self

    def operation(self, name: str) -> Operation[Any, Any] | None:
        entry = self._ops.get(name)
        return None if entry is None else entry[0]

    def names(self) -> tuple[str, ...]:
        return tuple(self._ops)

    def run(self, ctx: C, name: str, raw: msgspec.Raw | bytes) -> R:
        """Decode the body of op `name` and call its handler with `ctx`; BodyError as
        `decoded` says."""
        entry = self._ops.get(name)
        if entry is None:
            raise BodyError("unknown_op", f"{self.service} has no operation {name[:64]!r}")
        op, handler = entry
        return handler(ctx, decode_body(raw, op.request))

    def call(self, ctx: C, name: str, request: msgspec.Struct) -> R:
        """Call the handler of op `name` with a request already decoded."""
        entry = self._ops.get(name)
        if entry is None:
            raise BodyError("unknown_op", f"{self.service} has no operation {name[:64]!r}")
        return entry[1](ctx, request)
