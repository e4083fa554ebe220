"""The bare HTTP baseline of the channels bench: hypercorn's trio worker behind the same
guarded accept loop the webhook adapter serves through (`serve_guarded`, ADR 0045), serving
an ASGI app that answers the posted body and does nothing else.

`python -m bench._echo_server PORT` serves on 127.0.0.1:PORT until SIGTERM;
`python -m bench._echo_server PORT chat` serves `chat_completions` instead: an OpenAI-compatible
model that answers at once (the agent bench's provider); `python -m bench._echo_server PORT chat
SECS` one that thinks SECS seconds before each answer (the scale bench's model), with room for
thousands of connections at once, as a model server has."""

from __future__ import annotations

import functools
import json
import socket
import sys

import trio
from hypercorn.typing import ASGIFramework, ASGIReceiveCallable, ASGISendCallable, Scope

from zeroclaw._asgi import answer_lifespan, serve_guarded
from zeroclaw._http_guard import HttpBounds


async def echo(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    if scope["type"] == "lifespan":
        await answer_lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return  # the client went away
        chunks.append(message["body"])
        if not message["more_body"]:
            break
    body = b"".join(chunks)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _sse(chunks: list[object]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


TEXT_ANSWER = _sse(
    [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
)
STORE_CALL = {
    "index": 0,
    "id": "call_1",
    "type": "function",
    "function": {"name": "memory_store", "arguments": '{"key": "k", "content": "v"}'},
}
TOOL_ANSWER = _sse(
    [
        {"choices": [{"index": 0, "delta": {"tool_calls": [STORE_CALL]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
)


def chat_answer(request: bytes) -> bytes:
    """The streamed answer to one chat-completions request: a `memory_store` call when the
    user's message starts with "remember" and no tool answered yet, else the text "ok"."""
    try:
        messages = json.loads(request).get("messages", [])
    except (ValueError, AttributeError):
        return TEXT_ANSWER
    last = messages[-1] if messages else {}
    if last.get("role") == "user" and str(last.get("content", "")).startswith("remember"):
        return TOOL_ANSWER
    return TEXT_ANSWER


async def chat_completions(
    scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable, think_secs: float = 0.0
) -> None:
    """Streamed chat completions answered as one body, after `think_secs` (0: at once)."""
    if scope["type"] != "http":
        await echo(scope, receive, send)
        return
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return
        chunks.append(message["body"])
        if not message["more_body"]:
            break
    body = chat_answer(b"".join(chunks)) if scope["method"] == "POST" else b""
    if think_secs and scope["method"] == "POST":
        await trio.sleep(think_secs)
    headers = [
        (b"content-type", b"text/event-stream"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def main(port: int, app: str = "echo", think_secs: float = 0.0) -> None:
    # The adapter's socket and server (zeroclaw/channels/_webhook.py `serve`), default bounds;
    # a model that thinks holds a connection per request in flight: room for them all.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096 if think_secs else 128)
    bounds = HttpBounds(max_connections=8192) if think_secs else HttpBounds()
    app_fn: ASGIFramework = echo
    if app == "chat":
        app_fn = functools.partial(chat_completions, think_secs=think_secs)
    await serve_guarded(app_fn, sock, name="bench.echo", bounds=bounds, log_name="bench.echo")


if __name__ == "__main__":
    trio.run(
        main,
        int(sys.argv[1]),
        sys.argv[2] if len(sys.argv) > 2 else "echo",
        float(sys.argv[3]) if len(sys.argv) > 3 else 0.0,
    )
