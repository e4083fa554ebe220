"""The agent link codec as hostile input, both ways (ADR 0014): the daemon decodes what
an agent sends (Pong, ProbeResult), the agent decodes what the daemon sends."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given, settings

from tests.hostile import hostile_msgpack, nested_msgpack, spliced
from zeroclaw._decode import DECODE_ERROR_CODES, DecodeFailure
from zeroclaw._framing import FrameDecoder
from zeroclaw.agent import (
    MAX_LINK_FRAME,
    Busy,
    Ping,
    Pong,
    ProbeResult,
    decode_link,
    encode_link,
)
from zeroclaw.agent._process import LinkSender

# Every link field is typed; depth can hide only where the decoder skips (unknown fields).
LINK_TEMPLATES = [
    {"type": "pong", "seq": 1, "junk": ...},
    {"type": "probe_result", "seq": 1, "outcome": "delivered", "detail": ..., "rtt_ms": 1.0},
    {"type": "neighbours", "workspaces": ...},
    {"type": "keys", "endpoint": ..., "extra": ...},
    ...,
]
VALID = [encode_link(Pong(3)), encode_link(ProbeResult(1, "delivered", "", 0.5))]


@settings(max_examples=200, deadline=None)
@given(hostile_msgpack(LINK_TEMPLATES, VALID))
def test_link_decoding_only_returns_or_raises_decode_failure(data: bytes) -> None:
    try:
        decode_link(data)
    except DecodeFailure as exc:
        assert exc.code in DECODE_ERROR_CODES


def test_a_deep_skipped_field_is_malformed() -> None:
    with pytest.raises(DecodeFailure) as info:
        decode_link(spliced(LINK_TEMPLATES[0], nested_msgpack(10_000)))
    assert info.value.code == "malformed"
    assert decode_link(encode_link(Ping(7))) == Ping(7)


async def test_a_busy_report_never_waits_for_the_link_and_goes_out_in_order() -> None:
    """ADR 0068: a turn queues its busy count and goes on; a writer sends them after."""
    ours, theirs = trio.testing.lockstep_stream_pair()  # nothing moves unless read
    sender = LinkSender(ours)  # type: ignore[arg-type]
    with trio.testing.assert_no_checkpoints():
        for turns in (1, 0, 1):
            await sender.report_busy(turns)
    decoder = FrameDecoder(MAX_LINK_FRAME)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender.send_busy_reports)
        frames: list[bytes] = []
        while len(frames) < 3:
            frames += decoder.feed(await theirs.receive_some())
        assert [decode_link(f) for f in frames] == [Busy(1), Busy(0), Busy(1)]
        nursery.cancel_scope.cancel()
