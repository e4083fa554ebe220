"""The API's pure decisions (`zeroclaw.gateway._api`), driven directly: routes, tokens,
chat requests, answers and their SSE framing, outcomes as OpenAI errors."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.channels import ChannelAnswer, ChannelFailure, ChannelRefused
from zeroclaw.gateway._api import (
    SSE_DONE,
    ApiError,
    ChatCompletions,
    GetModel,
    ListModels,
    TurnAsk,
    answer_or_error,
    bearer,
    chunk_body,
    completion_body,
    identify,
    models_body,
    outcome_error,
    parse_api_route,
    parse_chat,
    sse,
    usage_of,
)
from zeroclaw.turns import StepUsage, TokenUsage

TOKENS = {"ci": b"token-of-ci", "other": b"token-of-other", "unset": b""}


def chat(**fields: Any) -> bytes:
    body = {"model": "alpha", "messages": [{"role": "user", "content": "hi"}], **fields}
    return json.dumps(body).encode()


def test_routes() -> None:
    assert parse_api_route("GET", "/v1/models") == ListModels()
    assert parse_api_route("GET", "/v1/models/alpha") == GetModel("alpha")
    assert parse_api_route("POST", "/v1/chat/completions") == ChatCompletions()
    wrong = parse_api_route("GET", "/v1/chat/completions")
    assert isinstance(wrong, ApiError) and wrong.status == 405
    missing = parse_api_route("POST", "/v1/completions")
    assert isinstance(missing, ApiError) and missing.status == 404


def test_a_token_is_known_by_its_value_only() -> None:
    assert identify(b"token-of-ci", TOKENS) == "ci"
    assert identify(b"token-of-other", TOKENS) == "other"
    assert identify(b"token-of-c", TOKENS) is None  # a prefix is nothing
    assert identify(b"", TOKENS) is None  # an unset token admits no one
    assert identify(None, TOKENS) is None
    assert bearer([(b"Authorization", b"Bearer  abc ")]) == b"abc"
    assert bearer([(b"authorization", b"Basic abc")]) is None


@given(st.binary(max_size=40))
def test_no_other_value_is_a_token(given_value: bytes) -> None:
    name = identify(given_value, TOKENS)
    assert name is None or TOKENS[name] == given_value


def test_a_chat_request_is_its_last_user_message() -> None:
    body = chat(
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ],
        user="u1",
        temperature=0.2,  # accepted, ignored
        stream=True,
        stream_options={"include_usage": True},
    )
    assert parse_chat(body, ["alpha"]) == TurnAsk("alpha", "second", "u1", True, True)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not json", 400, "invalid_request"),
        (chat(model="beta"), 404, "model_not_found"),
        (chat(tools=[{"type": "function", "function": {"name": "f"}}]), 400, "tools_not_supported"),
        (chat(functions=[{"name": "f"}]), 400, "tools_not_supported"),
        (chat(tool_choice="required"), 400, "tools_not_supported"),
        (chat(n=2), 400, "invalid_request"),
        (chat(messages=[{"role": "system", "content": "x"}]), 400, "invalid_request"),
        (chat(messages=[{"role": "user", "content": ""}]), 400, "invalid_request"),
        (chat(messages="hi"), 400, "invalid_request"),
    ],
)
def test_chat_requests_refused(body: bytes, status: int, code: str) -> None:
    refused = parse_chat(body, ["alpha"])
    assert isinstance(refused, ApiError)
    assert (refused.status, refused.code) == (status, code)
    error = json.loads(refused.body())["error"]
    assert error["code"] == code and error["message"] and "type" in error


@given(st.binary(max_size=300))
def test_any_body_is_a_turn_or_a_400(body: bytes) -> None:
    parsed = parse_chat(body, ["alpha"])
    assert isinstance(parsed, TurnAsk) or parsed.status in (400, 404)


def answer(**fields: Any) -> ChannelAnswer:
    return ChannelAnswer("alpha", "the reply", **fields)


def test_a_completion_and_its_usage() -> None:
    steps = (
        StepUsage("offline.default", TokenUsage(input_tokens=10, output_tokens=3)),
        StepUsage("offline.default", TokenUsage(cached_input_tokens=5, output_tokens=2)),
    )
    body = json.loads(completion_body("chatcmpl-1", 7, answer(usage=steps)))
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "the reply"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 15, "completion_tokens": 5, "total_tokens": 20}
    stopped = json.loads(completion_body("c", 7, answer(stopped="budget_exceeded")))
    assert stopped["choices"][0]["finish_reason"] == "length"
    assert usage_of(()) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_sse_framing() -> None:
    chunk = chunk_body("c", 1, "alpha", {"content": "a\nb"})
    framed = sse(chunk)
    assert framed.startswith(b"data: ") and framed.endswith(b"\n\n")
    assert framed.count(b"\n") == 2  # JSON escapes newlines: one line per event
    assert json.loads(framed[6:])["choices"][0]["delta"]["content"] == "a\nb"
    assert SSE_DONE == b"data: [DONE]\n\n"


def test_models_listing() -> None:
    listed = json.loads(models_body(["beta", "alpha"], 5))
    assert [m["id"] for m in listed["data"]] == ["alpha", "beta"]
    assert listed["object"] == "list"


@pytest.mark.parametrize(
    ("outcome", "status", "code"),
    [
        (ChannelRefused("sender_not_accepted", "no"), 403, "sender_not_accepted"),
        (ChannelRefused("sender_ignored", "no"), 403, "sender_not_accepted"),
        (ChannelRefused("agent_not_bound", "no"), 404, "model_not_found"),
        (ChannelFailure("budget_exceeded", "spent"), 429, "budget_exceeded"),
        (ChannelFailure("unavailable", "down"), 503, "agent_unavailable"),
        (ChannelFailure("refused", "unavailable: x"), 503, "agent_unavailable"),
        (ChannelFailure("timeout", "slow"), 503, "turn_timeout"),
    ],
)
def test_outcomes_as_errors(
    outcome: ChannelRefused | ChannelFailure, status: int, code: str
) -> None:
    error = outcome_error(outcome)
    assert (error.status, error.code) == (status, code)
    if status == 429:
        assert error.headers() == [(b"retry-after", b"60")]


def test_a_provider_failure_without_a_reply_is_503() -> None:
    failed = answer_or_error(ChannelAnswer("alpha", "", error="connection refused"))
    assert isinstance(failed, ApiError) and failed.status == 503
    ok = answer_or_error(answer())
    assert isinstance(ok, ChannelAnswer)
    assert msgspec.json.decode(completion_body("c", 1, ok))["model"] == "alpha"
