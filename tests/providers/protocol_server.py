"""A small HTTP/1.1 server on loopback that speaks the OpenAI chat-completions and the
Anthropic Messages streaming protocols, answering from a script.

Real sockets, real HTTP: the providers under test use their real client against it. Each
script entry answers one request, in order. Run as a module it serves a fixed answer
forever, for daemon-level tests:  python -m tests.providers.protocol_server KIND
(it prints its port on the first line). Other kinds for sub-agent tests: "stall" reads
every request and never answers (a model that never finishes); "stall-once" stalls on the
first request and answers the others as "openai" does; "slow" answers as "openai" does,
two seconds late; "gated PATH [LOG]" answers as "openai" does once the file PATH exists (a test
holds every model call open as long as it needs, whatever the machine's load; LOG as for
"counted"); "counted
PATH" answers as "openai" does and appends a line to PATH for each request it read (a
daemon test counts the model calls its turns made); "status CODE" answers every request
with that HTTP status (a provider that fails, for fallback chains); "summary-gated MARK
GATE" answers turns at once and a compaction's summary request only once GATE exists,
creating MARK when it arrives.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

Writer = Callable[[bytes], Awaitable[None]]
# An answer gets the request (path, headers, JSON body) and writes the whole response.
Answer = Callable[["Seen", Writer], Awaitable[None]]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class ScriptedServer:
    answers: list[Answer]
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    default: Answer | None = None  # when the script is used up
    log: str | None = None  # a file that gets one line per request read

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])
            }
            length = int(headers.get("content-length", "0"))
            while len(body) < length:
                chunk = await stream.receive_some(65536)
                if not chunk:  # closed mid-body: b"" at once, every time; never a spin
                    return
                body += chunk
            seen = Seen(lines[0].split()[1], headers, json.loads(body or b"null"))
            self.seen.append(seen)
            if self.log is not None:
                with open(self.log, "a") as fh:  # noqa: ASYNC230 (a test's few bytes)
                    fh.write(seen.path + "\n")
            if self.answers:
                answer = self.answers.pop(0)
            else:
                answer = self.default or status(500, "script exhausted")
            await answer(seen, stream.send_all)


def status(code: int, message: str, headers: dict[str, str] | None = None) -> Answer:
    """A non-200 answer with a JSON error body, as both APIs send them."""

    async def answer(seen: Seen, write: Writer) -> None:
        body = json.dumps({"error": {"message": message}}).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        await write(
            f"HTTP/1.1 {code} X\r\ncontent-type: application/json\r\n{extra}"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )

    return answer


def sse(events: list[tuple[str | None, Any]], *, pause: trio.Event | None = None) -> Answer:
    """A 200 event stream. `(None, obj)` is a data-only event; a string payload is sent
    as is (for malformed data). With `pause`, the stream stops after its first event
    until the event is set: proof that the client saw the first part early."""

    async def answer(seen: Seen, write: Writer) -> None:
        await write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"cache-control: no-cache\r\nconnection: close\r\n\r\n"
        )
        for index, (name, payload) in enumerate(events):
            data = payload if isinstance(payload, str) else json.dumps(payload)
            prefix = f"event: {name}\n" if name else ""
            await write(f"{prefix}data: {data}\n\n".encode())
            if index == 0 and pause is not None:
                await pause.wait()

    return answer


def whole(body: bytes | Any, content_type: str = "application/json") -> Answer:
    """A 200 with one whole body (not a stream): how some proxies answer a streamed
    request. A non-bytes `body` is sent as its JSON."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()

    async def answer(seen: Seen, write: Writer) -> None:
        await write(
            f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
            + data
        )

    return answer


def openai_whole_text(text: str) -> dict[str, Any]:
    """A non-streamed chat completion."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


def openai_whole_tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ]
    }


def anthropic_whole_text(text: str) -> dict[str, Any]:
    """A non-streamed Messages API answer."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
    }


def anthropic_whole_tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": call_id, "name": name, "input": args},
        ],
        "stop_reason": "tool_use",
    }


WHOLE_TEXT = {"openai": openai_whole_text, "anthropic": anthropic_whole_text}
WHOLE_TOOL_CALL = {"openai": openai_whole_tool_call, "anthropic": anthropic_whole_tool_call}


# --- OpenAI chat completions --------------------------------------------------------------


def openai_text(*parts: str, pause: trio.Event | None = None) -> Answer:
    chunks: list[tuple[str | None, Any]] = [
        (None, {"choices": [{"index": 0, "delta": {"content": p}}]}) for p in parts
    ]
    chunks.append((None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    chunks.append((None, "[DONE]"))
    return sse(chunks, pause=pause)


def openai_tool_call(call_id: str, name: str, args: dict[str, Any]) -> Answer:
    """A tool call streamed in fragments, its arguments split mid-JSON."""
    raw = json.dumps(args)
    half = len(raw) // 2
    first = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": raw[:half]},
    }
    second = {"index": 0, "function": {"arguments": raw[half:]}}
    return sse(
        [
            (None, {"choices": [{"index": 0, "delta": {"tool_calls": [first]}}]}),
            (None, {"choices": [{"index": 0, "delta": {"tool_calls": [second]}}]}),
            (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            (None, "[DONE]"),
        ]
    )


# --- Anthropic Messages -------------------------------------------------------------------


def _message_events(
    blocks: list[list[tuple[str | None, Any]]], stop: str
) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {"id": "msg_1", "role": "assistant", "content": []},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for block in blocks:
        events += block
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_text(*parts: str, pause: trio.Event | None = None) -> Answer:
    block: list[tuple[str | None, Any]] = [
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
    ]
    block += [
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
        )
        for p in parts
    ]
    block.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events = _message_events([block], "end_turn")
    if pause is not None:  # pause after the first text delta, not after message_start
        # message_start, ping, content_block_start, then the first text delta
        return _paused(events, 4, pause)
    return sse(events)


def _paused(events: list[tuple[str | None, Any]], after: int, pause: trio.Event) -> Answer:
    async def answer(seen: Seen, write: Writer) -> None:
        await sse(events[:after])(seen, write)
        await pause.wait()
        for name, payload in events[after:]:
            await write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())

    return answer


def anthropic_tool_call(call_id: str, name: str, args: dict[str, Any]) -> Answer:
    raw = json.dumps(args)
    half = len(raw) // 2
    block: list[tuple[str | None, Any]] = [
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": raw[:half]},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": raw[half:]},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]
    return sse(_message_events([block], "tool_use"))


TEXT = {"openai": openai_text, "anthropic": anthropic_text}
TOOL_CALL = {"openai": openai_tool_call, "anthropic": anthropic_tool_call}


async def stall(seen: Seen, write: Writer) -> None:
    """Never answer: the client's own timeout, or its caller's, has to end the wait."""
    await trio.sleep_forever()


def trickling(start: Answer | None = None, every: float = 0.05) -> Answer:
    """`start` (by default a 200 event stream's headers alone), then an event-stream comment
    every `every` seconds, for ever: an answer that never ends, though its bytes come well
    within any read timeout."""

    async def answer(seen: Seen, write: Writer) -> None:
        if start is None:
            await write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        else:
            await start(seen, write)
        while True:
            await write(b": still thinking\n\n")
            await trio.sleep(every)

    return answer


def late(answer: Answer, seconds: float) -> Answer:
    async def answer_late(seen: Seen, write: Writer) -> None:
        await trio.sleep(seconds)
        await answer(seen, write)

    return answer_late


def gated(answer: Answer, gate: str) -> Answer:
    async def answer_when_open(seen: Seen, write: Writer) -> None:
        # Another process opens the gate: there is no event to await across processes.
        while not await trio.Path(gate).exists():  # noqa: ASYNC110
            await trio.sleep(0.02)
        await answer(seen, write)

    return answer_when_open


SUMMARY_ANSWER = "SUMMARY:\nwhat was said\nFACTS:\n- the one fact"


def summary_gated(turn: Answer, mark: str, gate: str) -> Answer:
    """Turns answered as `turn`; a compaction's summary request (ADR 0059) creates the
    file `mark`, then is answered SUMMARY_ANSWER once the file `gate` exists."""
    from zeroclaw.providers import SUMMARY_INSTRUCTIONS

    async def answer(seen: Seen, write: Writer) -> None:
        messages = seen.body.get("messages") or [{}]
        if str(messages[0].get("content", "")).startswith(SUMMARY_INSTRUCTIONS):
            await trio.Path(mark).touch()
            # The asker may be gone by then (killed while it waited): its answer is lost.
            with contextlib.suppress(trio.BrokenResourceError):
                await gated(openai_text(SUMMARY_ANSWER), gate)(seen, write)
        else:
            await turn(seen, write)

    return answer


async def _serve_forever(kind: str, *args: str) -> None:
    """Answer every request with one streamed sentence; print the port first."""
    fixed = TEXT.get(kind, openai_text)("fake ", kind, " answers")
    script: list[Answer] = [stall] if kind == "stall-once" else []
    default = {"stall": stall, "slow": late(fixed, 2.0)}.get(kind, fixed)
    if kind == "gated":
        default = gated(fixed, args[0])
    if kind == "status":
        default = status(int(args[0]), "failing on purpose")
    if kind == "summary-gated":
        default = summary_gated(openai_text("fake answer"), args[0], args[1])
    log = args[0] if kind == "counted" else args[1] if kind == "gated" and args[1:] else None
    server = ScriptedServer(script, default=default, log=log)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print(server.port, flush=True)


if __name__ == "__main__":
    trio.run(_serve_forever, *sys.argv[1:])
