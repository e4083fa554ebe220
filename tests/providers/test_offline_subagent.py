"""The offline provider for sub-agents (issue 12): an agent's `dispatch`/`catalog` forms,
and a sub-agent runtime's own grammar, whose default submits a minimal instance of the
output schema filled from the task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from zeroclaw.agent._subagent import user_text
from zeroclaw.providers import (
    GRAMMAR_HELP,
    Conversation,
    OfflineProvider,
    Round,
    Step,
    ToolCall,
    ToolOutcome,
    grammar_help,
    parse,
    reply,
)
from zeroclaw.providers._offline import (
    SKILL_READ,
    SUBMIT_RESULT,
    minimal_instance,
    task_of,
)
from zeroclaw.tools import SKILL_READ as TOOLS_SKILL_READ
from zeroclaw.tools import SKILL_READ_SPEC, submit_spec
from zeroclaw.tools import SUBMIT_RESULT as TOOLS_SUBMIT_RESULT

ETC = Path(__file__).resolve().parents[2] / "etc" / "subagents"
SHIPPED = {
    path.parent.parent.name: json.loads(path.read_text())
    for path in sorted(ETC.glob("*/schemas/output.json"))
}


# --- an agent's forms --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "call"),
    [
        (
            "dispatch summarizer: the report, shortly",
            ToolCall("agent_dispatch", {"agentId": "summarizer", "task": "the report, shortly"}),
        ),
        (
            "Dispatch Content-Analyst:  a\nb ",
            ToolCall("agent_dispatch", {"agentId": "content-analyst", "task": "a\nb"}),
        ),
        ("catalog", ToolCall("agent_catalog", {})),
        (" Catalog ", ToolCall("agent_catalog", {})),
    ],
)
def test_dispatch_and_catalog_become_their_tool_calls(text: str, call: ToolCall) -> None:
    assert parse(text) == call


@pytest.mark.parametrize("text", ["dispatch summarizer", "dispatch : x", "catalog all"])
def test_incomplete_dispatch_forms_are_plain_text(text: str) -> None:
    assert parse(text) is None


def test_help_lists_the_dispatch_forms_only_when_their_tools_are_offered() -> None:
    assert "dispatch" not in GRAMMAR_HELP and "catalog" not in grammar_help(None)
    offered = grammar_help({"agent_dispatch", "agent_catalog"})
    assert offered == "I understand: 'dispatch ID: TEXT', 'catalog', 'history', 'context'."


def test_reply_renders_dispatch_outcomes_and_refusals() -> None:
    call = ToolCall("agent_dispatch", {"agentId": "summarizer", "task": "t"})
    done = ToolOutcome(call, True, '{"summary": "t"}')
    refused = ToolOutcome(call, False, "", "not_allowed_caller", "alpha may not call it")
    catalog = ToolOutcome(ToolCall("agent_catalog", {}), True, "summarizer: Summarise a text.")
    assert reply([done, refused, catalog]).text == (
        '{"summary": "t"}\n'
        "agent_dispatch refused: not_allowed_caller (alpha may not call it)\n"
        "summarizer: Summarise a text."
    )


# --- a sub-agent runtime's grammar ---------------------------------------------------------


def test_the_tool_names_are_the_tools_packages() -> None:
    assert (SUBMIT_RESULT, SKILL_READ) == (TOOLS_SUBMIT_RESULT, TOOLS_SKILL_READ)


def test_the_task_is_read_without_the_runtimes_input_block() -> None:
    user = user_text("say: hello", {"text": "submit: {}"})
    assert "submit: {}" in user and task_of(user) == "say: hello"
    assert task_of(user_text("  plain  ", None)) == "plain"


async def first(task: str, schema: dict[str, Any] | None, data: Any = None) -> Step:
    tools = (SKILL_READ_SPEC, submit_spec(schema))
    conversation = Conversation("sub:x@0", "system", (), user_text(task, data), tools=tools)

    async def ignore(text: str) -> None:
        return None

    return await OfflineProvider().complete(conversation, ignore)


async def test_submit_sends_exactly_the_json_object() -> None:
    step = await first('submit: {"summary": "s", "extra": [1]}', SHIPPED["summarizer"])
    assert step.tool_calls == (ToolCall(SUBMIT_RESULT, {"summary": "s", "extra": [1]}),)


@pytest.mark.parametrize("task", ["submit: [1]", "submit: {nope", "submit: 3"])
async def test_submit_of_something_else_is_text_and_no_call(task: str) -> None:
    step = await first(task, SHIPPED["summarizer"])
    assert step.tool_calls == () and step.text and step.text.startswith("submit:")


async def test_say_is_free_text_and_submits_nothing() -> None:
    step = await first("say: nothing to report", SHIPPED["summarizer"])
    assert (step.text, step.tool_calls) == ("nothing to report", ())


async def test_read_calls_skill_read_then_lists_the_outcome() -> None:
    step = await first("read skills/analysis-method/SKILL.md", None)
    call = ToolCall(SKILL_READ, {"path": "skills/analysis-method/SKILL.md"})
    assert step.tool_calls == (call,)
    refused = ToolOutcome(call, False, "", "subagent_skill_path_not_allowed", "'..'")
    assert reply([refused]).text == "skill_read refused: subagent_skill_path_not_allowed ('..')"
    assert reply([ToolOutcome(call, True, "1. State")]).text == "1. State"


async def test_the_default_submits_a_minimal_instance_filled_from_the_task() -> None:
    step = await first("  the quarterly report  ", SHIPPED["summarizer"], {"text": "ignored"})
    assert step.tool_calls == (ToolCall(SUBMIT_RESULT, {"summary": "the quarterly report"}),)
    wrapped = await first("anything", None)
    assert wrapped.tool_calls == (ToolCall(SUBMIT_RESULT, {"result": {}}),)


async def test_after_a_submit_round_the_answer_is_submitted() -> None:
    tools = (SKILL_READ_SPEC, submit_spec(SHIPPED["summarizer"]))
    conversation = Conversation("sub:x@0", "", (), "t", tools=tools)
    call = ToolCall(SUBMIT_RESULT, {"summary": "t"})
    conversation.rounds.append(Round(Step(tool_calls=(call,)), (ToolOutcome(call, True),)))

    async def ignore(text: str) -> None:
        return None

    step = await OfflineProvider().complete(conversation, ignore)
    assert (step.text, step.tool_calls) == ("submitted", ())


# --- minimal_instance -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "hello world"),
        ({"type": "string", "maxLength": 5}, "hello"),
        ({"type": "string", "minLength": 15}, "hello world...."),
        ({"enum": ["b", "a"]}, "b"),
        ({"const": {"k": 1}}, {"k": 1}),
        ({"type": "integer"}, 0),
        ({"type": "integer", "minimum": 3}, 3),
        ({"type": "integer", "exclusiveMinimum": 3}, 4),
        ({"type": "integer", "maximum": -2}, -2),
        ({"type": "number", "minimum": 0.5}, 0.5),
        ({"type": "boolean"}, False),
        ({"type": "null"}, None),
        ({"type": ["null", "integer"]}, 0),
        ({"type": "array", "items": {"type": "boolean"}}, []),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [0, 0]),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                "required": ["a"],
            },
            {"a": "hello world"},
        ),
        (
            {
                "properties": {"n": {"properties": {"m": {"enum": [7]}}, "required": ["m"]}},
                "required": ["n"],
            },
            {"n": {"m": 7}},
        ),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, 0),
    ],
)
def test_minimal_instance(schema: dict[str, Any], expected: Any) -> None:
    assert minimal_instance(schema, "  hello world ") == expected


def test_both_shipped_output_schemas_are_here() -> None:
    assert sorted(SHIPPED) == ["content-analyst", "summarizer"]


@given(name=st.sampled_from(sorted(SHIPPED)), text=st.text())
def test_a_minimal_instance_of_a_shipped_output_schema_validates(name: str, text: str) -> None:
    schema = SHIPPED[name]
    instance = minimal_instance(schema, text)
    assert list(Draft202012Validator(schema).iter_errors(instance)) == []
