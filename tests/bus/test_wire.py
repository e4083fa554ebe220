"""The wire codec: round trips, versions, strictness, salvage."""

from __future__ import annotations

import contextlib

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile import hostile_msgpack, nested_msgpack, spliced
from zeroclaw._ops import encode_body
from zeroclaw.bus import (
    MESSAGE_KINDS,
    Ack,
    Deliver,
    Hello,
    Message,
    PeerNote,
    Refusal,
    Request,
    Send,
    WireError,
    decode_from_agent,
    decode_from_router,
    encode,
)
from zeroclaw.bus._wire import PROTOCOL_VERSION, SalvagedIds, salvage_ids, salvage_message_id

_MESSAGE = {"id": "m1", "to": "beta", "channel": "cli", "sent_at": 0.0}
MSG = Message(
    id="m1",
    to="beta",
    channel="cli.local",
    body=encode_body(PeerNote("hi")),
    sent_at=1.5,
    session="s",
)


def test_round_trips() -> None:
    for frame in (Hello(pid=3), Send(message=MSG), Ack(rids=(1, 2)), Ack(ids=("a",))):
        assert decode_from_agent(encode(frame)) == frame
    for frame in (Deliver(rid=7, message=MSG), Refusal(id="m1", code="not_peers", detail="x")):
        assert decode_from_router(encode(frame)) == frame


@pytest.mark.parametrize("kind", MESSAGE_KINDS)
def test_every_message_kind_in_use_decodes(kind: str) -> None:
    frame = Send(message=msgspec.structs.replace(MSG, kind=kind))  # type: ignore[arg-type]
    assert decode_from_agent(encode(frame)) == frame


def test_a_kind_outside_the_literal_is_malformed() -> None:
    raw = msgspec.msgpack.encode(
        {
            "t": "send",
            "v": PROTOCOL_VERSION,
            "message": {**_MESSAGE, "body": {"text": "hi"}, "kind": "dispatch"},
        }
    )
    with pytest.raises(WireError) as refused:
        decode_from_agent(raw)
    assert refused.value.code == "malformed"
    assert salvage_message_id(raw) == "m1"  # so the router refuses it to its sender by id


def test_from_field_is_named_from_on_the_wire() -> None:
    raw = msgspec.msgpack.decode(encode(Send(message=msgspec.structs.replace(MSG, from_="alpha"))))
    assert raw["message"]["from"] == "alpha"


def test_wrong_version_unknown_tag_and_direction() -> None:
    with pytest.raises(WireError, match="version"):
        decode_from_agent(msgspec.msgpack.encode({"t": "hello", "v": PROTOCOL_VERSION - 1}))
    with pytest.raises(WireError):
        decode_from_agent(msgspec.msgpack.encode({"t": "nope", "v": PROTOCOL_VERSION}))
    with pytest.raises(WireError):
        decode_from_agent(encode(Deliver(rid=1, message=MSG)))  # a router frame from an agent


def test_salvage() -> None:
    assert salvage_message_id(encode(Send(message=MSG))) == "m1"
    assert salvage_message_id(b"\xc1") is None
    assert salvage_message_id(msgspec.msgpack.encode({"message": {"id": 5}})) is None


@given(st.binary(max_size=300))
def test_garbage_only_raises_wire_error(data: bytes) -> None:
    for decode in (decode_from_agent, decode_from_router):
        with contextlib.suppress(WireError):
            decode(data)
    salvage_message_id(data)


AGENT_FRAMES = [
    {"t": "send", "v": PROTOCOL_VERSION, "message": {**_MESSAGE, "body": ...}},
    {
        "t": "request",
        "v": PROTOCOL_VERSION,
        "id": "r1",
        "service": "memory",
        "op": "store",
        "body": ...,
    },
    {"t": "ack", "v": PROTOCOL_VERSION, "rids": ...},
    {"t": "send", "v": PROTOCOL_VERSION, "message": ...},
    ...,
]
ROUTER_FRAMES = [
    {"t": "deliver", "v": PROTOCOL_VERSION, "rid": 1, "message": {**_MESSAGE, "body": {"x": ...}}},
    {"t": "response", "v": PROTOCOL_VERSION, "id": "r1", "body": ...},
    {"t": "refusal", "v": PROTOCOL_VERSION, "id": "m1", "detail": ...},
]


@settings(max_examples=200, deadline=None)
@given(hostile_msgpack(AGENT_FRAMES + ROUTER_FRAMES, [encode(Send(message=MSG))]))
def test_wire_decoders_only_return_or_raise_wire_error(data: bytes) -> None:
    for decode in (decode_from_agent, decode_from_router):
        try:
            decode(data)
        except WireError as exc:
            assert exc.code in ("malformed", "too_large")
    message_id = salvage_message_id(data)
    assert message_id is None or isinstance(message_id, str)


def test_a_deep_body_is_malformed_in_both_directions_and_keeps_its_id() -> None:
    for depth in (65, 10_000):
        deep = nested_msgpack(depth, b"\x81\xa1k")
        for decode, template in (
            (decode_from_agent, AGENT_FRAMES[0]),
            (decode_from_router, ROUTER_FRAMES[0]),
        ):
            frame = spliced(template, deep)
            with pytest.raises(WireError) as info:
                decode(frame)
            assert info.value.code == "malformed"
        # The router can still tell the sender which message it refused.
        assert salvage_message_id(spliced(AGENT_FRAMES[0], nested_msgpack(65))) == "m1"


def test_a_request_too_deep_to_read_keeps_its_id() -> None:
    deep = msgspec.Raw(nested_msgpack(10_000, b"\x81\xa1k"))
    frame = encode(Request(id="r1", service="memory", op="store", body=deep))
    with pytest.raises(WireError):
        decode_from_agent(frame)
    assert salvage_ids(frame) == SalvagedIds(None, "r1")  # answered by it, not left to wait
    assert salvage_ids(spliced(AGENT_FRAMES[0], nested_msgpack(65))) == SalvagedIds("m1", None)
    assert salvage_ids(msgspec.msgpack.encode({"t": "request", "id": 7})) == SalvagedIds(None, None)
