"""Turn events keep the JSON shape `zeroclaw chat --json` has always printed."""

from __future__ import annotations

import msgspec

from zeroclaw.turns import Delta, ToolCallRecord, ToolUsed, TurnDone, TurnEvent


def test_turn_events_round_trip_with_their_event_tag() -> None:
    events: list[TurnEvent] = [
        Delta("hi"),
        ToolUsed("file_read", {"path": "a"}, False, "path_not_allowed"),
        TurnDone("hi", (ToolCallRecord("file_read", {"path": "a"}, True),)),
    ]
    for event in events:
        raw = msgspec.msgpack.encode(event)
        assert msgspec.msgpack.decode(raw, type=TurnEvent) == event
    assert msgspec.json.decode(msgspec.json.encode(events[2])) == {
        "event": "done",
        "reply": "hi",
        "tool_calls": [
            {"name": "file_read", "args": {"path": "a"}, "ok": True, "error_code": None}
        ],
    }
