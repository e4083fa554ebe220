"""What crosses the pipe between the daemon and a schema-validation worker (ADR 0046,
zeroclaw._schema_worker).

Light on purpose (msgspec only): the worker imports it before anything else. A schema and an
instance are JSON values whatever they hold, so they travel as their JSON text, never as
`dict[str, Any]`; the answer is a tagged union.
"""

from __future__ import annotations

import msgspec


class Check(msgspec.Struct, frozen=True, tag="check"):
    """Validate `instance` (JSON text) against `schema` (JSON text)."""

    schema: bytes
    instance: bytes


class Valid(msgspec.Struct, frozen=True, tag="valid"):
    pass


class Invalid(msgspec.Struct, frozen=True, tag="invalid"):
    """The instance fails the schema: jsonschema's best match, and where it points."""

    message: str
    pointer: str


class Unusable(msgspec.Struct, frozen=True, tag="unusable"):
    """The schema cannot be applied (RecursionError, an unresolvable $ref): its fault."""

    detail: str


class OutOfBound(msgspec.Struct, frozen=True, tag="out_of_bound"):
    """Never sent by a worker: the daemon's answer when the bound passed and the worker
    was killed (or no worker could be had in time)."""

    detail: str


Outcome = Valid | Invalid | Unusable | OutOfBound
# Every way a check ends, by tag (the conformance table has cells for each).
VALIDATION_OUTCOMES: tuple[str, ...] = tuple(
    str(t.__struct_config__.tag) for t in (Valid, Invalid, Unusable, OutOfBound)
)
WorkerAnswer = Valid | Invalid | Unusable
MAX_WORKER_FRAME = 64 << 20  # a check carries at most a frame's input and a schema

encode = msgspec.msgpack.Encoder().encode
check_decoder = msgspec.msgpack.Decoder(Check)
answer_decoder = msgspec.msgpack.Decoder(WorkerAnswer)
