"""Token usage as each protocol reports it, read into one `TokenUsage`. Pure.

OpenAI chat completions: `usage` = {prompt_tokens, completion_tokens, total_tokens,
prompt_tokens_details: {cached_tokens}} on the whole answer, and on the last chunk of a
stream asked with `stream_options.include_usage` (a chunk with no choices). Its prompt
count includes the cached part, so the uncached input is the difference.

Anthropic Messages: `usage` = {input_tokens, output_tokens, cache_read_input_tokens,
cache_creation_input_tokens}, disjoint already; a stream gives it in `message_start`
(`message.usage`) and again, cumulative, in `message_delta` (`usage`: output_tokens, and in
newer versions the input counts too): the later value of each field wins.

A server may send nothing, a negative number, a string or a float: each count is read only
when it is a non-negative integer (capped at MAX_STEP_TOKENS); no usable count is None.
When a server reported nothing at all, the turn estimates (`estimate`) what was sent and
received with the one estimate of every token budget (`zeroclaw._tokens`), flagged
`estimated`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .._tokens import estimate_tokens, message_tokens
from ..turns import MAX_STEP_TOKENS, TokenUsage
from ._types import Conversation, Step


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return min(value, MAX_STEP_TOKENS)


def _field(data: Mapping[object, object], key: str) -> int | None:
    return _count(data.get(key))


def openai_usage(usage: object) -> TokenUsage | None:
    """An OpenAI `usage` object; None when it holds no count."""
    if not isinstance(usage, Mapping):
        return None
    prompt = _field(usage, "prompt_tokens")
    completion = _field(usage, "completion_tokens")
    if prompt is None and completion is None:
        return None
    details = usage.get("prompt_tokens_details")
    cached = _field(details, "cached_tokens") if isinstance(details, Mapping) else None
    prompt = prompt or 0
    cached = min(cached or 0, prompt)  # part of the prompt count, never more than it
    return TokenUsage(
        input_tokens=prompt - cached, output_tokens=completion or 0, cached_input_tokens=cached
    )


_ANTHROPIC_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cached_input_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
}


def anthropic_usage(usage: object, earlier: TokenUsage | None = None) -> TokenUsage | None:
    """An Anthropic `usage` object, each count it holds replacing `earlier`'s (a stream's
    message_delta carries cumulative counts); `earlier` when it holds none."""
    if not isinstance(usage, Mapping):
        return earlier
    found = {
        ours: count
        for theirs, ours in _ANTHROPIC_FIELDS.items()
        if (count := _field(usage, theirs)) is not None
    }
    if not found:
        return earlier
    base = earlier or TokenUsage()
    return TokenUsage(
        input_tokens=found.get("input_tokens", base.input_tokens),
        output_tokens=found.get("output_tokens", base.output_tokens),
        cached_input_tokens=found.get("cached_input_tokens", base.cached_input_tokens),
        cache_write_tokens=found.get("cache_write_tokens", base.cache_write_tokens),
    )


def sent_tokens(conversation: Conversation) -> int:
    """What a step sends a model, estimated (`zeroclaw._tokens`, the one estimate of every
    token budget): the system prompt as sent (identity and what was recalled), history,
    the message, the tool rounds so far and the tools' schemas."""
    texts = [conversation.system_text(), conversation.user]
    texts += [turn.content for turn in conversation.history]
    tokens = sum(message_tokens(text) for text in texts)
    for round_ in conversation.rounds:
        tokens += received_tokens(round_.step)
        tokens += sum(message_tokens(outcome.as_text()) for outcome in round_.outcomes)
    for tool in conversation.tools:
        tokens += estimate_tokens(tool.name + tool.description + json.dumps(tool.parameters))
    return min(tokens, MAX_STEP_TOKENS)


def received_tokens(step: Step) -> int:
    tokens = estimate_tokens(step.text or "")
    for call in step.tool_calls:
        tokens += estimate_tokens(call.name + json.dumps(call.args, default=str))
    return min(tokens, MAX_STEP_TOKENS)


def estimate(conversation: Conversation, step: Step, *, estimated: bool = True) -> TokenUsage:
    """The shared estimate of what the step sent and what came back. Deterministic:
    the offline provider's own count (`estimated=False`), and the turn's for a server that
    reported nothing."""
    return TokenUsage(
        input_tokens=sent_tokens(conversation),
        output_tokens=received_tokens(step),
        estimated=estimated,
    )
