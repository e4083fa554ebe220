"""The wire codec: round trips, versions, strictness, salvage."""

from __future__ import annotations

import contextlib

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.bus import (
    Ack,
    Deliver,
    Hello,
    Message,
    Refusal,
    Send,
    WireError,
    decode_from_agent,
    decode_from_router,
    encode,
)
from zeroclaw.bus._wire import salvage_message_id

MSG = Message(
    id="m1", to="beta", channel="cli.local", body={"text": "hi"}, sent_at=1.5, session="s"
)


def test_round_trips() -> None:
    for frame in (Hello(pid=3), Send(message=MSG), Ack(rids=(1, 2)), Ack(ids=("a",))):
        assert decode_from_agent(encode(frame)) == frame
    for frame in (Deliver(rid=7, message=MSG), Refusal(id="m1", code="not_peers", detail="x")):
        assert decode_from_router(encode(frame)) == frame


def test_from_field_is_named_from_on_the_wire() -> None:
    raw = msgspec.msgpack.decode(encode(Send(message=msgspec.structs.replace(MSG, from_="alpha"))))
    assert raw["message"]["from"] == "alpha"


def test_wrong_version_unknown_tag_and_direction() -> None:
    with pytest.raises(WireError, match="version"):
        decode_from_agent(msgspec.msgpack.encode({"t": "hello", "v": 2}))
    with pytest.raises(WireError):
        decode_from_agent(msgspec.msgpack.encode({"t": "nope", "v": 1}))
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
