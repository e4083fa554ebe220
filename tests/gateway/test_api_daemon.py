"""The gateway's OpenAI-compatible API through a real daemon, with the official `openai`
SDK as the only client (sync, async and streaming): models, turns, sessions, the error
objects and their status codes, approvals in the operator's queue, and a client that
goes away cancelling its turn."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.conftest import PATIENCE
from tests.gateway.helpers import (
    TIGHT_TOKEN,
    TWIN_TOKEN,
    approvals,
    async_client,
    client,
    gateway_daemon,
    wait_until,
)
from tests.known_secrets import OPERATOR_TOKEN, OTHER_API_TOKEN
from tests.supervisor.harness import Daemon

Gateway = tuple[Daemon, int]


MAX_BODY = 64 * 1024


def budget_and_body_cap(doc: dict[str, Any]) -> None:
    """The `twin` key's sender may start one turn an hour on alpha (ADR 0057); requests
    are capped at MAX_BODY bytes."""
    doc["agents"]["alpha"]["budget"] = {"origins": {"api.twin:ci-bot": {"turns_per_hour": 1}}}
    doc["gateway"]["max_body_bytes"] = MAX_BODY


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with gateway_daemon(budget_and_body_cap) as running:
        yield running


def test_models_are_the_agents_the_key_reaches(gateway: Gateway) -> None:
    _, port = gateway
    assert [m.id for m in client(port).models.list()] == ["alpha"]
    assert [m.id for m in client(port, OTHER_API_TOKEN).models.list()] == ["beta"]
    assert client(port).models.retrieve("alpha").owned_by == "zeroclaw"
    with pytest.raises(openai.NotFoundError):
        client(port).models.retrieve("beta")


def test_a_chat_completion_runs_one_turn_of_the_agent(gateway: Gateway) -> None:
    _, port = gateway
    answer = client(port).chat.completions.create(
        model="alpha", messages=[{"role": "user", "content": "hello there"}]
    )
    assert answer.object == "chat.completion"
    assert answer.model == "alpha"
    choice = answer.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert answer.usage is not None and answer.usage.total_tokens > 0


def test_a_streamed_completion_sends_deltas_then_finish_and_usage(gateway: Gateway) -> None:
    _, port = gateway
    said = "the streamed answer is long enough for several chunks " * 3
    chunks = list(
        client(port).chat.completions.create(
            model="alpha", messages=[{"role": "user", "content": said}], stream=True
        )
    )
    deltas = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert len([d for d in deltas if d]) >= 2, chunks  # the offline agent echoes it
    assert said.strip() in "".join(deltas)
    assert chunks[0].choices[0].delta.role == "assistant"
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.usage is not None and last.usage.total_tokens > 0
    assert {c.id for c in chunks} == {chunks[0].id}


async def test_the_async_client_streams_and_answers() -> None:
    with gateway_daemon() as (_, port):
        async with async_client(port) as api:
            answer = await api.chat.completions.create(
                model="alpha", messages=[{"role": "user", "content": "hi"}]
            )
            assert answer.choices[0].message.content
            stream = await api.chat.completions.create(
                model="alpha", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
            assert "".join(pieces) == answer.choices[0].message.content


def test_the_session_is_the_user_field_inside_the_keys_namespace(gateway: Gateway) -> None:
    daemon, port = gateway
    api = client(port)

    def say(text: str, user: str) -> str:
        answer = api.chat.completions.create(
            model="alpha",
            # Earlier messages are ignored: the agent's own session history counts.
            messages=[
                {"role": "user", "content": "an earlier message the client kept"},
                {"role": "assistant", "content": "whatever"},
                {"role": "user", "content": text},
            ],
            user=user,
        )
        return answer.choices[0].message.content or ""

    say("my favourite colour is teal", "u1")
    assert "teal" in say("history", "u1")
    assert "teal" not in say("history", "u2")
    listed = daemon.cli("sessions", "list", "--agent", "alpha", "--json")
    assert listed.returncode == 0, listed.stderr
    owners = {s["session"]: s["kind"] for s in json.loads(listed.stdout)["sessions"]}
    assert owners["api.ci:ci-bot/u1"] == owners["api.ci:ci-bot/u2"] == "api"


def test_errors_are_openai_error_objects_with_their_status(gateway: Gateway) -> None:
    _, port = gateway
    messages: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError) as no_key:
        client(port, "not-a-token").models.list()
    assert no_key.value.status_code == 401
    assert no_key.value.code == "invalid_api_key"
    # The operator's token is no API key.
    with pytest.raises(openai.AuthenticationError):
        client(port, OPERATOR_TOKEN).models.list()
    with pytest.raises(openai.NotFoundError) as unknown:
        client(port).chat.completions.create(model="beta", messages=messages)
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as tools:
        client(port).chat.completions.create(
            model="alpha",
            messages=messages,
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        )
    assert tools.value.code == "tools_not_supported"
    assert "server" in tools.value.message
    with pytest.raises(openai.BadRequestError) as no_user:
        client(port).chat.completions.create(
            model="alpha", messages=[{"role": "system", "content": "x"}]
        )
    assert no_user.value.code == "invalid_request"


def test_a_key_over_its_rate_gets_429_with_retry_after(gateway: Gateway) -> None:
    _, port = gateway
    api = client(port, TIGHT_TOKEN)
    for _ in range(3):  # its burst: 3 a minute
        api.models.list()
    with pytest.raises(openai.RateLimitError) as limited:
        api.models.list()
    assert limited.value.code == "rate_limit_exceeded"
    assert int(limited.value.response.headers["retry-after"]) >= 1
    # Another key's budget is its own.
    assert client(port).models.list().data


def test_a_request_over_the_size_cap_gets_413_and_runs_nothing(gateway: Gateway) -> None:
    daemon, port = gateway
    big = "x" * MAX_BODY
    with pytest.raises(openai.APIStatusError) as over:
        client(port).chat.completions.create(
            model="alpha", messages=[{"role": "user", "content": big}], user="big"
        )
    assert over.value.status_code == 413
    assert over.value.code == "request_too_large"
    listed = json.loads(daemon.cli("sessions", "list", "--agent", "alpha", "--json").stdout)
    assert not [s for s in listed["sessions"] if s["session"].endswith("/big")]
    # Just under the cap is a turn like any other.
    fits = "y" * (MAX_BODY - 200)
    answer = client(port).chat.completions.create(
        model="alpha", messages=[{"role": "user", "content": fits}], user="fits"
    )
    assert answer.choices[0].message.content


def test_a_turn_over_a_budget_gets_429_budget_exceeded_with_retry_after(
    gateway: Gateway,
) -> None:
    daemon, port = gateway
    api = client(port, TWIN_TOKEN)
    messages: Any = [{"role": "user", "content": "hi"}]
    assert api.chat.completions.create(model="alpha", messages=messages).choices
    for stream in (False, True):  # refused before the turn starts: no stream begins
        with pytest.raises(openai.RateLimitError) as over:
            api.chat.completions.create(model="alpha", messages=messages, stream=stream)
        assert over.value.code == "budget_exceeded"
        # the key's own budget, in its terms (the event names the origin and agent)
        assert over.value.message.endswith("- your turns_per_hour budget is spent; try again later")
        assert int(over.value.response.headers["retry-after"]) >= 1
    # Another key of the same sender is another origin, with no budget of its own.
    assert client(port).chat.completions.create(model="alpha", messages=messages).choices
    refused = json.loads(daemon.cli("usage", "--json").stdout)
    turns = {g["origin"]: g["turns"] for g in refused["groups"] if g["agent"] == "alpha"}
    assert turns["api.twin:ci-bot"] == 1


def test_the_usage_field_is_what_the_ledger_counted_for_the_turn(gateway: Gateway) -> None:
    daemon, port = gateway
    answer = client(port).chat.completions.create(
        model="alpha", messages=[{"role": "user", "content": "count me"}], user="ledger"
    )
    assert answer.usage is not None
    result = daemon.cli("usage", "--json", "--by", "session")
    assert result.returncode == 0, result.stderr
    rows = [
        g for g in json.loads(result.stdout)["groups"] if g.get("session", "").endswith("/ledger")
    ]
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["origin"] == "api.ci:ci-bot" and row["turns"] == 1
    counted = row["input_tokens"] + row["cached_input_tokens"] + row["cache_write_tokens"]
    assert answer.usage.prompt_tokens == counted
    assert answer.usage.completion_tokens == row["output_tokens"]


def test_a_key_whose_sender_no_group_admits_gets_403() -> None:
    def admit_someone_else(doc: dict[str, Any]) -> None:
        doc["peer_groups"]["api-other"]["external_peers"] = ["somebody-else"]

    with gateway_daemon(admit_someone_else) as (_, port):
        with pytest.raises(openai.PermissionDeniedError) as refused:
            client(port, OTHER_API_TOKEN).chat.completions.create(
                model="beta", messages=[{"role": "user", "content": "hi"}]
            )
        assert refused.value.code == "sender_not_accepted"


def test_a_stopped_agent_answers_503(gateway: Gateway) -> None:
    daemon, port = gateway
    stopped = daemon.cli("agents", "stop", "beta")
    assert stopped.returncode == 0, stopped.stderr
    try:
        with pytest.raises(openai.InternalServerError) as down:
            client(port, OTHER_API_TOKEN).chat.completions.create(
                model="beta", messages=[{"role": "user", "content": "hi"}]
            )
        assert down.value.status_code == 503
        assert down.value.code == "agent_unavailable"
    finally:
        daemon.cli("agents", "start", "beta")


def test_an_api_turns_approval_waits_in_the_operators_queue(gateway: Gateway) -> None:
    daemon, port = gateway
    answers: list[Any] = []

    def write() -> None:
        answers.append(
            client(port, timeout=PATIENCE).chat.completions.create(
                model="alpha",
                messages=[{"role": "user", "content": "write note.txt: from the API"}],
            )
        )

    thread = threading.Thread(target=write)
    thread.start()
    try:
        waiting = wait_until(lambda: approvals(daemon), "the write's approval in the queue")
        assert waiting[0]["channel"] == "api.ci" and waiting[0]["sender"] == "ci-bot"
        approved = daemon.cli("approvals", "approve", waiting[0]["id"])
        assert approved.returncode == 0, approved.stderr
    finally:
        thread.join(PATIENCE)
    assert answers, "the completion never came back"
    assert (daemon.root / "ws-alpha" / "note.txt").read_text() == "from the API"


def test_a_client_that_goes_away_cancels_its_turn(gateway: Gateway) -> None:
    daemon, port = gateway
    impatient = client(port, timeout=2.0)  # the approval never comes: it gives up
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(
            model="alpha",
            messages=[{"role": "user", "content": "write gone.txt: never"}],
            stream=True,
        )
    # The turn ended with its connection: its approval was abandoned, nothing written.
    wait_until(lambda: not approvals(daemon), "the abandoned approval leaves the queue")
    events = daemon.cli("events", "--json", "--kind", "approval")
    assert '"abandoned"' in events.stdout, events.stdout[-2000:]
    assert not (daemon.root / "ws-alpha" / "gone.txt").exists()
