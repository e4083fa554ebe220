"""How an invocation ends, judged from how its runtime's turn ended: the output contract."""

from __future__ import annotations

from typing import Any

import pytest

from zeroclaw.conversations import AgentDown, TurnCancelled, TurnRefused
from zeroclaw.subagents._dispatch import verdict
from zeroclaw.turns import ToolCallRecord, TurnDone

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string", "minLength": 1}, "n": {"type": "integer"}},
    "required": ["summary"],
    "additionalProperties": False,
}


def test_a_submitted_result_that_validates_succeeds_with_it_as_output() -> None:
    judged = verdict(TurnDone("submitted", result={"summary": "ok"}), SCHEMA, None)
    assert (judged.state, judged.output, judged.error_code) == (
        "succeeded",
        {"summary": "ok"},
        None,
    )


def test_free_text_without_a_submitted_result_fails_when_there_is_an_output_schema() -> None:
    judged = verdict(TurnDone('{"summary": "looks like json"}'), SCHEMA, None)
    assert (judged.state, judged.error_code) == ("failed", "subagent_no_result")
    assert judged.reply == '{"summary": "looks like json"}'


@pytest.mark.parametrize(
    ("result", "pointer"),
    [
        ({"summary": ""}, "/summary"),
        ({"summary": "x", "n": "two"}, "/n"),
        ({}, ""),
        ({"summary": "x", "extra": 1}, ""),
    ],
)
def test_a_result_that_fails_the_schema_fails_with_the_error_and_its_pointer(
    result: dict[str, Any], pointer: str
) -> None:
    judged = verdict(TurnDone("", result=result), SCHEMA, None)
    assert (judged.state, judged.error_code) == ("failed", "subagent_output_invalid")
    assert judged.pointer == pointer
    assert judged.detail
    assert judged.output == result  # kept for the operator to see what was wrong


def test_without_an_output_schema_the_reply_is_the_result() -> None:
    judged = verdict(TurnDone("a summary"), None, None)
    assert (judged.state, judged.reply, judged.output) == ("succeeded", "a summary", None)


def test_a_provider_error_fails_the_invocation() -> None:
    judged = verdict(TurnDone("error: x", error="provider offline: boom"), SCHEMA, None)
    assert (judged.state, judged.error_code) == ("failed", "subagent_provider_error")


@pytest.mark.parametrize(
    "last",
    [TurnDone("", cancelled=True), TurnCancelled(), AgentDown(), None],
)
def test_a_turn_stopped_by_the_deadline_timed_out_and_by_the_operator_was_cancelled(
    last: Any,
) -> None:
    assert verdict(last, SCHEMA, "timeout").state == "timed_out"
    assert verdict(last, SCHEMA, "timeout").error_code == "subagent_timed_out"
    assert verdict(last, SCHEMA, "cancel").state == "cancelled"


@pytest.mark.parametrize(
    "last",
    [
        TurnDone("", cancelled=True),
        TurnCancelled(),
        AgentDown(),
        TurnRefused("unavailable", "gone"),
    ],
)
def test_a_turn_that_ended_otherwise_is_a_runtime_failure(last: Any) -> None:
    judged = verdict(last, SCHEMA, None)
    assert (judged.state, judged.error_code) == ("failed", "subagent_runtime_failed")


def test_a_completed_turn_is_judged_on_its_result_even_if_the_deadline_came_just_after() -> None:
    done = TurnDone("", tool_calls=(ToolCallRecord("subagent_submit_result", {}, True),))
    assert verdict(done, None, "timeout").state == "succeeded"
