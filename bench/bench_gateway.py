"""Gateway overhead (issue 29 #6): one turn of an offline agent through the OpenAI-compatible
API with the official `openai` SDK, non-streamed (the whole completion) and streamed (its
first text chunk), beside the same turn over the control socket in the same daemon (the
whole turn; its first delta).

All sides run in the same daemon and are interleaved in blocks, so whatever else loads the
machine hits them alike; the differences of the medians are what count (target: at most
2 ms more at p50). Every turn has a session of its own on every side, so no side carries a
longer history than another. A diagnostic side sends the same non-streamed request with a
minimal keep-alive socket client: the SDK's own CPU (pydantic models, httpx) competes with
the daemon and the agent on a 2-core machine, and this separates it from the gateway's
share."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import openai

from zeroclaw.control import Chat, ControlSession

from ._daemon import ReadyDaemon
from ._harness import (
    Result,
    free_port,
    keepalive_socket,
    p50_p99,
    read_response,
    recv_some,
    result,
    wait_http,
)

TOKEN = "bench-gateway-token"
TOKEN_ENV = "BENCH_API_TOKEN"
TEXT = "hello"

WARMUP = 20
BLOCK = 25  # this many of each side in turn, and again
BLOCKS = 8  # 200 of each

_SESSIONS = itertools.count()


def _session() -> str:
    return f"bench-{next(_SESSIONS)}"


def with_gateway(port: int) -> Callable[[dict[str, Any]], None]:
    """The bench config plus a gateway whose token reaches alpha, its sender admitted."""

    def edit(doc: dict[str, Any]) -> None:
        doc["gateway"] = {
            "listen": f"127.0.0.1:{port}",
            "tokens": {
                "bench": {
                    "token_env": TOKEN_ENV,
                    "sender": "bench",
                    "agents": ["alpha"],
                    "rate_limit_per_minute": 1_000_000,  # turns are measured, not the limiter
                }
            },
        }
        doc["peer_groups"]["api"] = {
            "channel": "api.bench",
            "agents": ["alpha"],
            "external_peers": ["bench"],
        }

    return edit


class _Chat:
    """Turns of alpha over one control socket connection: `first` stops the clock at the
    first delta (the rest is read, untimed)."""

    def __init__(self, daemon: ReadyDaemon) -> None:
        self.conn = ControlSession(daemon.runtime_dir, timeout=60)

    def turn(self, first: bool) -> float:
        started = time.perf_counter()
        took: float | None = None
        self.conn.send(Chat(agent="alpha", text=TEXT, session=_session()))
        for reply in self.conn.replies():
            assert reply.ok, reply
            data = reply.data
            if took is None and first and isinstance(data, dict) and data.get("event") == "delta":
                took = time.perf_counter() - started
        return (took if took is not None else time.perf_counter() - started) * 1000

    def close(self) -> None:
        self.conn.close()


class _Api:
    """Turns of alpha through the gateway with the official SDK (one kept-alive connection):
    `first` streams and stops the clock at the first chunk with text."""

    def __init__(self, port: int) -> None:
        self.client = openai.OpenAI(
            api_key=TOKEN, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=60
        )

    def turn(self, first: bool) -> float:
        messages: Any = [{"role": "user", "content": TEXT}]
        started = time.perf_counter()
        if not first:
            answer = self.client.chat.completions.create(
                model="alpha", messages=messages, user=_session()
            )
            assert answer.choices[0].message.content
            return (time.perf_counter() - started) * 1000
        took: float | None = None
        stream = self.client.chat.completions.create(
            model="alpha", messages=messages, user=_session(), stream=True
        )
        for chunk in stream:
            if took is None and chunk.choices and chunk.choices[0].delta.content:
                took = time.perf_counter() - started
        assert took is not None
        return took * 1000

    def close(self) -> None:
        self.client.close()


class _RawApi:
    """The same requests on a bare keep-alive socket with a minimal HTTP/1.1 reader: the
    round trip without the SDK's client-side work. `first` streams and stops the clock at
    the first chunk with text (the rest, up to the chunked body's end, read untimed)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = keepalive_socket(port)

    def turn(self, first: bool) -> float:
        asked: dict[str, object] = {
            "model": "alpha",
            "user": _session(),
            "messages": [{"role": "user", "content": TEXT}],
        }
        if first:
            asked["stream"] = True
        body = json.dumps(asked).encode()
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\n"
            f"authorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body
        read = self._streamed if first else self._response
        started = time.perf_counter()
        try:
            self.sock.sendall(request)
            took = read(started)
        except ConnectionError:  # the server closed an idle keep-alive connection
            self.sock.close()
            self.sock = keepalive_socket(self.port)
            started = time.perf_counter()
            self.sock.sendall(request)
            took = read(started)
        return took * 1000

    def _streamed(self, started: float) -> float:
        """Until the first chunk with text (timed), then to the chunked body's end."""
        data = b""
        took: float | None = None
        while not data.endswith(b"\r\n0\r\n\r\n"):
            data += recv_some(self.sock)
            if took is None and b'"content":"' in data.partition(b"\r\n\r\n")[2]:
                took = time.perf_counter() - started
        assert data.startswith(b"HTTP/1.1 200"), data[:200]
        assert took is not None, data[:200]
        return took

    def _response(self, started: float) -> float:
        status = read_response(self.sock)
        assert status == 200, status
        return time.perf_counter() - started

    def close(self) -> None:
        self.sock.close()


def _latency(daemon: ReadyDaemon, port: int) -> dict[str, dict[str, float]]:
    chat, api, raw = _Chat(daemon), _Api(port), _RawApi(port)
    sides: dict[str, Callable[[], float]] = {
        "chat": lambda: chat.turn(first=False),
        "api": lambda: api.turn(first=False),
        "chat first": lambda: chat.turn(first=True),
        "api first": lambda: api.turn(first=True),
        "api raw": lambda: raw.turn(first=False),
        "api raw first": lambda: raw.turn(first=True),
    }
    samples: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for side in sides.values():
            for _ in range(WARMUP):
                side()
        for _ in range(BLOCKS):
            for name, side in sides.items():
                samples[name] += [side() for _ in range(BLOCK)]
    finally:
        chat.close()
        api.close()
        raw.close()
    return {name: p50_p99(values) for name, values in samples.items()}


def run() -> list[Result]:
    port = free_port()
    daemon = ReadyDaemon(["alpha"], edit=with_gateway(port), env={TOKEN_ENV: TOKEN})
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        latency = _latency(daemon, port)
    finally:
        daemon.close()
    chat, api = latency["chat"], latency["api"]
    chat_first, api_first = latency["chat first"], latency["api first"]
    raw, raw_first = latency["api raw"], latency["api raw first"]
    return [
        result(
            "API turn p50, openai SDK (offline agent)",
            api["p50"],
            "ms",
            "chat turn p50 (control socket, same daemon)",
            chat["p50"],
        ),
        result(
            "API turn p50 minus chat turn p50",
            api["p50"] - chat["p50"],
            "ms",
            "the target's allowance",
            2.0,
            "<= 2 ms",
        ),
        result(
            "API first streamed token p50, openai SDK",
            api_first["p50"],
            "ms",
            "chat first delta p50 (control socket, same daemon)",
            chat_first["p50"],
        ),
        result(
            "API first token p50 minus chat first delta p50",
            api_first["p50"] - chat_first["p50"],
            "ms",
            "the target's allowance",
            2.0,
            "<= 2 ms",
        ),
        result(
            "API turn p99, openai SDK",
            api["p99"],
            "ms",
            "chat turn p99 (control socket, same daemon)",
            chat["p99"],
        ),
        result(
            "API turn p50, minimal HTTP client (no SDK)",
            raw["p50"],
            "ms",
            "chat turn p50 (control socket, same daemon)",
            chat["p50"],
            "diagnostic",
        ),
        result(
            "API p50 minus chat p50, minimal client",
            raw["p50"] - chat["p50"],
            "ms",
            "the target's allowance",
            2.0,
            "diagnostic",
        ),
        result(
            "API first token p50 minus chat first delta p50, minimal client",
            raw_first["p50"] - chat_first["p50"],
            "ms",
            "the target's allowance",
            2.0,
            "diagnostic",
        ),
    ]
