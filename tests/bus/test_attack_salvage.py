"""The id salvage of a frame that could not be read (ADR 0052's `salvage_ids`), attacked: it
reads whatever an agent with real keys sends, in the router's own loop, so it must answer
SalvagedIds for every input (never raise), report an id only where one is, and do a bounded
amount of work whatever a header claims."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile import nested_msgpack, spliced
from zeroclaw.bus._wire import (
    MAX_LEADING_FIELDS,
    PROTOCOL_VERSION,
    Message,
    Request,
    SalvagedIds,
    Send,
    encode,
    salvage_ids,
)

MSG = Message(id="m1", to="beta", channel="cli.local", body=msgspec.Raw(b"\xc0"), sent_at=0.0)
SEND = encode(Send(message=MSG))
REQUEST = encode(Request(id="r1", service="memory", op="store", body=msgspec.Raw(b"\xc0")))

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
keys = st.sampled_from(["t", "v", "id", "message", "", "message.id", "body"]) | st.text(max_size=6)
frames = st.dictionaries(keys, values | st.sampled_from(["send", "request"]), max_size=8)
messages = st.dictionaries(keys, values, max_size=6)


def well_formed(ids: Any) -> bool:
    return isinstance(ids, SalvagedIds) and all(
        value is None or (isinstance(value, str) and len(value) <= 128) for value in ids
    )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_give_salvaged_ids(data: bytes) -> None:
    assert well_formed(salvage_ids(data))


@settings(max_examples=300, deadline=None)
@given(frames, messages)
def test_a_reported_id_is_the_frames_own(frame: dict[str, Any], message: dict[str, Any]) -> None:
    if frame.get("t") == "send":
        frame = {**frame, "message": message}
    ids = salvage_ids(msgspec.msgpack.encode(frame))
    assert well_formed(ids)
    if ids.message is not None:
        assert frame["t"] == "send" and frame["message"]["id"] == ids.message
    if ids.request is not None:
        assert frame["t"] == "request" and frame["id"] == ids.request


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([SEND, REQUEST]), st.data())
def test_a_cut_or_mutated_frame_never_misreports_its_id(frame: bytes, data: st.DataObject) -> None:
    cut = frame[: data.draw(st.integers(0, len(frame)))]
    assert salvage_ids(cut) in (salvage_ids(frame), SalvagedIds(None, None))
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    assert well_formed(salvage_ids(bytes(mutated)))


def test_maps_under_empty_keys_nested_past_the_interpreters_limit_give_no_id() -> None:
    # The hole: the inner map was read with `descend=""`, so every map under the key "" was
    # descended into again, and 3000 of them (6 kB) raised RecursionError in the router's
    # loop (salvage runs on every frame that fails to decode, a too-large one included).
    deep = b"\x81\xa0" * 3000 + b"\xc0"
    frame = b"\x82\xa1t\xa4send\xa7message" + deep
    assert salvage_ids(frame) == SalvagedIds(None, None)


def test_a_key_that_looks_like_a_path_is_not_the_messages_id() -> None:
    # A flat key "message.id" was reported as the message's id (fields were prefixed).
    frame = msgspec.msgpack.encode({"t": "send", "message.id": "not-an-id", "message": 5})
    assert salvage_ids(frame) == SalvagedIds(None, None)
    nested = msgspec.msgpack.encode({"t": "send", "message": {"": {"id": "deeper"}}})
    assert salvage_ids(nested) == SalvagedIds(None, None)


def test_headers_that_claim_more_than_the_frame_holds_give_no_id() -> None:
    str32_past_end = b"\x82\xa1t\xa4send\xa7message\x81\xa2id\xdb\xff\xff\xff\xff" + b"m1"
    map32_claims_all = b"\xdf\xff\xff\xff\xff\xa1t\xa7request\xa2id\xa2r1"
    bin32_past_end = b"\x83\xa1t\xa7request\xa1x\xc6\xff\xff\xff\xff\xa2id\xa2r1"
    truncated_header = b"\xdf\xff\xff"
    assert salvage_ids(str32_past_end) == SalvagedIds(None, None)
    assert salvage_ids(map32_claims_all) == SalvagedIds(None, None)
    assert salvage_ids(bin32_past_end) == SalvagedIds(None, None)
    assert salvage_ids(truncated_header) == SalvagedIds(None, None)


def test_only_the_leading_fields_are_scanned_whatever_the_map_claims() -> None:
    # Each field is a step of a Python loop in the router's: a 4 MiB frame of tiny fields
    # before the id held the loop for a second, where msgspec's C skip had taken ~1 ms. The
    # ids come first in every frame the bus writes, so the scan stops after a few fields.
    filler = b"\xa0\x00" * (4 * 1024 * 1024 // 2)
    count = 2 + len(filler) // 2
    frame = b"\xdf" + count.to_bytes(4, "big") + b"\xa1t\xa7request" + filler + b"\xa2id\xa2r1"
    assert salvage_ids(frame) == SalvagedIds(None, None)
    leading = {"t": "request", "v": PROTOCOL_VERSION, "id": "r1"}
    padded = {**leading, **{f"k{i}": i for i in range(MAX_LEADING_FIELDS)}, "body": ...}
    assert salvage_ids(spliced(padded, nested_msgpack(10_000))) == SalvagedIds(None, "r1")
