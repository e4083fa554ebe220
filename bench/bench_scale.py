"""A thousand agents on one host (issue 31 #5, ADR 0069): `make bench scale`. A daemon with
1,000 on-demand and 100 always-on agents, every one on an OpenAI-compatible loopback model
that thinks 1 s before each answer (bench/_echo_server.py `chat SECS`, its own process).

- cold start to READY=1, PSS of the whole tree and its idle CPU (daemon, zygote, agents),
  each beside a 1-agent daemon on the same model measured in the same run;
- 200 turns at once spread over 50 agents (half always-on, half on-demand, started by a
  warm-up round first), through the control socket (a connection per turn, one program
  holding 200: `[daemon] control_limits` raised for it) and through the gateway's OpenAI
  API (an HTTP connection per turn), beside the same 200 requests sent straight to the
  model: the throughput against the ideal (200 turns per model latency), the p99 above
  the model's own, and the CPU each turn cost the daemon and the agents.

Rounds of the three sides are interleaved, so whatever else loads the machine hits them
alike. The clients are threads of this process on blocking sockets with a minimal HTTP
reader, the same for the model and the gateway: their own cost is in the baseline too.
BENCH_SCALE_ON_DEMAND, BENCH_SCALE_ALWAYS, BENCH_SCALE_ROUNDS and BENCH_SCALE_IDLE_SECS
make a smaller run (the chatters are still 50, of those configured)."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zeroclaw.control import Chat, ControlSession

from ._daemon import REPO, ReadyDaemon, process_tree
from ._harness import Result, free_port, keepalive_socket, read_response, result, wait_http

ON_DEMAND = int(os.environ.get("BENCH_SCALE_ON_DEMAND", 1000))
ALWAYS = int(os.environ.get("BENCH_SCALE_ALWAYS", 100))
CHATTERS = 50  # agents the turns are spread over
CONCURRENT = 200  # turns at once
THINK_SECS = 1.0  # the model's latency
ROUNDS = int(os.environ.get("BENCH_SCALE_ROUNDS", 3))  # of each side, interleaved
SETTLE_SECS = 5.0  # after READY, before the idle figures (discovery's first scan runs)
ROUND_SETTLE_SECS = 1.0  # after each round of turns at once, before the next
IDLE_SECS = float(os.environ.get("BENCH_SCALE_IDLE_SECS", 20))  # the idle CPU's window
READY_REPEAT = 3  # starts of the 1-agent daemon (the big one starts once: it is heavy)

TOKEN = "bench-scale-token"
TOKEN_ENV = "BENCH_API_TOKEN"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def on_demand_aliases(n: int = ON_DEMAND) -> list[str]:
    return [f"o{i:04d}" for i in range(n)]


def always_aliases(n: int = ALWAYS) -> list[str]:
    return [f"a{i:03d}" for i in range(n)]


def chatters() -> list[str]:
    """Half always-on, half on-demand, spread over the config."""
    half = CHATTERS // 2
    ons, offs = always_aliases(), on_demand_aliases()
    return ons[:: max(len(ons) // half, 1)][:half] + offs[:: max(len(offs) // half, 1)][:half]


def scale_config(
    model_url: str, always: list[str], on_demand: list[str], gateway_port: int
) -> Callable[[dict[str, Any]], None]:
    """The bench config's edit: every agent on the model, `on_demand` ones activated by their
    first message, and a gateway whose token reaches the chatters."""
    reach = [a for a in chatters() if a in always or a in on_demand]

    def edit(doc: dict[str, Any]) -> None:
        doc["providers"] = {"openai": {"model": {"base_url": model_url, "model": "bench"}}}
        # One program holding a control connection per turn in flight (ADR 0069).
        doc["daemon"]["control_limits"] = {"max_per_process": CONCURRENT}
        # Not the limiter: an agent here takes many turns an hour.
        doc["runtime_profiles"]["d"]["max_actions_per_hour"] = 1_000_000
        doc["runtime_profiles"]["od"] = {**doc["runtime_profiles"]["d"], "activation": "on-demand"}
        for alias, agent in doc["agents"].items():
            agent["model_provider"] = "openai.model"
            if alias in on_demand:
                agent["runtime_profile"] = "od"
        if reach:
            doc["gateway"] = {
                "listen": f"127.0.0.1:{gateway_port}",
                "tokens": {
                    "bench": {
                        "token_env": TOKEN_ENV,
                        "sender": "bench",
                        "agents": reach,
                        "rate_limit_per_minute": 1_000_000,  # turns are measured, not the limiter
                    }
                },
            }
            doc["peer_groups"]["api"] = {
                "channel": "api.bench",
                "agents": reach,
                "external_peers": ["bench"],
            }

    return edit


class Model:
    """The loopback model, its own process: `think` seconds before each answer."""

    def __init__(self, think: float) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench._echo_server", str(self.port), "chat", str(think)],
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            wait_http(f"http://127.0.0.1:{self.port}/healthz")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(
    model: Model, always: list[str], on_demand: list[str], gateway_port: int = 0
) -> ReadyDaemon:
    return ReadyDaemon(
        [*always, *on_demand],
        edit=scale_config(model.url, always, on_demand, gateway_port or free_port()),
        env={TOKEN_ENV: TOKEN},
    )


# --------------------------------------------------------------------------- idle figures


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process, all its threads, in clock ticks (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def tree_ticks(root: int) -> dict[int, int]:
    return {pid: cpu_ticks(pid) for pid in process_tree(root)}


def idle_cpu_percent(daemon: ReadyDaemon, secs: float = IDLE_SECS) -> float:
    """The whole tree's CPU over `secs` of idling, in % of one core (processes alive at
    both ends: the tree of an idle daemon does not change)."""
    before = tree_ticks(daemon.proc.pid)
    started = time.monotonic()
    time.sleep(secs)
    after = tree_ticks(daemon.proc.pid)
    elapsed = time.monotonic() - started
    used = sum(after[p] - before[p] for p in after if p in before)
    return 100.0 * used / CLK_TCK / elapsed


def load() -> float:
    return os.getloadavg()[0]


def cpu_by_kind(daemon: ReadyDaemon, model: Model) -> Counter[str]:
    """CPU ticks so far of the daemon, its agents (every process below the zygote) and the
    model's process."""
    tree = process_tree(daemon.proc.pid)
    return Counter(
        daemon=cpu_ticks(daemon.proc.pid),
        agents=sum(cpu_ticks(pid) for pid in tree[2:]),
        model=cpu_ticks(model.proc.pid),
    )


# --------------------------------------------------------------------------- turns at once


class Round:
    """One round of turns at once: wall time from the common start to the last answer,
    each turn's latency (ms) and what failed (by error)."""

    def __init__(self, elapsed: float, samples: list[float], failed: Counter[str]) -> None:
        self.elapsed = elapsed
        self.samples = samples
        self.failed = failed


def at_once(turns: list[Callable[[], None]]) -> Round:
    """Run every turn in its own thread, all released together; each sets up (connects)
    before the release and is timed from it."""
    gate = threading.Barrier(len(turns) + 1)
    samples: list[float] = []
    failed: Counter[str] = Counter()
    lock = threading.Lock()

    def run(turn: Callable[[], None]) -> None:
        try:
            gate.wait()
            started = time.perf_counter()
            turn()
            took = (time.perf_counter() - started) * 1000
            with lock:
                samples.append(took)
        except Exception as exc:  # counted, by kind: what broke is the finding
            with lock:
                failed[_failure(exc)] += 1

    threads = [threading.Thread(target=run, args=(t,)) for t in turns]
    for thread in threads:
        thread.start()
    gate.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return Round(time.perf_counter() - began, samples, failed)


def _failure(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text[:120]}"


class ControlTurns:
    """A control connection per slot (as many `zeroclaw chat` sessions), each slot its own
    session of its agent."""

    def __init__(self, daemon: ReadyDaemon, agents: list[str]) -> None:
        self.daemon = daemon
        self.slots = [agents[i % len(agents)] for i in range(CONCURRENT)]
        self.conns: list[ControlSession | None] = [None] * CONCURRENT

    def turn(self, i: int) -> Callable[[], None]:
        if self.conns[i] is None:
            self.conns[i] = ControlSession(self.daemon.runtime_dir, timeout=120)
        conn = self.conns[i]
        assert conn is not None

        def go() -> None:
            conn.send(Chat(agent=self.slots[i], text="hello", session=f"scale-{i}"))
            for reply in conn.replies():
                if not reply.ok:
                    self.conns[i] = None
                    raise RuntimeError(f"{reply.error}: {reply.message}")

        return go

    def round(self) -> Round:
        return at_once([self.turn(i) for i in range(CONCURRENT)])

    def close(self) -> None:
        for conn in self.conns:
            if conn is not None:
                conn.close()


class HttpTurns:
    """A kept-alive HTTP connection per slot, posting one chat completion per turn: to the
    gateway (`model` an agent, `user` the slot's session) or straight to the model."""

    def __init__(self, port: int, agents: list[str], token: str | None) -> None:
        self.port = port
        self.slots = [agents[i % len(agents)] for i in range(CONCURRENT)]
        self.token = token
        self.socks: list[Any] = [None] * CONCURRENT

    def turn(self, i: int) -> Callable[[], None]:
        body = json.dumps(
            {
                "model": self.slots[i],
                "user": f"scale-{i}",
                "messages": [{"role": "user", "content": "hello"}],
            }
        ).encode()
        auth = f"authorization: Bearer {self.token}\r\n" if self.token else ""
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\n{auth}"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body
        if self.socks[i] is not None:  # a connection the server closed idle: a new one
            self.socks[i].close()
        sock = self.socks[i] = keepalive_socket(self.port)

        def go() -> None:
            sock.sendall(request)
            status = read_response(sock)
            if status != 200:
                raise RuntimeError(f"HTTP {status}")

        return go

    def round(self) -> Round:
        return at_once([self.turn(i) for i in range(CONCURRENT)])

    def close(self) -> None:
        for sock in self.socks:
            if sock is not None:
                sock.close()


def summary(rounds: list[Round], ideal_secs: float) -> dict[str, float]:
    """Throughput (turns/s, median of the rounds), its ratio to the ideal (CONCURRENT turns
    per `ideal_secs`), p50/p99 over every turn (ms) and how many failed."""
    samples = sorted(s for r in rounds for s in r.samples)
    failed = sum(sum(r.failed.values()) for r in rounds)
    rate = statistics.median(len(r.samples) / r.elapsed for r in rounds)
    return {
        "rate": rate,
        "ideal": CONCURRENT / ideal_secs,
        "p50": statistics.median(samples) if samples else float("nan"),
        "p99": samples[max(int(len(samples) * 0.99) - 1, 0)] if samples else float("nan"),
        "failed": failed,
    }


def report_failures(name: str, rounds: list[Round]) -> None:
    failed: Counter[str] = Counter()
    for r in rounds:
        failed.update(r.failed)
    for what, n in failed.most_common(5):
        print(f"scale: {name}: {n} turns failed: {what}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the run


def run() -> list[Result]:
    model = Model(THINK_SECS)
    try:
        return _run(model)
    finally:
        model.close()


def _run(model: Model) -> list[Result]:
    ready_one: list[float] = []
    for _ in range(READY_REPEAT):
        daemon = start(model, ["a000"], [])
        ready_one.append(daemon.ready_secs)
        daemon.close()
    one = start(model, ["a000"], [])
    try:
        time.sleep(SETTLE_SECS)
        one_pss = one.pss_total_kb() / 1024
        one_load = load()
        one_cpu = idle_cpu_percent(one)
    finally:
        one.close()
    names = f"{ON_DEMAND} on-demand + {ALWAYS} always-on agents"
    port = free_port()
    big_load = load()
    big = start(model, always_aliases(), on_demand_aliases(), port)
    figures: dict[str, Any] = {}
    try:
        ready_big = big.ready_secs
        print(f"scale: {names}: READY in {ready_big:.2f} s (load {big_load:.2f})", file=sys.stderr)
        time.sleep(SETTLE_SECS)
        big_pss = big.pss_total_kb() / 1024
        idle_load = load()
        big_cpu = idle_cpu_percent(big)
        print(
            f"scale: idle {big_cpu:.2f} % of a core, PSS {big_pss:.0f} MB (load {idle_load:.2f})",
            file=sys.stderr,
        )
        wait_http(f"http://127.0.0.1:{port}/healthz")
        agents = chatters()
        control = ControlTurns(big, agents)
        api = HttpTurns(port, agents, TOKEN)
        direct = HttpTurns(model.port, agents, None)
        try:
            # The on-demand half starts here (timed as a diagnostic); both clients' sessions
            # exist from here on.
            warm = control.round()
            report_failures("warm-up (on-demand starts)", [warm])
            warm_api = api.round()
            report_failures("warm-up through the gateway", [warm_api])
            sides: dict[str, list[Round]] = {"model": [], "control": [], "gateway": []}
            cpu: dict[str, Counter[str]] = {name: Counter() for name in sides}
            turns_load = load()
            for _ in range(ROUNDS):
                for name, turns in (("model", direct), ("control", control), ("gateway", api)):
                    before = cpu_by_kind(big, model)
                    sides[name].append(turns.round())
                    # What a turn does after its answer (the transcript's append) is its
                    # round's, and does not compete with the next round.
                    time.sleep(ROUND_SETTLE_SECS)
                    cpu[name].update(cpu_by_kind(big, model))
                    cpu[name].subtract(before)
            for name, rounds in sides.items():
                report_failures(name, rounds)
        finally:
            control.close()
            api.close()
            direct.close()
        busy_pss = big.pss_total_kb() / 1024
        running = len(process_tree(big.proc.pid)) - 2  # less the daemon and the zygote
        figures = {name: summary(rounds, THINK_SECS) for name, rounds in sides.items()}
        warm_secs = warm.elapsed
    finally:
        big.close()
    base = "1-agent daemon on the same model"
    model_p99 = figures["model"]["p99"]
    rows = [
        result(
            f"cold start to READY=1, {names}",
            ready_big,
            "s",
            f"{base}, cold start to READY=1 (median of {READY_REPEAT}); load {big_load:.1f}",
            statistics.median(ready_one),
        ),
        result(
            f"PSS daemon + zygote + {ALWAYS} idle always-on agents ({ON_DEMAND} on-demand stopped)",
            big_pss,
            "MB",
            f"PSS of a {base}",
            one_pss,
        ),
        result(
            f"idle CPU of the whole tree, {names}",
            big_cpu,
            "% core",
            f"{base}, idle CPU over {IDLE_SECS:g} s; loads {idle_load:.1f} / {one_load:.1f}",
            one_cpu,
            "<= 1 % of a core",
        ),
        result(
            f"first turn of {CHATTERS // 2} on-demand agents at once (their starts)",
            warm_secs,
            "s",
            "the model's think time",
            THINK_SECS,
            "diagnostic",
        ),
        result(
            f"PSS after the turns ({running} agent processes)",
            busy_pss,
            "MB",
            "PSS at idle, before the turns",
            big_pss,
            "diagnostic",
        ),
    ]
    for side, label in (("control", "control socket"), ("gateway", "gateway OpenAI API")):
        got = figures[side]
        rows += [
            result(
                f"{CONCURRENT} turns at once over {CHATTERS} agents, {label}: throughput",
                got["rate"],
                "turns/s",
                f"ideal: {CONCURRENT} turns per {THINK_SECS:g} s of model latency; "
                f"load {turns_load:.1f}",
                got["ideal"],
                ">= 0.8 of the ideal",
            ),
            result(
                f"{CONCURRENT} turns at once, {label}: p99 above the model's p99",
                got["p99"] - model_p99,
                "ms",
                f"the model's own p99 ({model_p99:.0f} ms), {CONCURRENT} requests at once "
                "straight to it",
                50.0,
                "<= 50 ms",
            ),
            result(
                f"{CONCURRENT} turns at once, {label}: p50",
                got["p50"],
                "ms",
                "the model's own p50, straight to it",
                figures["model"]["p50"],
                "diagnostic",
            ),
            result(
                f"{CONCURRENT} turns at once, {label}: failed turns",
                got["failed"],
                "turns",
                f"turns sent ({ROUNDS} rounds)",
                CONCURRENT * ROUNDS,
                "0",
            ),
        ]
    per_turn = {
        side: {kind: ticks * 1000 / CLK_TCK / (CONCURRENT * ROUNDS) for kind, ticks in c.items()}
        for side, c in cpu.items()
    }
    for side, label in (("control", "control socket"), ("gateway", "gateway OpenAI API")):
        for kind in ("daemon", "agents"):
            rows.append(
                result(
                    f"CPU per turn, {label}: {kind}",
                    per_turn[side][kind],
                    "ms",
                    "the model server's CPU per request, straight to it",
                    per_turn["model"]["model"],
                    "diagnostic",
                )
            )
    rows.append(
        result(
            f"{CONCURRENT} requests at once straight to the model: throughput",
            figures["model"]["rate"],
            "turns/s",
            f"ideal: {CONCURRENT} per {THINK_SECS:g} s",
            figures["model"]["ideal"],
            "baseline",
        )
    )
    return rows
