"""Length-prefixed framing and the control message codec."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile import hostile_msgpack, nested_msgpack, spliced
from zeroclaw._decode import DECODE_ERROR_CODES
from zeroclaw.control import (
    AgentStart,
    DecodeFailure,
    FrameDecoder,
    FrameTooLarge,
    MemoryCommand,
    Reply,
    Status,
    decode_reply,
    decode_request,
    encode,
    encode_frame,
)


@given(st.lists(st.binary(max_size=300), max_size=20), st.integers(1, 50))
def test_frames_survive_any_chunking(payloads: list[bytes], chunk: int) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = FrameDecoder(1024)
    out: list[bytes] = []
    for i in range(0, len(stream), chunk):
        out.extend(decoder.feed(stream[i : i + chunk]))
    assert out == payloads
    assert decoder.pending == 0


def test_oversized_length_is_refused_before_buffering() -> None:
    decoder = FrameDecoder(100)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(b"\x00\x00\x00\x65")  # 101, no payload sent yet
    assert info.value.size == 101


def test_truncated_frame_is_pending() -> None:
    decoder = FrameDecoder(100)
    assert decoder.feed(encode_frame(b"hello")[:-1]) == []
    assert decoder.pending == 8


def test_request_round_trip_and_strictness() -> None:
    assert decode_request(encode(AgentStart("alpha"))) == AgentStart("alpha")
    assert decode_request(encode(Status())) == Status()
    for bad in (
        msgspec.msgpack.encode({"cmd": "agents.start"}),
        msgspec.msgpack.encode({"cmd": "status", "extra": 1}),
        b"\xc1",
    ):
        with pytest.raises(DecodeFailure) as info:
            decode_request(bad)
        assert info.value.code == "malformed"


def test_reply_round_trip() -> None:
    reply = Reply(ok=False, error="unknown_agent", message="no", more=True)
    assert decode_reply(encode(reply)) == reply


REQUESTS = [
    {"cmd": "memory", "op": "list", "agent": "alpha", "args": {"limit": ...}},
    {"cmd": "memory", "op": "list", "agent": "alpha", "args": ...},
    {"cmd": "chat", "agent": "alpha", "text": ...},
    {"cmd": "status", "extra": ...},
    ...,
]
REPLIES = [{"ok": True, "data": {"records": ...}}, {"ok": False, "error": ...}, ...]


@settings(max_examples=200, deadline=None)
@given(hostile_msgpack(REQUESTS + REPLIES, [encode(AgentStart("alpha")), encode(Reply(ok=True))]))
def test_control_decoders_only_return_or_raise_decode_failure(data: bytes) -> None:
    for decode in (decode_request, decode_reply):
        try:
            decode(data)
        except DecodeFailure as exc:
            assert exc.code in DECODE_ERROR_CODES


def test_a_deeply_nested_request_is_malformed_not_a_recursion_error() -> None:
    for depth in (100, 10_000):
        frame = spliced(REQUESTS[0], nested_msgpack(depth))
        with pytest.raises(DecodeFailure) as info:
            decode_request(frame)
        assert info.value.code == "malformed"
    shallow = decode_request(spliced(REQUESTS[0], nested_msgpack(10)))
    assert isinstance(shallow, MemoryCommand)
