"""Bus bodies for tests: what an agent that skips the typed structs would put on the wire
(a forged or hand-built body), and a body read back as plain values."""

from __future__ import annotations

from typing import Any

import msgspec


def raw(value: object) -> msgspec.Raw:
    """`value` encoded as a frame carries a body (any shape: the receiver judges it)."""
    return msgspec.Raw(msgspec.msgpack.encode(value))


def plain(body: msgspec.Raw) -> Any:
    """A body as plain values (dicts, lists, strings)."""
    return msgspec.msgpack.decode(body)


async def handled(service: Any, scope: Any, op: str, body: object) -> Any:
    """A memory request as an agent's would arrive (`body` encoded whatever its shape), and
    the service's typed answer as plain values."""
    return msgspec.to_builtins(await service.handle(scope, op, raw(body)))


def write_args(kind: str, fields: dict[str, Any]) -> Any:
    """A memory write's struct from its fields, as the service decodes an agent's."""
    from zeroclaw.turns import MEMORY_OPERATIONS

    return msgspec.convert(fields, MEMORY_OPERATIONS[kind].request)
