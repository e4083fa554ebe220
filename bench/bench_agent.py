"""Turn overhead: a chat message in, the reply out, through control socket, daemon, router
and the agent process, beside its baseline: with the offline provider the raw relay round
trip; with an OpenAI-compatible loopback model that answers at once (bench/_echo_server.py
`chat`), the bare httpx request to that model, whole and to its first event beside the
turn's first delta (issue 31 #3); a turn with one `memory_store` call
beside the same turn without it; and a turn given the records recalled for its text from
100k beside the same turn of an agent that recalls nothing (ADR 0059)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import tomli_w

from zeroclaw.control import Chat, ControlSession
from zeroclaw.memory import MemoryStore, Scope, WriteOp
from zeroclaw.turns import StoreArgs

from ._daemon import REPO, ReadyDaemon, write_bench_config
from ._harness import Result, free_port, p50_p99, result, wait_http
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


# --- a turn with a network provider, beside the bare HTTP request it makes (issue 17 #3) ---

NET_TURNS = 300
NET_BLOCK = 25  # samples alternate between the sides in blocks, so noise hits both alike


class _NetDaemon:
    """The bench config, with alpha on an openai provider at `url` (a model that answers at
    once) and a profile that lets it store memories without asking."""

    def __init__(self, url: str, *, debug_log: Path | None = None) -> None:
        """`debug_log`: the daemon logs at debug to that file (the turn's spans)."""
        self.root = Path(tempfile.mkdtemp(prefix="zcb-", dir="/tmp"))
        path = write_bench_config(self.root, ["alpha"])
        doc = tomllib.loads(path.read_text())
        doc["providers"]["openai"] = {"local": {"base_url": url, "model": "bench"}}
        doc["risk_profiles"]["w"] = {
            "level": "supervised",
            "require_approval_for_medium_risk": False,
        }
        doc["agents"]["alpha"]["model_provider"] = "openai.local"
        doc["agents"]["alpha"]["risk_profile"] = "w"
        doc["runtime_profiles"]["d"]["max_actions_per_hour"] = 1_000_000  # not the limiter
        if debug_log is not None:
            doc["daemon"]["log_level"] = "debug"
        path.write_text(tomli_w.dumps(doc))
        self.runtime_dir = self.root / "r"
        notify = self.root / "n.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(notify))
        self.sock.settimeout(60)
        env = {**os.environ, "NOTIFY_SOCKET": str(notify), "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zeroclaw", "--config", str(path), "daemon"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if debug_log is None else debug_log.open("wb"),
        )
        while b"READY=1" not in self.sock.recv(4096):
            pass

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.sock.close()
        shutil.rmtree(self.root, ignore_errors=True)


class _Bare:
    """The provider call alone: one kept-alive httpx connection posting the streamed request
    an agent sends for a plain turn, reading the event stream to its end."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30)
        self.payload = {
            "model": "bench",
            "messages": [{"role": "user", "content": "hello"}],
            "stream": True,
        }

    def __call__(self) -> float:
        """Returns when its first event arrived (perf_counter)."""
        first = 0.0
        with self.client.stream("POST", "chat/completions", json=self.payload) as response:
            for line in response.iter_lines():
                if not first and line.startswith("data:"):
                    first = time.perf_counter()
        return first

    def close(self) -> None:
        self.client.close()


class _Turn:
    def __init__(self, runtime_dir: Path, text: str, session: str) -> None:
        self.session = ControlSession(runtime_dir, timeout=30)
        self.session.__enter__()
        self.text = text
        self.name = session
        self.count = 0

    def __call__(self) -> float:
        """Returns when its first delta arrived (perf_counter)."""
        # A session of its own per turn: back to back in one session, a turn would wait for
        # the previous turn's transcript commit, which a person typing never does (ADR 0038).
        self.count += 1
        self.session.send(Chat(agent="alpha", text=self.text, session=f"{self.name}-{self.count}"))
        first = 0.0
        for reply in self.session.replies():
            assert reply.ok, reply
            data = reply.data
            if not first and isinstance(data, dict) and data.get("event") == "delta":
                first = time.perf_counter()
        return first

    def close(self) -> None:
        self.session.close()


def _net_latency(debug_log: Path | None = None) -> dict[str, dict[str, float]]:
    """p50/p99 in ms of a bare request, a plain turn and a turn with one memory_store call,
    against one local model server, interleaved in blocks; and of the bare request's first
    event and the plain turn's first delta ("bare first", "turn first")."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench._echo_server", str(port), "chat"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    daemon = None
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        daemon = _NetDaemon(url, debug_log=debug_log)
        samples: dict[str, list[float]] = {
            "bare": [],
            "turn": [],
            "store": [],
            "bare first": [],
            "turn first": [],
        }
        rounds = NET_TURNS // NET_BLOCK
        for block in range(rounds + 1):  # the first block is the warm-up
            ops: dict[str, _Bare | _Turn] = {
                "bare": _Bare(url),
                "turn": _Turn(daemon.runtime_dir, "hello", f"plain-{block}"),
                "store": _Turn(daemon.runtime_dir, "remember k", f"store-{block}"),
            }
            try:
                for name, op in ops.items():
                    op()  # a new connection's first request is not a turn's cost
                    for _ in range(NET_BLOCK):
                        started = time.perf_counter()
                        first = op()
                        if block:
                            samples[name].append((time.perf_counter() - started) * 1000)
                            if name != "store":
                                samples[f"{name} first"].append((first - started) * 1000)
            finally:
                for op in ops.values():
                    op.close()
    finally:
        if daemon is not None:
            daemon.close()
        server.terminate()
        server.wait(30)
    return {name: p50_p99(values) for name, values in samples.items()}


# --- a turn with recall, beside one without (issue 27 #1) -----------------------------------

RECALL_RECORDS = 100_000
RECALL_TURNS = 400
RECALL_WORDS = 12  # a turn's text


def _fill(path: Path, aliases: tuple[str, ...], rng: random.Random, vocab: list[str]) -> None:
    """Each agent's namespace holds RECALL_RECORDS records of 20 words, before the start."""
    store = MemoryStore(path, map_size=1 << 32)
    try:
        for alias in aliases:
            for start in range(0, RECALL_RECORDS, 2000):
                store.apply_writes(
                    [
                        WriteOp(
                            Scope(alias),
                            StoreArgs(key=f"k{i}", content=" ".join(rng.choices(vocab, k=20))),
                        )
                        for i in range(start, start + 2000)
                    ]
                )
    finally:
        store.close()


def _recall_latency() -> dict[str, dict[str, float]]:
    """p50/p99 in ms of offline chat turns of `alpha` (recall on, the default: the 5 best
    of 100k records within 1000 tokens) and `beta` (recall = false, the same records), on
    the same texts, alternating in blocks; each turn in a session of its own."""
    rng = random.Random(27)
    vocab = [f"w{i}" for i in range(5000)]

    def edit(doc: dict[str, Any]) -> None:
        doc["agents"]["beta"]["memory"] = {"recall": False}
        _fill(Path(doc["daemon"]["state_dir"]) / "memory", ("alpha", "beta"), rng, vocab)

    daemon = ReadyDaemon(["alpha", "beta"], edit=edit)
    samples: dict[str, list[float]] = {"alpha": [], "beta": []}
    try:
        with ControlSession(daemon.runtime_dir, timeout=30) as session:
            for block in range(RECALL_TURNS // NET_BLOCK + 1):  # the first is the warm-up
                texts = [" ".join(rng.choices(vocab, k=RECALL_WORDS)) for _ in range(NET_BLOCK)]
                for agent in ("alpha", "beta"):
                    for i, text in enumerate(texts):
                        started = time.perf_counter()
                        session.send(Chat(agent=agent, text=text, session=f"r{block}-{i}"))
                        for reply in session.replies():
                            assert reply.ok, reply
                        if block:
                            samples[agent].append((time.perf_counter() - started) * 1000)
    finally:
        daemon.close()
    return {agent: p50_p99(values) for agent, values in samples.items()}


def run() -> list[Result]:
    recall = _recall_latency()
    net = _net_latency()
    bare, turn, store = net["bare"], net["turn"], net["store"]
    bare_first, turn_first = net["bare first"], net["turn first"]
    # The tool call costs a second model request by nature; what the turn adds is the rest.
    store_added = store["p50"] - turn["p50"] - bare["p50"]
    plain = _turns("hello")
    peer = _turns("ask beta: hello")
    raw = _raw_latency(curve=True)  # the bus uses CURVE (ADR 0037)
    return [
        result(
            "chat turn p50 (offline, no tools)",
            plain[0],
            "ms",
            "raw CURVE relay echo round trip p50",
            raw["p50"],
            "<= 5 ms",
        ),
        result(
            "turn p50, openai loopback model",
            turn["p50"],
            "ms",
            "bare httpx streamed request p50, same server",
            bare["p50"],
            f"<= +2 ms (now +{turn['p50'] - bare['p50']:.2f} ms)",
        ),
        result(
            "turn first delta p50, openai loopback model",
            turn_first["p50"],
            "ms",
            "bare httpx streamed request's first event p50",
            bare_first["p50"],
            f"<= +2 ms (now +{turn_first['p50'] - bare_first['p50']:.2f} ms)",
        ),
        result(
            "turn p99, openai loopback model",
            turn["p99"],
            "ms",
            "bare httpx streamed request p99, same server",
            bare["p99"],
            f"+{turn['p99'] - bare['p99']:.2f} ms",
        ),
        result(
            "turn p50 with one memory_store call",
            store["p50"],
            "ms",
            "turn p50 without it (above)",
            turn["p50"],
            f"<= +1 ms beyond its 2nd model request: +{store_added:.2f} ms",
        ),
        result(
            "turn p99 with one memory_store call",
            store["p99"],
            "ms",
            "turn p99 without it",
            turn["p99"],
        ),
        result("chat turn p99 (offline, no tools)", plain[1], "ms", "raw relay p99", raw["p99"]),
        result(
            f"chat turn p50 with recall over {RECALL_RECORDS} records",
            recall["alpha"]["p50"],
            "ms",
            "the same turns of an agent with recall = false",
            recall["beta"]["p50"],
            f"<= +3 ms (now +{recall['alpha']['p50'] - recall['beta']['p50']:.2f} ms)",
        ),
        result(
            f"chat turn p99 with recall over {RECALL_RECORDS} records",
            recall["alpha"]["p99"],
            "ms",
            "the same turns of an agent with recall = false",
            recall["beta"]["p99"],
        ),
        result(
            "chat turn p50, alpha asks beta",
            peer[0],
            "ms",
            "raw CURVE relay echo round trip p50",
            raw["p50"],
        ),
    ]
