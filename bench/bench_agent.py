"""Turn overhead: a chat message in, the reply out, through control socket, daemon, router
and the agent process (offline provider), beside the raw relay round trip."""

from __future__ import annotations

import time

from zeroclaw.control import Chat, ControlSession

from ._daemon import ReadyDaemon
from ._harness import Result, p50_p99, result
from .bench_router import _raw_latency

TURNS = 500
WARMUP = 20


def _turns(text: str) -> tuple[float, float]:
    """p50/p99 in ms of TURNS chat turns with `text`, each waited for to the last reply."""
    daemon = ReadyDaemon(["alpha", "beta"], grouped=True)
    try:
        with ControlSession(daemon.runtime_dir, timeout=30) as session:
            samples = []
            for i in range(WARMUP + TURNS):
                started = time.perf_counter()
                session.send(Chat(agent="alpha", text=text, session="bench"))
                for reply in session.replies():
                    assert reply.ok, reply
                if i >= WARMUP:
                    samples.append((time.perf_counter() - started) * 1000)
    finally:
        daemon.close()
    latency = p50_p99(samples)
    return latency["p50"], latency["p99"]


def run() -> list[Result]:
    plain = _turns("hello")
    peer = _turns("ask beta: hello")
    raw = _raw_latency()
    return [
        result(
            "chat turn p50 (offline, no tools)",
            plain[0],
            "ms",
            "raw relay echo round trip p50",
            raw["p50"],
            "<= 5 ms",
        ),
        result("chat turn p99 (offline, no tools)", plain[1], "ms", "raw relay p99", raw["p99"]),
        result(
            "chat turn p50, alpha asks beta",
            peer[0],
            "ms",
            "raw relay echo round trip p50",
            raw["p50"],
        ),
    ]
