"""Every struct that crosses the bus is typed: no field of a frame, of a message kind's body
or of any service operation's request or answer is `Any` (a `dict[str, Any]` included),
except the few named below, each a JSON document by nature (ADR 0048)."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import msgspec.inspect as mi

from zeroclaw._ops import Operation
from zeroclaw.bus import MESSAGE_BODIES
from zeroclaw.bus._wire import AgentFrame, RouterFrame
from zeroclaw.turns import (
    ADAPTER_OPERATIONS,
    MEMORY_OPERATIONS,
    MEMORY_OPS,
    SUBAGENT_OPERATIONS,
    TURN_OPERATIONS,
    TurnCancel,
    TurnInput,
)

# struct.field -> why it holds any JSON value
JSON_DOCUMENTS = {
    "CatalogEntry.input_schema": "a sub-agent's JSON Schema document",
    "CatalogEntry.output_schema": "a sub-agent's JSON Schema document",
    "DispatchCall.input": "a sub-agent's input, validated against its JSON Schema",
    "DispatchAnswer.output": "a sub-agent's result, validated against its JSON Schema",
    "TurnInput.input": "a sub-agent invocation's input (JSON), validated by the daemon",
    "TurnDone.result": "a sub-agent's submitted result (JSON), validated by the daemon",
    "ToolCallRecord.args": "a tool call's arguments, as the model sent them (a JSON object)",
    "ToolUsed.args": "a tool call's arguments, as the model sent them (a JSON object)",
}

OPERATIONS: list[Operation[msgspec.Struct, msgspec.Struct]] = [
    *MEMORY_OPERATIONS.values(),
    *TURN_OPERATIONS,
    *SUBAGENT_OPERATIONS,
    *ADAPTER_OPERATIONS,
]


def roots() -> list[object]:
    types: list[object] = [AgentFrame, RouterFrame, TurnInput, TurnCancel]
    types += MESSAGE_BODIES.values()
    for op in OPERATIONS:
        types += [op.request, op.answer]
    return types


def untyped_fields() -> Iterator[str]:
    """`Struct.field` for every field (reachable from the roots) that holds Any (or
    `object`, which msgspec decodes as any value)."""
    seen: set[type] = set()
    pending: list[tuple[mi.Type, str]] = [(t, "") for t in mi.multi_type_info(roots())]
    while pending:
        info, where = pending.pop()
        # `object` is what the package types a JSON value as: to msgspec it is Any.
        if isinstance(info, mi.AnyType) or (isinstance(info, mi.CustomType) and info.cls is object):
            yield where
        elif isinstance(info, mi.StructType):
            if info.cls in seen:
                continue
            seen.add(info.cls)
            for field in info.fields:
                pending.append((field.type, f"{info.cls.__name__}.{field.name}"))
        elif isinstance(info, mi.UnionType):
            pending += [(t, where) for t in info.types]
        elif isinstance(info, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
            pending.append((info.item_type, where))
        elif isinstance(info, mi.TupleType):
            pending += [(t, where) for t in info.item_types]
        elif isinstance(info, mi.DictType):
            pending += [(info.key_type, where), (info.value_type, where)]
        elif isinstance(info, mi.Metadata):
            pending.append((info.type, where))


def test_no_field_that_crosses_the_bus_is_any() -> None:
    found = set(untyped_fields())
    assert found - set(JSON_DOCUMENTS) == set(), "untyped fields on the bus"
    assert set(JSON_DOCUMENTS) - found == set(), "typed now: drop from JSON_DOCUMENTS"


def test_every_body_is_carried_raw_by_the_frames() -> None:
    """The frames carry bodies undecoded (the router relays them as they came)."""
    from zeroclaw.bus import Message, Request, Response

    for struct, name in ((Message, "body"), (Request, "body"), (Response, "body")):
        info = mi.type_info(struct)
        assert isinstance(info, mi.StructType)
        [field] = [f for f in info.fields if f.name == name]
        assert isinstance(field.type, mi.RawType), struct


def test_every_operation_is_declared_once() -> None:
    names = [(op.service, op.name) for op in OPERATIONS]
    assert len(names) == len(set(names))
    assert tuple(MEMORY_OPERATIONS) == MEMORY_OPS  # the Literal and the table agree
