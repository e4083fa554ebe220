"""Turn events keep the JSON shape `zeroclaw chat --json` has always printed."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from zeroclaw.turns import Delta, ToolCallRecord, ToolUsed, TurnDone, TurnEvent, TurnEventPost


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


def test_an_agent_cannot_post_an_approval_as_a_plain_event() -> None:
    body = msgspec.to_builtins(TurnEventPost("t1", Delta("x")))
    assert msgspec.convert(body, TurnEventPost) == TurnEventPost("t1", Delta("x"))
    body["event"] = {"event": "approval", "what": "rm -rf /", "rid": "r"}
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(body, TurnEventPost)


def test_an_agent_process_loads_the_turn_bodies_but_never_the_service() -> None:
    code = (
        "import sys, zeroclaw.agent._process; "
        "print(sorted(m for m in sys.modules if m.startswith(('zeroclaw.turns', "
        "'zeroclaw.conversations'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "zeroclaw.turns._wire" in out.stdout and "conversations" not in out.stdout
