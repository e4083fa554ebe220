"""Hypothesis strategies for hostile bytes: random, mutated, and nested very deeply.

Deep values are built as raw msgpack/JSON bytes (a few bytes per level), so 10,000
levels cost ~10-50 KB and nothing in the test itself recurses. `msgspec.Raw` splices
them into otherwise valid frames, where a decoder typed for the frame meets them in an
`Any` field.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import strategies as st

from zeroclaw._decode import MAX_DEPTH

DEPTHS = st.one_of(
    st.integers(1, MAX_DEPTH + 2),
    st.integers(MAX_DEPTH + 1, 2_000),
    st.sampled_from([10_000, 50_000]),
)

# One level of nesting, as bytes: fixarray, array16, array32, fixmap/map16 with a key.
_MSGPACK_LEVELS = (
    b"\x91",
    b"\xdc\x00\x01",
    b"\xdd\x00\x00\x00\x01",
    b"\x81\xa1k",
    b"\xde\x00\x01\xa1k",
)


def nested_msgpack(depth: int, level: bytes = b"\x91", leaf: bytes = b"\xc0") -> bytes:
    """`depth` containers, each holding the next, around `leaf` (nil)."""
    return level * depth + leaf


def nested_json(depth: int, kind: str = "list") -> str:
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


@st.composite
def deep_msgpack(draw: st.DrawFn) -> bytes:
    level = draw(st.sampled_from(_MSGPACK_LEVELS))
    return nested_msgpack(draw(DEPTHS), level)


@st.composite
def deep_json(draw: st.DrawFn) -> str:
    return nested_json(draw(DEPTHS), draw(st.sampled_from(["list", "map"])))


def spliced(template: Any, deep: bytes) -> bytes:
    """`template` encoded, with every `...` (Ellipsis) in it replaced by `deep`'s bytes."""

    def swap(node: Any) -> Any:
        if node is Ellipsis:
            return msgspec.Raw(deep)
        if isinstance(node, dict):
            return {k: swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    return msgspec.msgpack.encode(swap(template))


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    raw = bytearray(valid)
    for _ in range(draw(st.integers(1, 5))):
        if not raw:
            break
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    return bytes(raw[: draw(st.integers(0, len(raw)))])


def hostile_msgpack(templates: list[Any], valid: list[bytes]) -> st.SearchStrategy[bytes]:
    """Random bytes, mutated valid frames, bare deep values, and deep values inside frame
    templates (each `...` in a template is where the deep value goes)."""
    return st.one_of(
        st.binary(max_size=500),
        st.sampled_from(valid).flatmap(lambda v: mutated(v)),
        deep_msgpack(),
        st.tuples(st.sampled_from(templates), deep_msgpack()).map(lambda t: spliced(*t)),
    )


def hostile_json(templates: list[str]) -> st.SearchStrategy[str]:
    """Random text, bare deep documents, deep documents inside templates (`@` marks the
    spot), and deep documents cut short."""
    return st.one_of(
        st.text(max_size=300),
        deep_json(),
        st.tuples(st.sampled_from(templates), deep_json()).map(lambda t: t[0].replace("@", t[1])),
        deep_json().flatmap(lambda d: st.integers(0, len(d)).map(lambda n: d[:n])),
    )
