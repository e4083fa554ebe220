"""Provider response bodies as hostile input: whatever JSON (or not) a server sends, the
parsers give a value or ProviderError, never RecursionError (ADR 0014)."""

from __future__ import annotations

import contextlib

import pytest
import trio
from hypothesis import given, settings

from tests.hostile import hostile_json, nested_json
from zeroclaw.providers import ProviderError
from zeroclaw.providers._anthropic import _Stream as AnthropicStream
from zeroclaw.providers._http import SseEvent, StreamedStep, _error_text, load_json
from zeroclaw.providers._openai import _Stream as OpenAIStream

CHUNKS = [
    '{"choices": [{"delta": {"content": @}}]}',
    '{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": @}}]}}]}',
    '{"type": "content_block_delta", "index": 0, "delta": @}',
    '{"error": {"message": @}}',
    "@",
]


async def _no_delta(text: str) -> None:
    return None


async def _feed_both(data: str) -> None:
    for stream in (OpenAIStream("openai.t", _no_delta), AnthropicStream("anthropic.t", _no_delta)):
        with contextlib.suppress(ProviderError):
            await stream.feed(SseEvent("content_block_delta", data))


@settings(max_examples=150, deadline=None)
@given(hostile_json(CHUNKS))
def test_stream_parsers_only_return_or_raise_provider_error(data: str) -> None:
    trio.run(_feed_both, data)


@settings(max_examples=150, deadline=None)
@given(hostile_json(CHUNKS))
def test_tool_arguments_and_error_bodies_never_raise(data: str) -> None:
    step = StreamedStep("openai.t", _no_delta, "call_")
    step.call(0).update(name="file_read", args=data)
    (call,) = step.step().tool_calls
    assert isinstance(call.args, (dict, list, str, int, float, bool)) or call.args is None
    assert isinstance(_error_text(data), str)


def test_deep_json_is_a_malformed_response() -> None:
    for depth in (65, 10_000):
        for kind in ("list", "map"):
            with pytest.raises(ProviderError, match="malformed response"):
                load_json("openai.t", nested_json(depth, kind))
    assert load_json("openai.t", nested_json(10)) == nested_json_value(10)


def test_deep_tool_arguments_are_unparsed_not_a_crash() -> None:
    step = StreamedStep("openai.t", _no_delta, "call_")
    deep = nested_json(10_000, "map")
    step.call(0).update(name="file_read", args=deep)
    (call,) = step.step().tool_calls
    assert call.args == {"_unparsed": deep}


def nested_json_value(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value
