"""The one decode helper for untrusted bytes (ADR 0014): its depth bound is exact, its
cheap pre-check never lets a deep value through, and it raises nothing but
DecodeFailure."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile import deep_json, deep_msgpack, nested_json, nested_msgpack
from zeroclaw._decode import (
    DECODE_ERROR_CODES,
    MAX_DEPTH,
    DecodeFailure,
    decode_json,
    decode_msgpack,
    too_deep,
)

ANY = msgspec.msgpack.Decoder()


def depth_of(value: Any) -> int:
    """Reference: containers on the longest path (recursive; for small test values)."""
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for kv in value.items() for v in kv), default=0)
    if isinstance(value, (list, tuple)):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


values = st.recursive(
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(values, st.integers(1, 6))
def test_too_deep_agrees_with_the_reference(value: Any, limit: int) -> None:
    assert too_deep(value, limit) == (depth_of(value) > limit)


@settings(max_examples=200, deadline=None)
@given(values, st.integers(1, 6))
def test_decode_refuses_exactly_the_values_deeper_than_the_bound(value: Any, limit: int) -> None:
    for payload, decode in (
        (
            msgspec.msgpack.encode(value),
            lambda p: decode_msgpack(ANY, p, max_bytes=1 << 20, max_depth=limit),
        ),
        (msgspec.json.encode(value), lambda p: decode_json(p, max_bytes=1 << 20, max_depth=limit)),
    ):
        try:
            decode(payload)
            refused = False
        except DecodeFailure as exc:
            assert exc.code == "malformed"
            refused = True
        assert refused == (depth_of(value) > limit)


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1, 900, 10_000, 200_000])
@pytest.mark.parametrize("level", [b"\x91", b"\xdd\x00\x00\x00\x01", b"\x81\xa1k"])
def test_nesting_past_the_bound_is_malformed_at_any_depth(depth: int, level: bytes) -> None:
    payload = nested_msgpack(depth, level)
    if depth <= MAX_DEPTH:
        decode_msgpack(ANY, payload, max_bytes=1 << 20)
        decode_json(nested_json(depth), max_bytes=1 << 20)
        return
    for attempt in (
        lambda: decode_msgpack(ANY, payload, max_bytes=1 << 24),
        lambda: decode_json(nested_json(depth, "map"), max_bytes=1 << 24),
    ):
        with pytest.raises(DecodeFailure) as info:
            attempt()
        assert info.value.code == "malformed"


def test_size_is_checked_before_decoding() -> None:
    with pytest.raises(DecodeFailure) as info:
        decode_msgpack(ANY, b"\xc0" * 11, max_bytes=10)
    assert info.value.code == "too_large"
    with pytest.raises(DecodeFailure) as info:
        decode_json("[" + "1," * 10 + "1]", max_bytes=10)
    assert info.value.code == "too_large"


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.binary(max_size=300), deep_msgpack()))
def test_msgpack_raises_only_decode_failure(data: bytes) -> None:
    try:
        decode_msgpack(ANY, data, max_bytes=1 << 20)
    except DecodeFailure as exc:
        assert exc.code in DECODE_ERROR_CODES


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(max_size=300), deep_json()))
def test_json_raises_only_decode_failure(data: str) -> None:
    try:
        decode_json(data, max_bytes=1 << 20)
    except DecodeFailure as exc:
        assert exc.code in DECODE_ERROR_CODES
