"""Length-prefixed framing and the control message codec."""

from __future__ import annotations

import contextlib

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.control import (
    AgentStart,
    FrameDecoder,
    FrameTooLarge,
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
    with pytest.raises(msgspec.ValidationError):
        decode_request(msgspec.msgpack.encode({"cmd": "agents.start"}))
    with pytest.raises(msgspec.ValidationError):
        decode_request(msgspec.msgpack.encode({"cmd": "status", "extra": 1}))
    with pytest.raises(msgspec.DecodeError):
        decode_request(b"\xc1")


def test_reply_round_trip() -> None:
    reply = Reply(ok=False, error="unknown_agent", message="no", more=True)
    assert decode_reply(encode(reply)) == reply


@given(st.binary(max_size=200))
def test_decoding_garbage_only_raises_msgspec_errors(data: bytes) -> None:
    with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
        decode_request(data)
