"""The openai and anthropic providers against a local server speaking each protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.agent.helpers import run_turns
from tests.conftest import PATIENCE
from tests.hostile import nested_json
from tests.providers.protocol_server import (
    TEXT,
    TOOL_CALL,
    ScriptedServer,
    Seen,
    Writer,
    sse,
    status,
    trickling,
)
from zeroclaw.providers import Conversation, Provider, ProviderError, ProviderSpec, make_provider
from zeroclaw.tools import DEFAULT_TOOLSET
from zeroclaw.turns import ToolCallRecord

KEY = "sk-test-not-a-real-key"
KINDS = ["openai", "anthropic"]


def provider_config(kind: str, url: str, **extra: Any) -> ProviderSpec:
    config: dict[str, Any] = {
        "model": "test-model",
        "api_key_env": "TEST_API_KEY",
        "timeout_secs": 5.0,
        "max_retries": 2,
        **extra,
    }
    if kind == "openai":
        config["base_url"] = url + "/v1"
    else:
        config["base_url"] = url
        config["max_tokens"] = 256
    return msgspec.convert({"kind": kind, **config}, ProviderSpec)


def make(kind: str, url: str, **extra: Any) -> Provider:
    return make_provider(f"{kind}.test", provider_config(kind, url, **extra), {"TEST_API_KEY": KEY})


def conversation(text: str = "hello") -> Conversation:
    return Conversation(
        "alpha", "# IDENTITY.md\nI am alpha.", (), text, tools=DEFAULT_TOOLSET.specs
    )


async def no_delta(text: str) -> None:
    return None


async def failure(kind: str, url: str, **extra: Any) -> str:
    """The ProviderError message of one request that must fail."""
    provider = make(kind, url, **extra)
    try:
        with trio.fail_after(PATIENCE), pytest.raises(ProviderError) as caught:
            await provider.complete(conversation(), no_delta)
    finally:
        await provider.aclose()
    return str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_streamed_answer_arrives_while_the_response_is_still_open(
    kind: str, server: ScriptedServer
) -> None:
    first_seen = trio.Event()
    server.answers.append(TEXT[kind]("Hel", "lo world", pause=first_seen))
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)
        first_seen.set()  # the server sends the rest only after this

    provider = make(kind, server.url)
    try:
        with trio.fail_after(PATIENCE):  # a client that buffered the whole answer would hang here
            step = await provider.complete(conversation(), on_delta)
    finally:
        await provider.aclose()
    assert deltas == ["Hel", "lo world"]
    assert step.text == "Hello world" and step.streamed and step.tool_calls == ()
    seen = server.seen[0]
    assert seen.body["stream"] is True and seen.body["model"] == "test-model"
    tools = {t["function"]["name"] if kind == "openai" else t["name"] for t in seen.body["tools"]}
    assert {"file_read", "shell", "send_message_to_peer", "delegate"} <= tools
    if kind == "openai":
        assert seen.path == "/v1/chat/completions"
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert seen.body["messages"][0] == {
            "role": "system",
            "content": "# IDENTITY.md\nI am alpha.",
        }
    else:
        assert seen.path == "/v1/messages"
        assert seen.headers["x-api-key"] == KEY and seen.headers["anthropic-version"]
        assert seen.body["system"] == "# IDENTITY.md\nI am alpha."


async def run_turn(provider: Provider, tmp_path: Path, text: str) -> Any:
    results, events, _ = await run_turns(provider, tmp_path, [text])
    return results[0], events


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_call_round_trip(kind: str, server: ScriptedServer, tmp_path: Path) -> None:
    server.answers += [
        TOOL_CALL[kind]("call_7", "file_read", {"path": "notes.txt"}),
        TEXT[kind]("The notes say ", "the plan is to ship."),
    ]
    result, events = await run_turn(make(kind, server.url), tmp_path, "what do my notes say?")
    assert result.error is None
    assert result.tool_calls == [ToolCallRecord("file_read", {"path": "notes.txt"}, True, None)]
    assert result.reply == "The notes say the plan is to ship."
    assert [e["event"] for e in events] == ["tool", "delta", "delta"]
    second = server.seen[1].body["messages"]
    if kind == "openai":
        assert second[-2]["tool_calls"][0]["id"] == "call_7"
        assert second[-1] == {
            "role": "tool",
            "tool_call_id": "call_7",
            "content": "the plan is to ship",
        }
    else:
        assert second[-2]["content"][0] == {
            "type": "tool_use",
            "id": "call_7",
            "name": "file_read",
            "input": {"path": "notes.txt"},
        }
        assert second[-1]["content"][0]["tool_use_id"] == "call_7"
        assert second[-1]["content"][0]["content"] == "the plan is to ship"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_tool_call_goes_back_to_the_model_with_its_code(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers += [
        TOOL_CALL[kind]("c1", "file_read", {"path": "../../etc/passwd"}),
        TEXT[kind]("I may not read that."),
    ]
    result, _ = await run_turn(make(kind, server.url), tmp_path, "read the passwd file")
    assert result.tool_calls[0].error_code == "path_not_allowed"
    assert "refused: path_not_allowed" in str(server.seen[1].body["messages"][-1])


@pytest.mark.parametrize("kind", KINDS)
async def test_429_then_success_retries_after_the_servers_delay(
    kind: str, server: ScriptedServer
) -> None:
    server.answers += [status(429, "slow down", {"retry-after": "0"}), TEXT[kind]("fine")]
    provider = make(kind, server.url)
    try:
        step = await provider.complete(conversation(), no_delta)
        assert step.text == "fine"
        assert len(server.seen) == 2
        assert provider.http.retries == 1  # type: ignore[attr-defined]
    finally:
        await provider.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_5xx_until_retries_run_out_names_the_provider_and_status(
    kind: str, server: ScriptedServer
) -> None:
    server.answers += [status(503, "overloaded", {"retry-after": "0"})] * 3
    message = await failure(kind, server.url)
    assert message.startswith(f"provider {kind}.test: HTTP 503") and "overloaded" in message
    assert len(server.seen) == 3  # the first try and max_retries = 2


@pytest.mark.parametrize("kind", KINDS)
async def test_an_auth_error_is_not_retried_and_never_shows_the_key(
    kind: str, server: ScriptedServer
) -> None:
    server.answers.append(status(401, "invalid api key"))
    message = await failure(kind, server.url)
    assert "HTTP 401" in message and "invalid api key" in message and KEY not in message
    assert len(server.seen) == 1


MALFORMED = {
    "openai": [
        sse([(None, "{not json")]),
        sse([(None, {"no_choices": True})]),
        sse([(None, nested_json(10_000))]),  # RecursionError in the decoder (ADR 0014)
    ],
    "anthropic": [
        sse([("content_block_delta", "{oops")]),
        sse([("message_start", {"type": "message_start"})]),  # ends before message_stop
        sse([("content_block_delta", nested_json(10_000, "map"))]),
    ],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", [0, 1, 2])
async def test_a_malformed_response_is_a_clear_error_not_a_crash(
    kind: str, which: int, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers.append(MALFORMED[kind][which])
    result, events = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert result.error is not None
    assert result.error.startswith(f"provider {kind}.test: malformed response")
    assert result.reply == f"error: {result.error}"
    assert events == [{"event": "delta", "text": result.reply}]


@pytest.mark.parametrize("kind", KINDS)
async def test_the_key_comes_only_from_the_named_variable(kind: str) -> None:
    config = provider_config(kind, "http://127.0.0.1:9")
    with pytest.raises(ProviderError, match="environment variable TEST_API_KEY is not set"):
        make_provider(f"{kind}.test", config, {"OTHER": KEY})


@pytest.mark.parametrize("kind", KINDS)
async def test_an_unreachable_server_is_named(kind: str) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    message = await failure(kind, f"http://127.0.0.1:{port}", max_retries=0)
    assert message.startswith(f"provider {kind}.test: cannot reach")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_stalls_times_out(kind: str, server: ScriptedServer) -> None:
    async def stall(seen: Seen, write: Writer) -> None:
        await trio.sleep_forever()

    server.answers.append(stall)
    message = await failure(kind, server.url, timeout_secs=0.2, max_retries=0)
    assert message == f"provider {kind}.test: timed out after 1 attempt"


# The first piece of a text answer, in each protocol: then the answer trickles.
ANSWER_STARTED = {
    "openai": sse([(None, {"choices": [{"index": 0, "delta": {"content": "piece"}}]})]),
    "anthropic": sse(
        [
            ("message_start", {"type": "message_start", "message": {"id": "m", "content": []}}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "piece"},
                },
            ),
        ]
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("started", [False, True], ids=["before-the-answer", "mid-answer"])
async def test_an_answer_that_trickles_is_cut_at_answer_timeout_secs(
    kind: str, started: bool, server: ScriptedServer
) -> None:
    # Bytes every 50 ms keep each read within timeout_secs: without a bound on the whole,
    # the turn waited for ever (until `failure`'s own deadline).
    server.answers.append(trickling(ANSWER_STARTED[kind] if started else None))
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    provider = make(kind, server.url, timeout_secs=30.0, answer_timeout_secs=0.5)
    try:
        with trio.fail_after(PATIENCE), pytest.raises(ProviderError) as caught:
            await provider.complete(conversation(), on_delta)
    finally:
        await provider.aclose()
    assert str(caught.value) == (
        f"provider {kind}.test: no whole answer in 0.5 s (answer_timeout_secs)"
    )
    assert caught.value.kind == "timeout"  # a chain fails over, as for any timeout
    assert deltas == (["piece"] if started else [])
    assert len(server.seen) == 1  # the bound is the request's, retries included


async def test_openai_arguments_sent_as_an_object_are_accepted(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """Some OpenAI-compatible servers put the arguments object itself in the stream."""
    call = {
        "index": 0,
        "id": "c1",
        "function": {"name": "file_read", "arguments": {"path": "notes.txt"}},
    }
    server.answers += [
        sse([(None, {"choices": [{"delta": {"tool_calls": [call]}}]}), (None, "[DONE]")]),
        TEXT["openai"]("done"),
    ]
    result, _ = await run_turn(make("openai", server.url), tmp_path, "read my notes")
    assert result.tool_calls == [ToolCallRecord("file_read", {"path": "notes.txt"}, True, None)]
