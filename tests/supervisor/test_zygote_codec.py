"""The zygote socket's codec as hostile input, both ways (ADR 0014): the daemon decodes
the zygote's replies, the zygote decodes the daemon's spawn and preload requests."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.hostile import hostile_msgpack, nested_msgpack, spliced
from zeroclaw._decode import DECODE_ERROR_CODES, DecodeFailure
from zeroclaw.supervisor._zygote import (
    Exited,
    Preload,
    Spawned,
    decode_reply,
    decode_request,
    encode,
)

TEMPLATES = [
    {"type": "spawned", "id": 1, "pid": 2, "junk": ...},
    {"type": "exited", "pid": 2, "status": ...},
    {"type": "spawn", "id": 1, "spec": ..., "env": {}},
    {"type": "spawn", "id": 1, "spec": {"alias": "a"}, "env": ...},
    {"type": "preload", "kinds": ...},
    ...,
]
VALID = [encode(Spawned(1, 2)), encode(Exited(2, 0)), encode(Preload(["openai"]))]


@settings(max_examples=200, deadline=None)
@given(hostile_msgpack(TEMPLATES, VALID))
def test_zygote_decoders_only_return_or_raise_decode_failure(data: bytes) -> None:
    for decode in (decode_reply, decode_request):
        try:
            decode(data)
        except DecodeFailure as exc:
            assert exc.code in DECODE_ERROR_CODES


def test_a_deep_reply_is_malformed() -> None:
    with pytest.raises(DecodeFailure) as info:
        decode_reply(spliced(TEMPLATES[0], nested_msgpack(10_000)))
    assert info.value.code == "malformed"
    assert decode_reply(VALID[0]) == Spawned(1, 2)
