"""How a finished turn prints: `zeroclaw chat --json` keeps the shape it has always had."""

from __future__ import annotations

from zeroclaw.conversations import result_json
from zeroclaw.turns import ToolCallRecord, TurnDone


def test_a_finished_turn_prints_as_chat_json_always_has() -> None:
    call = ToolCallRecord("file_read", {"path": "a"}, True)
    assert result_json(TurnDone("hi")) == {"reply": "hi", "tool_calls": []}
    assert result_json(TurnDone("error: x", (call,), error="x")) == {
        "reply": "error: x",
        "tool_calls": [
            {"name": "file_read", "args": {"path": "a"}, "ok": True, "error_code": None}
        ],
        "error": "x",
    }
    assert result_json(TurnDone("", cancelled=True)) == {
        "reply": "",
        "tool_calls": [],
        "cancelled": True,
    }
