"""Decoding bytes that came from outside the process: one way in, one typed failure.

Every decoder of untrusted bytes (control socket, bus, agent link, zygote socket, provider
HTTP bodies) goes through `decode_msgpack` or `decode_json`. Whatever the bytes hold, the
caller gets a value or `DecodeFailure` with a stable code, never another exception:

- the size is checked before decoding;
- msgspec's own recursion guard turns very deep input (thousands of levels: a few KB)
  into RecursionError, caught here, so decoding itself is bounded by the interpreter's
  recursion limit;
- what decoded is then walked, without recursion, and refused if it nests deeper than
  `max_depth`, so no value deeper than that ever reaches code that recurses over it
  (re-encoding, logging, the memory store) at a deeper point of the stack (ADR 0014).
"""

from __future__ import annotations

from typing import Literal, TypeVar, get_args

import msgspec

DecodeErrorCode = Literal["malformed", "too_large"]
DECODE_ERROR_CODES: tuple[str, ...] = get_args(DecodeErrorCode)

MAX_DEPTH = 64  # containers within containers, the frame's own structs included

T = TypeVar("T")

_CONTAINERS = (dict, list, tuple, msgspec.Struct)
_json_any: msgspec.json.Decoder[object] = msgspec.json.Decoder()


class DecodeFailure(ValueError):
    """Bytes that are not a valid value of the expected type, or too big or deep to take."""

    def __init__(self, code: DecodeErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code: DecodeErrorCode = code
        self.detail = detail


def decode_msgpack(
    decoder: msgspec.msgpack.Decoder[T],
    payload: bytes,
    *,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
) -> T:
    """`decoder.decode(payload)`, bounded; raises only DecodeFailure."""
    _check_size(payload, max_bytes)
    try:
        value = decoder.decode(payload)
    except Exception as exc:  # every way a decode can fail, RecursionError included
        raise _failure(exc) from None
    # One less than the bound: a struct field's default (an empty container) is a level
    # that has no header byte in the payload.
    if could_nest_deeper(payload, max_depth - 1, MSGPACK_HEADERS):
        _check_depth(value, max_depth)
    return value


def decode_json(
    payload: bytes | str,
    *,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
) -> object:
    """A JSON document as plain Python values, bounded; raises only DecodeFailure. What it
    is (an object, a list, ...) is the caller's to check."""
    _check_size(payload, max_bytes)
    try:
        value = _json_any.decode(payload)
    except Exception as exc:  # every way a decode can fail, RecursionError included
        raise _failure(exc) from None
    # Every JSON container opens with "[" or "{": few of them, no deep nesting possible.
    opened = (
        payload.count("[") + payload.count("{")
        if isinstance(payload, str)
        else (payload.count(b"[") + payload.count(b"{"))
    )
    if opened > max_depth:
        _check_depth(value, max_depth)
    return value


def too_deep(value: object, max_depth: int = MAX_DEPTH) -> bool:
    """Whether `value` has containers nested more than `max_depth` deep. Iterative, level
    by level, and it stops at the first level past the limit."""
    level: list[object] = [value]
    depth = 0
    while level:
        children: list[object] = []
        for node in level:
            if isinstance(node, dict):
                children += [k for k in node if isinstance(k, _CONTAINERS)]
                children += [v for v in node.values() if isinstance(v, _CONTAINERS)]
            elif isinstance(node, (list, tuple)):
                children += [v for v in node if isinstance(v, _CONTAINERS)]
            elif isinstance(node, msgspec.Struct):
                for name in node.__struct_fields__:
                    child = getattr(node, name)
                    if isinstance(child, _CONTAINERS):
                        children.append(child)
            else:
                continue
        depth += 1
        if children and depth >= max_depth:
            return True
        level = children
    return False


def could_nest_deeper(payload: bytes, max_depth: int, header_bytes: bytes) -> bool:
    """A cheap upper bound: every container needs one header byte, so a payload with at
    most `max_depth` bytes that could be one cannot nest deeper. Bytes inside strings
    count too, which only makes the bound looser; `bytes.translate` runs at C speed."""
    return len(payload) - len(payload.translate(None, header_bytes)) > max_depth


# msgpack container headers: fixmap 0x80-0x8f, fixarray 0x90-0x9f, array/map 16/32
# 0xdc-0xdf. A struct is a map (or an array with array_like).
MSGPACK_HEADERS = bytes([*range(0x80, 0xA0), *range(0xDC, 0xE0)])


def _check_size(payload: bytes | str, max_bytes: int) -> None:
    if len(payload) > max_bytes:
        raise DecodeFailure("too_large", f"{len(payload)} bytes exceeds the {max_bytes}-byte limit")


def _check_depth(value: object, max_depth: int) -> None:
    if too_deep(value, max_depth):
        raise DecodeFailure("malformed", f"nested deeper than {max_depth} levels")


def _failure(exc: Exception) -> DecodeFailure:
    if isinstance(exc, RecursionError):
        return DecodeFailure("malformed", "nested too deeply to decode")
    if isinstance(exc, MemoryError):
        return DecodeFailure("too_large", "too large to decode in memory")
    return DecodeFailure("malformed", str(exc)[:200] or type(exc).__name__)
