"""Sub-agent dispatch overhead: a trivial offline sub-agent run end to end (admission, the
runtime's turn, output schema check, every event persisted in LMDB, the reply) through the
control socket, beside a chat turn to an offline agent in the same daemon.

Both sides run in one daemon and are interleaved (latency in blocks, throughput in rounds)
so that whatever else loads the machine hits both alike; the ratios are what count."""

from __future__ import annotations

import functools
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from zeroclaw.control import Chat, ControlSession, Dispatch, DispatchReply

from ._daemon import REPO, ReadyDaemon
from ._harness import Result, concurrent_rate, p50_p99, result

SUMMARIZER = REPO / "etc" / "subagents" / "summarizer"
AGENT_ID = "summarizer"
TASK = "Summarise: the quick brown fox jumps over the lazy dog."

WARMUP = 20
BLOCK = 50  # latency: this many chat turns, then this many dispatches, and again
BLOCKS = 6  # 300 of each
CALLERS = 8  # throughput: concurrent connections, each its own thread
PER_CALLER = 25  # requests per connection in one round
ROUNDS = 3  # throughput rounds of each kind, alternating


def _bundles(where: Path) -> None:
    """The shipped summarizer, open to the operator only, eight at a time."""
    bundle = where / AGENT_ID
    shutil.copytree(SUMMARIZER, bundle)
    manifest_path = bundle / "agent.yaml"
    manifest = yaml.safe_load(manifest_path.read_text())
    manifest["policy"]["allowedCallers"] = ["cli"]
    manifest["policy"]["maxConcurrency"] = CALLERS
    manifest_path.write_text(yaml.safe_dump(manifest, sort_keys=False))


def _chat(session: ControlSession, name: str) -> None:
    session.send(Chat(agent="alpha", text="hello", session=name))
    for reply in session.replies():
        assert reply.ok, reply


def _dispatch(session: ControlSession, _name: str) -> None:
    session.send(Dispatch(agent_id=AGENT_ID, task=TASK))
    final = None
    for reply in session.replies(DispatchReply):
        final = reply
    assert final is not None
    assert final.ok, final
    data: DispatchReply | None = final.data
    assert data is not None
    assert data.invocation is not None, data
    assert data.invocation.state == "succeeded", data.invocation


Op = Callable[[ControlSession, str], None]


def _timed(session: ControlSession, op: Op, count: int, name: str) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        op(session, name)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _latency(daemon: ReadyDaemon) -> tuple[dict[str, float], dict[str, float]]:
    """p50/p99 in ms of (chat turns, dispatches), sequential on one connection."""
    chat: list[float] = []
    dispatch: list[float] = []
    with ControlSession(daemon.runtime_dir, timeout=60) as session:
        _timed(session, _chat, WARMUP, "bench")
        _timed(session, _dispatch, WARMUP, "bench")
        for _ in range(BLOCKS):
            chat += _timed(session, _chat, BLOCK, "bench")
            dispatch += _timed(session, _dispatch, BLOCK, "bench")
    return p50_p99(chat), p50_p99(dispatch)


def _rate(daemon: ReadyDaemon, op: Op) -> float:
    """Requests/s of CALLERS connections, each doing PER_CALLER requests one after another."""
    sessions = [ControlSession(daemon.runtime_dir, timeout=120) for _ in range(CALLERS)]
    try:
        return concurrent_rate(
            [functools.partial(op, sessions[i], f"bench-{i}") for i in range(CALLERS)],
            PER_CALLER,
        )
    finally:
        for session in sessions:
            session.close()


def _throughput(daemon: ReadyDaemon) -> tuple[float, float]:
    """Median (chat turns/s, dispatches/s) over alternating rounds, after one warm-up each."""
    _rate(daemon, _chat)
    _rate(daemon, _dispatch)
    chat, dispatch = [], []
    for _ in range(ROUNDS):
        chat.append(_rate(daemon, _chat))
        dispatch.append(_rate(daemon, _dispatch))
    return statistics.median(chat), statistics.median(dispatch)


def run() -> list[Result]:
    daemon = ReadyDaemon(["alpha"], subagents=_bundles)
    try:
        chat, dispatch = _latency(daemon)
        chat_rate, dispatch_rate = _throughput(daemon)
    finally:
        daemon.close()
    return [
        result(
            "dispatch p50 (offline sub-agent, persisted)",
            dispatch["p50"],
            "ms",
            "chat turn p50 (offline agent, same daemon)",
            chat["p50"],
            "<= 2x",
        ),
        result(
            "dispatch p99 (offline sub-agent, persisted)",
            dispatch["p99"],
            "ms",
            "chat turn p99 (offline agent, same daemon)",
            chat["p99"],
        ),
        result(
            f"dispatches/s ({CALLERS} callers, maxConcurrency {CALLERS})",
            dispatch_rate,
            "1/s",
            f"chat turns/s ({CALLERS} clients, one agent)",
            chat_rate,
            ">= 0.5x",
        ),
    ]
