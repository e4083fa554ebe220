"""Token usage read from every answer: streamed and whole, OpenAI and Anthropic shapes,
cached tokens included; the offline provider's deterministic count (issue 27)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import PATIENCE
from tests.providers.protocol_server import (
    ScriptedServer,
    anthropic_whole_text,
    openai_whole_text,
    sse,
    whole,
)
from tests.providers.test_network import conversation, make, no_delta
from zeroclaw._tokens import MESSAGE_OVERHEAD_TOKENS
from zeroclaw.providers import Conversation, OfflineProvider, Step, ToolCall
from zeroclaw.providers._usage import anthropic_usage, estimate, openai_usage
from zeroclaw.turns import MAX_STEP_TOKENS, TokenUsage

OPENAI_USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 30,
    "total_tokens": 1230,
    "prompt_tokens_details": {"cached_tokens": 1000},
}
ANTHROPIC_START = {
    "input_tokens": 40,
    "cache_read_input_tokens": 900,
    "cache_creation_input_tokens": 300,
    "output_tokens": 1,
}


# --- the shapes, pure -------------------------------------------------------------------


def test_openai_counts_cached_tokens_inside_the_prompt_and_splits_them_out() -> None:
    usage = openai_usage(OPENAI_USAGE)
    assert usage == TokenUsage(input_tokens=200, output_tokens=30, cached_input_tokens=1000)
    assert usage is not None and usage.total == 1230


def test_openai_without_details_has_no_cached_tokens() -> None:
    assert openai_usage({"prompt_tokens": 5, "completion_tokens": 7}) == TokenUsage(5, 7)


def test_a_cached_count_over_the_prompt_is_cut_to_it() -> None:
    usage = openai_usage(
        {"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 9}}
    )
    assert usage == TokenUsage(input_tokens=0, output_tokens=1, cached_input_tokens=5)


def test_anthropic_kinds_are_disjoint_and_a_later_count_replaces_an_earlier_one() -> None:
    start = anthropic_usage(ANTHROPIC_START)
    assert start == TokenUsage(40, 1, cached_input_tokens=900, cache_write_tokens=300)
    end = anthropic_usage({"output_tokens": 57}, start)
    assert end == TokenUsage(40, 57, cached_input_tokens=900, cache_write_tokens=300)
    assert end is not None and end.total == 40 + 57 + 900 + 300
    assert anthropic_usage({"nothing": 1}, start) is start
    assert anthropic_usage(None, None) is None


@pytest.mark.parametrize(
    "usage",
    [None, [], "12", {"prompt_tokens": -5}, {"prompt_tokens": True}, {"prompt_tokens": 1.5}, {}],
)
def test_anything_that_is_not_a_count_is_no_usage(usage: object) -> None:
    assert openai_usage(usage) is None
    assert anthropic_usage(usage) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=30), inner),
    max_leaves=20,
)
usage_like = st.fixed_dictionaries(
    {},
    optional={
        key: st.integers(min_value=-(2**70), max_value=2**70) | json_values
        for key in (
            "prompt_tokens",
            "completion_tokens",
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    }
    | {"prompt_tokens_details": st.fixed_dictionaries({}, optional={"cached_tokens": json_values})},
)


@given(st.one_of(json_values, usage_like))
def test_whatever_a_server_sends_each_count_is_bounded_and_never_negative(usage: object) -> None:
    for read in (openai_usage(usage), anthropic_usage(usage)):
        if read is not None:
            for count in (
                read.input_tokens,
                read.output_tokens,
                read.cached_input_tokens,
                read.cache_write_tokens,
            ):
                assert 0 <= count <= MAX_STEP_TOKENS


def test_the_estimate_is_the_shared_one_of_both_directions() -> None:
    # zeroclaw._tokens: four ASCII characters to a token, each message framed; the same
    # estimate the history and recall budgets use.
    c = Conversation("alpha", "s" * 8, (), "u" * 8)
    usage = estimate(c, Step(text="x" * 9))
    framed = 2 + MESSAGE_OVERHEAD_TOKENS  # each of the two messages
    assert usage == TokenUsage(input_tokens=2 * framed, output_tokens=3, estimated=True)


async def test_the_offline_provider_reports_a_deterministic_count_under_its_name() -> None:
    provider = OfflineProvider("offline.default")
    c = Conversation("alpha", "I am alpha.", (), "remember: the plan")
    first = await provider.complete(c, no_delta)
    again = await provider.complete(
        Conversation("alpha", "I am alpha.", (), "remember: the plan"), no_delta
    )
    assert first.provider == "offline.default"
    assert first.usage is not None and first.usage == again.usage
    assert not first.usage.estimated and first.usage.input_tokens > 0
    assert first.usage.output_tokens > 0 and isinstance(first.tool_calls[0], ToolCall)


# --- over HTTP ----------------------------------------------------------------------------


def openai_stream_with_usage(text: str, usage: dict[str, Any]) -> Any:
    return sse(
        [
            (None, {"choices": [{"index": 0, "delta": {"content": text}}]}),
            (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            (None, {"choices": [], "usage": usage}),
            (None, "[DONE]"),
        ]
    )


def anthropic_stream_with_usage(text: str) -> Any:
    return sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "m",
                        "role": "assistant",
                        "content": [],
                        "usage": ANTHROPIC_START,
                    },
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 57},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


async def complete(kind: str, url: str, **extra: Any) -> Step:
    provider = make(kind, url, **extra)
    try:
        with trio.fail_after(PATIENCE):
            return await provider.complete(conversation(), no_delta)
    finally:
        await provider.aclose()


async def test_openai_asks_for_the_streams_usage_and_reads_its_last_chunk(
    server: ScriptedServer,
) -> None:
    server.answers.append(openai_stream_with_usage("hi", OPENAI_USAGE))
    step = await complete("openai", server.url)
    assert server.seen[0].body["stream_options"] == {"include_usage": True}
    assert step.text == "hi" and step.provider == "openai.test"
    assert step.usage == TokenUsage(200, 30, cached_input_tokens=1000)


async def test_openai_with_stream_usage_off_does_not_ask_and_reports_none(
    server: ScriptedServer,
) -> None:
    server.answers.append(openai_stream_with_usage("hi", OPENAI_USAGE))
    step = await complete("openai", server.url, stream_usage=False)
    assert "stream_options" not in server.seen[0].body
    assert step.usage == TokenUsage(200, 30, cached_input_tokens=1000)  # sent anyway: read


async def test_anthropic_reads_message_start_then_message_delta(server: ScriptedServer) -> None:
    server.answers.append(anthropic_stream_with_usage("hi"))
    step = await complete("anthropic", server.url)
    assert step.text == "hi" and step.provider == "anthropic.test"
    assert step.usage == TokenUsage(40, 57, cached_input_tokens=900, cache_write_tokens=300)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_whole_answer_carries_its_usage(kind: str, server: ScriptedServer) -> None:
    if kind == "openai":
        body = {**openai_whole_text("hi"), "usage": OPENAI_USAGE}
        expected = TokenUsage(200, 30, cached_input_tokens=1000)
    else:
        body = {**anthropic_whole_text("hi"), "usage": {**ANTHROPIC_START, "output_tokens": 57}}
        expected = TokenUsage(40, 57, cached_input_tokens=900, cache_write_tokens=300)
    server.answers.append(whole(body))
    step = await complete(kind, server.url)
    assert step.text == "hi" and step.usage == expected


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_answer_without_usage_reports_none(kind: str, server: ScriptedServer) -> None:
    body = openai_whole_text("hi") if kind == "openai" else anthropic_whole_text("hi")
    server.answers.append(whole(body))
    step = await complete(kind, server.url)
    assert step.text == "hi" and step.usage is None
