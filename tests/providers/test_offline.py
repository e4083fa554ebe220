"""The offline provider's grammar: every form, and everything else as plain text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.providers import (
    GRAMMAR_HELP,
    ToolCall,
    ToolOutcome,
    first_step,
    memory_key,
    parse,
    reply,
)


@pytest.mark.parametrize(
    ("text", "call"),
    [
        (
            "remember: the launch code is fish",
            ToolCall(
                "memory_store",
                {
                    "key": memory_key("the launch code is fish"),
                    "content": "the launch code is fish",
                },
            ),
        ),
        ("Recall launch code", ToolCall("memory_recall", {"query": "launch code"})),
        (
            "forget launch-code-is-fish-abc123",
            ToolCall("memory_forget", {"key": "launch-code-is-fish-abc123"}),
        ),
        (
            "ask beta: what is the plan?",
            ToolCall("send_message_to_peer", {"to": "beta", "text": "what is the plan?"}),
        ),
        ("ask @Beta: hi", ToolCall("send_message_to_peer", {"to": "beta", "text": "hi"})),
        (
            "delegate beta: summarise notes",
            ToolCall("delegate", {"to": "beta", "text": "summarise notes"}),
        ),
        ("read notes.txt", ToolCall("file_read", {"path": "notes.txt"})),
        (
            "write out/a.txt: hello world",
            ToolCall("file_write", {"path": "out/a.txt", "content": "hello world"}),
        ),
        ("write empty.txt:", ToolCall("file_write", {"path": "empty.txt", "content": ""})),
        ("list", ToolCall("file_list", {"path": "."})),
        ("list sub", ToolCall("file_list", {"path": "sub"})),
        ("run ls -la", ToolCall("shell", {"command": "ls -la"})),
        (
            "skill release-notes",
            ToolCall("skill_read", {"skill": "release-notes", "path": "SKILL.md"}),
        ),
        ("Skill Notes docs/a.md", ToolCall("skill_read", {"skill": "notes", "path": "docs/a.md"})),
        ("skill notes ../x", ToolCall("skill_read", {"skill": "notes", "path": "../x"})),
    ],
)
def test_grammar(text: str, call: ToolCall) -> None:
    assert parse(text) == call
    assert first_step(text, "alpha").tool_calls == (call,)


@pytest.mark.parametrize(
    "text",
    ["hello there", "what is 2+2", "read", "ask beta", "remember", "run", "", "skill", "skills"],
)
def test_plain_answers(text: str) -> None:
    step = first_step(text, "alpha", "I am Alpha, the ops assistant.")
    assert step.tool_calls == () and step.text


def test_rule_answers() -> None:
    assert first_step("help", "alpha").text == GRAMMAR_HELP
    assert first_step("who are you?", "alpha", "I am Alpha.\nMore.").text == "I am Alpha."
    assert first_step("hi", "beta").text.startswith("Hello, I am beta.")  # type: ignore[union-attr]


def test_memory_keys_are_stable_and_distinct() -> None:
    assert memory_key("The Launch code") == memory_key("The Launch code")
    assert memory_key("a b") != memory_key("a  b!")


def test_reply_reports_refusals_with_their_code() -> None:
    call = ToolCall("send_message_to_peer", {"to": "gamma", "text": "hi"})
    step = reply([ToolOutcome(call, False, error_code="not_peers", detail="no shared group")])
    assert step.text == "send_message_to_peer refused: not_peers (no shared group)"
    ok = ToolOutcome(ToolCall("send_message_to_peer", {"to": "beta", "text": "x"}), True, "on it")
    assert reply([ok]).text == "beta says: on it"


@given(st.text(max_size=300))
def test_any_text_gets_a_step(text: str) -> None:
    step = first_step(text, "alpha")
    assert bool(step.tool_calls) != bool(step.text)


def test_mcp_server_tool_json_calls_that_mcp_tool_with_the_object() -> None:
    from zeroclaw.providers._offline import parse

    call = parse('mcp time get_current_time {"timezone": "UTC"}')
    assert call is not None
    assert (call.name, call.args) == ("mcp__time__get_current_time", {"timezone": "UTC"})
    bare = parse("mcp git git_status")
    assert bare is not None and (bare.name, bare.args) == ("mcp__git__git_status", {})
    assert parse("mcp time get_current_time {not json") is None  # plain conversation then
    assert parse('mcp time get_current_time ["a list"]') is None


def test_help_names_the_skill_form_only_when_skill_read_is_offered() -> None:
    from zeroclaw.providers import grammar_help

    assert "skill NAME [PATH]" not in GRAMMAR_HELP
    assert "'skill NAME [PATH]'" in grammar_help({"file_read", "skill_read"})


def test_who_are_you_is_answered_from_the_identity_files_not_the_skills_listing() -> None:
    listing = "# Skills\nSkills you can use.\n<skills>\n</skills>"
    assert first_step("who are you?", "alpha", listing).text == "I am alpha."
    prompt = "# IDENTITY.md\nI keep the lights on.\n\n" + listing
    assert first_step("who are you?", "alpha", prompt).text == "I keep the lights on."
@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("invoke api: hello", {"adapter": "api", "input": "hello"}),
        (
            "invoke Tickets for ticket.create: open one",
            {"adapter": "tickets", "input": "open one", "capability": "ticket.create"},
        ),
        # no adapter: the daemon routes it (a business alias, or an auto-routed capability)
        (
            'invoke for remote.echo: {"text": "hi"}',
            {"adapter": "", "capability": "remote.echo", "input": '{"text": "hi"}'},
        ),
        ("invoke for: x", {"adapter": "for", "input": "x"}),  # an adapter called `for`
    ],
)
def test_invoke_names_an_adapter_or_routes_a_capability(text: str, args: dict[str, str]) -> None:
    assert parse(text) == ToolCall("invoke_adapter", args)
