"""Webhook channel overhead: a signed `POST /v1/channels/hook/messages` to an offline agent
(hypercorn, signature and replay checks, rate limiter, JSON in and out, the routed turn),
beside a chat turn through the control socket in the same daemon, and beside a bare HTTP echo
on the same server library and settings (bench/_echo_server.py) in its own process.

All sides are measured in the same run and interleaved (latency in blocks, throughput in
rounds) so that whatever else loads the machine hits them alike; the ratios are what count.
The HTTP clients are httpx.Client with keep-alive (one connection per client), and they sign
every request, the echo's too, so the client-side work is the same on both HTTP sides. A
diagnostic side repeats both HTTP round trips with a minimal keep-alive socket client: on a
2-core machine httpx's own CPU (about 2 ms a request) competes with the daemon and the agent,
and this separates it from the server's share of the gap to a chat turn."""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from zeroclaw.channels import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from zeroclaw.control import Chat, ControlSession

from ._daemon import REPO, WEBHOOK_ALIAS, ReadyDaemon
from ._harness import (
    Result,
    concurrent_rate,
    free_port,
    keepalive_socket,
    p50_p99,
    read_response,
    result,
    wait_http,
)

SECRET = "bench-webhook-secret"
PATH = f"/v1/channels/{WEBHOOK_ALIAS}/messages"
TEXT = "hello"

WARMUP = 20
BLOCK = 50  # latency: this many of each side in turn, and again
BLOCKS = 6  # 300 of each
CLIENTS = 8  # throughput: concurrent clients, each its own thread and connection
PER_CLIENT = 25  # requests per client in one round
ROUNDS = 3  # throughput rounds of each side, alternating


_BODIES = itertools.count(1)  # every signed body of this run: never one twice


@dataclass
class _Signer:
    """Signed, never-repeated bodies: the adapter refuses a signature seen within its replay
    window, and a body repeated within one timestamp second would repeat its signature. The
    counter is spelled in insignificant JSON whitespace, at a constant body length, so every
    request carries the same `{sender, text, session}` and the same number of bytes. The
    counter is shared by every signer of the run: two signers for one sender (a client of
    the next round) never sign the same body in the same second."""

    sender: str
    session: str
    _parts: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._parts = [
            b"{",
            b'"sender":',
            f'"{self.sender}",'.encode(),
            b'"text":',
            f'"{TEXT}",'.encode(),
            b'"session":',
            f'"{self.session}"'.encode(),
            b"}",
        ]

    def next(self) -> tuple[bytes, dict[str, str]]:
        digits = f"{next(_BODIES) % 10**7:07d}"
        out = [self._parts[0]]
        for digit, part in zip(digits, self._parts[1:], strict=True):
            pad = int(digit)
            out += [b" " * pad, part, b" " * (9 - pad)]
        body = b"".join(out)
        stamp = str(int(time.time()))
        headers = {
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(SECRET.encode(), stamp, body),
            "content-type": "application/json",
        }
        return body, headers


class _Http:
    """One HTTP client (one kept-alive connection) posting signed messages to one URL."""

    def __init__(self, url: str, sender: str, session: str, *, check_reply: bool) -> None:
        self.url = url
        self.client = httpx.Client(timeout=60, limits=httpx.Limits(max_connections=1))
        self.signer = _Signer(sender, session)
        self.check_reply = check_reply

    def __call__(self) -> None:
        body, headers = self.signer.next()
        answer = self.client.post(self.url, content=body, headers=headers)
        assert answer.status_code == 200, answer.text
        if self.check_reply:
            assert answer.json()["agent"] == "alpha", answer.text

    def close(self) -> None:
        self.client.close()


class _RawHttp:
    """The same signed requests on a bare keep-alive socket with a minimal HTTP/1.1 reader: the
    round trip without httpx's client-side work (about 2 ms of CPU a request here), which on
    a 2-core machine competes with the server for the CPU."""

    def __init__(self, port: int, path: str, sender: str, session: str) -> None:
        self.port = port
        self.signer = _Signer(sender, session)
        self.head = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        self.sock = keepalive_socket(port)

    def __call__(self) -> None:
        body, headers = self.signer.next()
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = f"{self.head}{fields}content-length: {len(body)}\r\n\r\n".encode() + body
        try:
            self.sock.sendall(request)
            status = read_response(self.sock)
        except ConnectionError:  # the server closed an idle keep-alive connection
            self.sock.close()
            self.sock = keepalive_socket(self.port)
            self.sock.sendall(request)
            status = read_response(self.sock)
        assert status == 200, status

    def close(self) -> None:
        self.sock.close()


class _Chat:
    """One control socket connection sending chat turns to alpha."""

    def __init__(self, daemon: ReadyDaemon, session: str) -> None:
        self.conn = ControlSession(daemon.runtime_dir, timeout=60)
        self.session = session

    def __call__(self) -> None:
        self.conn.send(Chat(agent="alpha", text=TEXT, session=self.session))
        for reply in self.conn.replies():
            assert reply.ok, reply

    def close(self) -> None:
        self.conn.close()


Op = Callable[[], None]


def _timed(op: Op, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        op()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


class _Sides:
    """Where each side's requests go: the daemon's control socket and webhook, the echo."""

    def __init__(self, daemon: ReadyDaemon, hook_port: int, echo_port: int) -> None:
        self.daemon = daemon
        self.hook_port, self.echo_port = hook_port, echo_port
        self.hook_url = f"http://127.0.0.1:{hook_port}{PATH}"
        self.echo_url = f"http://127.0.0.1:{echo_port}{PATH}"

    def chat(self, i: int) -> _Chat:
        return _Chat(self.daemon, f"bench-{i}")

    def hook(self, i: int) -> _Http:
        return _Http(self.hook_url, f"sender-{i}", f"bench-{i}", check_reply=True)

    def echo(self, i: int) -> _Http:
        return _Http(self.echo_url, f"sender-{i}", f"bench-{i}", check_reply=False)

    def hook_raw(self, i: int) -> _RawHttp:
        return _RawHttp(self.hook_port, PATH, f"raw-sender-{i}", f"bench-raw-{i}")

    def echo_raw(self, i: int) -> _RawHttp:
        return _RawHttp(self.echo_port, PATH, f"raw-sender-{i}", f"bench-raw-{i}")


def _latency(sides: _Sides) -> dict[str, dict[str, float]]:
    """p50/p99 in ms of each side, sequential on one connection each, interleaved in blocks."""
    ops: dict[str, _Chat | _Http | _RawHttp] = {
        "chat": sides.chat(0),
        "hook": sides.hook(0),
        "echo": sides.echo(0),
        "hook raw": sides.hook_raw(0),
        "echo raw": sides.echo_raw(0),
    }
    samples: dict[str, list[float]] = {name: [] for name in ops}
    try:
        for op in ops.values():
            _timed(op, WARMUP)
        for _ in range(BLOCKS):
            for name, op in ops.items():
                samples[name] += _timed(op, BLOCK)
    finally:
        for op in ops.values():
            op.close()
    return {name: p50_p99(values) for name, values in samples.items()}


def _rate(make: Callable[[int], _Chat | _Http]) -> float:
    """Requests/s of CLIENTS clients, each doing PER_CLIENT requests one after another."""
    ops = [make(i) for i in range(CLIENTS)]
    try:
        return concurrent_rate(list(ops), PER_CLIENT)
    finally:
        for op in ops:
            op.close()


def _throughput(sides: _Sides) -> dict[str, float]:
    """Median requests/s of each side over alternating rounds, after one warm-up each."""
    makers: dict[str, Callable[[int], _Chat | _Http]] = {
        "chat": sides.chat,
        "hook": sides.hook,
        "echo": sides.echo,
    }
    for make in makers.values():
        _rate(make)
    rates: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(ROUNDS):
        for name, make in makers.items():
            rates[name].append(_rate(make))
    return {name: statistics.median(values) for name, values in rates.items()}


def run() -> list[Result]:
    hook_port, echo_port = free_port(), free_port()
    echo = subprocess.Popen(
        [sys.executable, "-m", "bench._echo_server", str(echo_port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    daemon = None
    try:
        daemon = ReadyDaemon(["alpha"], webhook_port=hook_port, webhook_secret=SECRET)
        wait_http(f"http://127.0.0.1:{hook_port}/readyz")
        wait_http(f"http://127.0.0.1:{echo_port}/healthz")  # any path: the echo answers 200
        sides = _Sides(daemon, hook_port, echo_port)
        latency = _latency(sides)
        rates = _throughput(sides)
    finally:
        if daemon is not None:
            daemon.close()
        echo.terminate()
        echo.wait(30)
    chat, hook, bare = latency["chat"], latency["hook"], latency["echo"]
    hook_raw, bare_raw = latency["hook raw"], latency["echo raw"]
    return [
        result(
            "webhook round trip p50 (offline agent)",
            hook["p50"],
            "ms",
            "chat turn p50 (control socket, same daemon)",
            chat["p50"],
            "<= chat p50 + 1 ms",
        ),
        result(
            "webhook p50 minus chat turn p50",
            hook["p50"] - chat["p50"],
            "ms",
            "the target's allowance",
            1.0,
            "<= 1 ms",
        ),
        result(
            "webhook round trip p99 (offline agent)",
            hook["p99"],
            "ms",
            "chat turn p99 (control socket, same daemon)",
            chat["p99"],
        ),
        result(
            "webhook round trip p50 (offline agent)",
            hook["p50"],
            "ms",
            "bare hypercorn echo p50 (same settings)",
            bare["p50"],
        ),
        result(
            "webhook round trip p99 (offline agent)",
            hook["p99"],
            "ms",
            "bare hypercorn echo p99 (same settings)",
            bare["p99"],
        ),
        result(
            "webhook p50, minimal HTTP client (no httpx)",
            hook_raw["p50"],
            "ms",
            "chat turn p50 (control socket, same daemon)",
            chat["p50"],
            "diagnostic",
        ),
        result(
            "webhook p50 minus chat p50, minimal client",
            hook_raw["p50"] - chat["p50"],
            "ms",
            "the target's allowance",
            1.0,
            "diagnostic",
        ),
        result(
            "bare echo p50, minimal HTTP client",
            bare_raw["p50"],
            "ms",
            "bare echo p50 with httpx",
            bare["p50"],
            "diagnostic",
        ),
        result(
            f"webhook requests/s ({CLIENTS} clients, senders)",
            rates["hook"],
            "1/s",
            f"chat turns/s ({CLIENTS} clients, one agent)",
            rates["chat"],
            ">= 0.5x",
        ),
        result(
            f"webhook requests/s ({CLIENTS} clients, senders)",
            rates["hook"],
            "1/s",
            f"bare hypercorn echo requests/s ({CLIENTS} clients)",
            rates["echo"],
        ),
    ]
