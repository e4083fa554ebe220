"""What a turn was given from memory, as every provider renders it (ADR 0059): data blocks
no content can close, a summary answer read the same way from any model, the offline
summary by its documented rule."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.providers import (
    CONTEXT_PREAMBLE,
    Conversation,
    HistoryTurn,
    Recalled,
    Recap,
    parse_summary,
    render_context,
)
from zeroclaw.providers._anthropic import AnthropicProvider
from zeroclaw.providers._offline import offline_summary
from zeroclaw.providers._openai import openai_messages

TAG = re.compile(r"</?(?:memories|memory|session-summary)\b")
ATTRIBUTES = re.compile(r'<(?:memory|session-summary)(?: [a-z]+="[^"\n<>]*")+>')


def memory(content: str, key: str = "k", agent: str = "alpha") -> Recalled:
    return Recalled(agent, key, content, "core", 1_780_000_000.0)


@given(st.lists(st.tuples(st.text(), st.text(min_size=1)), max_size=4), st.text())
def test_no_content_key_or_summary_adds_markup_to_the_blocks(
    records: list[tuple[str, str]], summary: str
) -> None:
    memories = [memory(content, key) for content, key in records]
    recap = Recap(summary, 0, 9, 10, 1_780_000_000.0) if summary else None
    rendered = render_context(memories, recap)
    tags = TAG.findall(rendered)
    wanted = (["<session-summary", "</session-summary"] if recap else []) + (
        ["<memories"] + ["<memory", "</memory"] * len(memories) + ["</memories"] if memories else []
    )
    assert tags == wanted
    for char in "\x00\x1b\x07\x7f\x9b\ufe64\uff1c":
        assert char not in rendered
    opening = [line for line in rendered.splitlines() if TAG.match(line) and "=" in line]
    assert len(opening) == len(memories) + (recap is not None)
    assert all(ATTRIBUTES.fullmatch(line) for line in opening)  # one line, whole attributes


def test_each_record_names_its_agent_key_category_and_date() -> None:
    rendered = render_context([memory("ship on friday", "plan", "beta")], None)
    assert rendered.startswith(CONTEXT_PREAMBLE)
    assert (
        '<memory agent="beta" key="plan" category="core" updated="2026-05-28T20:26Z">\n'
        "ship on friday\n</memory>"
    ) in rendered
    recap = Recap("we met", 0, 41, 40, 1_780_000_000.0)
    assert '<session-summary turns="0-41" count="40" updated="2026-05-28T20:26Z">' in (
        render_context([], recap)
    )
    assert render_context([], None) == ""


def test_network_providers_send_the_context_after_the_identity() -> None:
    conversation = Conversation(
        "alpha", "# IDENTITY.md\nI am alpha.", (), "hi", memories=(memory("friday"),)
    )
    system = openai_messages(conversation)[0]
    assert system["role"] == "system"
    assert system["content"].startswith("# IDENTITY.md\nI am alpha.\n\n" + CONTEXT_PREAMBLE)
    assert conversation.system_text() == system["content"]
    # Anthropic's `system` is the same text (the payload is built in `complete`).
    source = Path(AnthropicProvider.complete.__code__.co_filename).read_text()
    assert "system_text()" in source


def test_a_summary_answer_is_read_the_same_from_any_model() -> None:
    limits = {"max_tokens": 100, "max_facts": 2, "max_fact_bytes": 10}
    read = parse_summary(
        "Sure!\nSUMMARY:\nWe planned the release.\nFACTS:\n- ship friday\n* 2. x\n\n- none\n"
        "- a fact far longer than ten bytes\n- third",
        **limits,
    )
    assert read is not None
    assert read.summary == "We planned the release."
    assert read.facts == ("ship frida", "2. x")  # bullets dropped, cut, at most two
    bare = parse_summary("We talked.", **limits)
    assert bare is not None and (bare.summary, bare.facts) == ("We talked.", ())
    assert parse_summary("SUMMARY:\n\nFACTS:\n- x", **limits) is None
    assert parse_summary("", **limits) is None
    long = parse_summary("y" * 1000, **limits)
    assert long is not None and len(long.summary) == 400
    lines = parse_summary("\n".join(f"line {i:03}" + "z" * 30 for i in range(40)), **limits)
    assert lines is not None and lines.summary.splitlines()[-1].startswith("line 039")
    assert lines.summary.splitlines()[0].startswith("line 0")  # whole lines dropped
    assert len(lines.summary) <= 400


def test_the_offline_summary_follows_its_rule() -> None:
    turns = (
        HistoryTurn("user", "note:  standup   at ten"),
        HistoryTurn("assistant", "alpha (offline) heard: note: standup at ten"),
        HistoryTurn("user", "x" * 300),
    )
    answer = offline_summary(Recap("- user: earlier", 0, 3, 4, 0.0), turns)
    assert answer == (
        "SUMMARY:\n- user: earlier\n- user: note: standup at ten\n"
        "- assistant: alpha (offline) heard: note: standup at ten\n"
        f"- user: {'x' * 120}\nFACTS:\n- standup at ten\n"
    )
    assert answer == offline_summary(Recap("- user: earlier", 0, 3, 4, 0.0), turns)
    long = offline_summary(None, tuple(HistoryTurn("user", f"m{i}") for i in range(30)))
    read = parse_summary(long, max_tokens=1000, max_facts=16, max_fact_bytes=4096)
    assert read is not None and read.summary.splitlines() == [
        f"- user: m{i}" for i in range(10, 30)
    ]
