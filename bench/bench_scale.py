"""A 100-agent daemon (offline provider): time to READY=1, PSS of the whole tree, and chat
turn latency through the control socket while the agents idle and while 10 of them chat at
once; each beside a 1-agent daemon measured in the same run."""

from __future__ import annotations

import statistics
import threading
import time

from zeroclaw.control import Chat, ControlSession

from ._daemon import ReadyDaemon
from ._harness import Result, p50_p99, result

AGENTS = 100
CONCURRENT = 10  # agents chatting at once, each through its own control connection
TURNS = 200  # measured turns of a lone chatter
TURNS_EACH = 40  # measured turns of each concurrent chatter
WARMUP = 10
READY_REPEAT = 3


def aliases(n: int) -> list[str]:
    return [f"a{i:03d}" for i in range(n)]


def median_ready(n: int, repeat: int = READY_REPEAT) -> float:
    samples = []
    for _ in range(repeat):
        daemon = ReadyDaemon(aliases(n))
        samples.append(daemon.ready_secs)
        daemon.close()
    return statistics.median(samples)


def _chat(daemon: ReadyDaemon, agent: str, turns: int, out: list[float]) -> None:
    """`turns` sequential turns with `agent` (after WARMUP), each to its last reply; ms."""
    with ControlSession(daemon.runtime_dir, timeout=60) as session:
        for i in range(WARMUP + turns):
            started = time.perf_counter()
            session.send(Chat(agent=agent, text="hello", session=f"bench-{agent}"))
            for reply in session.replies():
                assert reply.ok, reply
            if i >= WARMUP:
                out.append((time.perf_counter() - started) * 1000)


def turn_latency(daemon: ReadyDaemon, agents: list[str], turns: int) -> dict[str, float]:
    """p50/p99 (ms) of the turns of `agents` chatting at once, one thread each."""
    samples: list[list[float]] = [[] for _ in agents]
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            _chat(daemon, agents[i], turns, samples[i])
        except BaseException as exc:  # re-raised below, in the bench's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(agents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return p50_p99([s for each in samples for s in each])


def run() -> list[Result]:
    ready_one = median_ready(1)
    ready_many = median_ready(AGENTS)
    one = ReadyDaemon(aliases(1))
    try:
        one_pss_mb = one.pss_total_kb() / 1024
        lone = turn_latency(one, ["a000"], TURNS)
    finally:
        one.close()
    many = ReadyDaemon(aliases(AGENTS))
    try:
        many_pss_mb = many.pss_total_kb() / 1024
        idle = turn_latency(many, ["a050"], TURNS)
        # Spread over the config, not the first ten: they share nothing but the daemon.
        chatters = aliases(AGENTS)[:: AGENTS // CONCURRENT][:CONCURRENT]
        busy = turn_latency(many, chatters, TURNS_EACH)
    finally:
        many.close()
    base = "1-agent daemon"
    return [
        result(
            f"cold start to READY=1, {AGENTS} agents",
            ready_many,
            "s",
            f"{base}, cold start to READY=1",
            ready_one,
            "<= 2 s",
        ),
        result(
            f"PSS daemon + {AGENTS} idle agents", many_pss_mb, "MB", f"PSS of a {base}", one_pss_mb
        ),
        result(
            f"chat turn p50, {AGENTS} agents idle",
            idle["p50"],
            "ms",
            f"chat turn p50, {base}",
            lone["p50"],
        ),
        result(
            f"chat turn p99, {AGENTS} agents idle",
            idle["p99"],
            "ms",
            f"chat turn p99, {base}",
            lone["p99"],
        ),
        result(
            f"chat turn p50, {CONCURRENT} of {AGENTS} chatting",
            busy["p50"],
            "ms",
            f"chat turn p50, {base}",
            lone["p50"],
        ),
        result(
            f"chat turn p99, {CONCURRENT} of {AGENTS} chatting",
            busy["p99"],
            "ms",
            f"chat turn p99, {base}",
            lone["p99"],
        ),
    ]
