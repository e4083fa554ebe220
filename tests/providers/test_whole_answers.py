"""A streamed request answered with one whole JSON body (some OpenAI- and Anthropic-compatible
proxies do that) is read as the non-streamed response shape; a body neither JSON nor events
is an error that shows its first 200 bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from tests.providers.protocol_server import (
    TEXT,
    WHOLE_TEXT,
    WHOLE_TOOL_CALL,
    ScriptedServer,
    Seen,
    Writer,
    whole,
)
from tests.providers.test_network import KEY, KINDS, make, run_turn
from zeroclaw.providers._http import MAX_JSON_BYTES
from zeroclaw.turns import ToolCallRecord


@pytest.mark.parametrize("kind", KINDS)
async def test_a_json_answer_to_a_stream_request_is_the_reply(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers.append(whole(WHOLE_TEXT[kind]("Hello from a proxy.")))
    result, events = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert result.error is None
    assert result.reply == "Hello from a proxy."
    assert events == [{"event": "delta", "text": "Hello from a proxy."}]
    assert server.seen[0].body["stream"] is True


@pytest.mark.parametrize("kind", KINDS)
async def test_a_json_tool_call_answer_runs_the_tool_and_goes_on(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers += [
        whole(WHOLE_TOOL_CALL[kind]("call_9", "file_read", {"path": "notes.txt"})),
        whole(WHOLE_TEXT[kind]("The plan is to ship.")),
    ]
    result, _ = await run_turn(make(kind, server.url), tmp_path, "what do my notes say?")
    assert result.error is None
    assert result.tool_calls == [ToolCallRecord("file_read", {"path": "notes.txt"}, True, None)]
    assert result.reply.endswith("The plan is to ship.")
    second = server.seen[1].body["messages"]
    if kind == "openai":
        assert second[-1]["tool_call_id"] == "call_9"
        assert second[-1]["content"] == "the plan is to ship"
    else:
        assert second[-1]["content"][0]["tool_use_id"] == "call_9"
        assert second[-1]["content"][0]["content"] == "the plan is to ship"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("content_type", ["text/plain; charset=utf-8", "text/event-stream"])
async def test_a_json_answer_labelled_as_anything_is_still_read(
    kind: str, content_type: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers.append(
        whole(b"\n " + json.dumps(WHOLE_TEXT[kind]("plain")).encode(), content_type)
    )
    result, _ = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert (result.error, result.reply) == (None, "plain")


GARBAGE = b"<html><head><title>502 Bad Gateway</title></head><body>" + b"x" * 300 + b"TAIL"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("content_type", ["text/html", "application/json", "text/event-stream"])
async def test_a_garbage_body_is_an_error_naming_its_first_200_bytes(
    kind: str, content_type: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers.append(whole(GARBAGE, content_type))
    result, _ = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert result.error is not None
    assert result.error.startswith(f"provider {kind}.test: malformed response")
    assert repr(GARBAGE[:200].decode()) in result.error
    assert "TAIL" not in result.error and KEY not in result.error


@pytest.mark.parametrize("kind", KINDS)
async def test_a_json_error_body_with_status_200_names_the_servers_message(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers.append(whole({"type": "error", "error": {"message": "model overloaded"}}))
    result, _ = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert result.error is not None and "model overloaded" in result.error


@pytest.mark.parametrize("kind", KINDS)
async def test_a_json_answer_of_the_wrong_shape_is_a_malformed_response(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers.append(whole({"unexpected": True}))
    result, _ = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert result.error is not None
    assert result.error.startswith(f"provider {kind}.test: malformed response")


@pytest.mark.parametrize("kind", KINDS)
async def test_events_sent_under_another_content_type_are_still_a_stream(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    # The same event stream the SSE helper writes, relabelled by a proxy.
    events: list[bytes] = []

    async def capture(data: bytes) -> None:
        events.append(data)

    await TEXT[kind]("Hel", "lo")(None, capture)  # type: ignore[arg-type]
    body = b"".join(events).partition(b"\r\n\r\n")[2]
    server.answers.append(whole(body, "text/plain"))
    result, _ = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert (result.error, result.reply) == (None, "Hello")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_streamed_answer_still_streams(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers.append(TEXT[kind]("Hel", "lo"))
    result, events = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert (result.error, result.reply) == (None, "Hello")
    assert events == [{"event": "delta", "text": "Hel"}, {"event": "delta", "text": "lo"}]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_body_of_blanks_past_the_bound_is_an_error_not_a_wait(
    kind: str, server: ScriptedServer, tmp_path: Path
) -> None:
    """A hostile or broken server that sends only whitespace and never ends its body: the
    read for the body's first byte stops at MAX_JSON_BYTES with an error instead of
    buffering blanks until the server stops."""

    async def blanks_forever(seen: Seen, write: Writer) -> None:
        await write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: 999999999999\r\n\r\n"
        )
        for _ in range(MAX_JSON_BYTES // 65536 + 2):
            await write(b" " * 65536)
        await trio.sleep_forever()  # the body never ends; only the bound ends the read

    server.answers.append(blanks_forever)
    with trio.fail_after(60):
        result, _ = await run_turn(make(kind, server.url), tmp_path, "hello")
    assert result.error is not None
    assert result.error.startswith(f"provider {kind}.test: malformed response"), result.error
