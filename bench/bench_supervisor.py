"""Cold start to READY=1 and memory per idle agent, each beside fresh interpreters (issue 31:
READY for 1 and 5 agents at most 0.5 s on a quiet machine, an idle 1-agent install at most
60 MB PSS in all, a networked idle agent at most 6 MB)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ._daemon import ANTHROPIC_KEY_ENV, LOOPBACK_URL, PROVIDER_KINDS, ReadyDaemon, pss_kb
from ._harness import Result, result

REPO = Path(__file__).resolve().parent.parent
# What the zygote imports before its first fork: the agent's code (`agent_main`, which
# zeroclaw.agent loads on first use), so the baseline is one agent's own interpreter.
IMPORT_AGENT = (
    "import sys; from zeroclaw.agent import agent_main; "
    "sys.stdout.write('r'); sys.stdout.flush(); sys.stdin.read()"
)
# What an idle agent of each provider kind has loaded and built: the agent code and its
# provider (a network provider's pooled client, TLS context included). argv: kind, URL, key.
BUILD_PROVIDER = """
import sys
from zeroclaw.agent import agent_main
from zeroclaw.providers import make_provider, AnthropicSpec, OfflineSpec, OpenAISpec
kind, url, key = sys.argv[1:4]
specs = {
    "offline": OfflineSpec(),
    "openai": OpenAISpec(url + "/v1", "bench", None, 60.0, 3),
    "anthropic": AnthropicSpec(url, "bench", key, 1024, 60.0, 3),
}
provider = make_provider(kind + ".default", specs[kind], {key: "k"})
sys.stdout.write("r"); sys.stdout.flush(); sys.stdin.read()
"""


class _Daemon(ReadyDaemon):
    def __init__(self, n: int, provider: str = "offline") -> None:
        super().__init__([f"a{i:03d}" for i in range(n)], provider=provider)


class _Fresh:
    """n fresh interpreters that import the agent module (and, with `provider`, build that
    kind's provider) and idle."""

    def __init__(self, n: int, provider: str | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-c", IMPORT_AGENT]
        if provider is not None:
            argv = [sys.executable, "-c", BUILD_PROVIDER, provider, LOOPBACK_URL, ANTHROPIC_KEY_ENV]
        start = time.perf_counter()
        self.procs = [
            subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            for _ in range(n)
        ]
        for proc in self.procs:
            assert proc.stdout is not None
            proc.stdout.read(1)
        self.ready_secs = time.perf_counter() - start

    def pss_total_kb(self) -> int:
        return sum(pss_kb(p.pid) for p in self.procs)

    def close(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()


def _median_start(cls: type[_Daemon] | type[_Fresh], n: int, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        thing = cls(n)
        samples.append(thing.ready_secs)
        thing.close()
    return statistics.median(samples)


def run() -> list[Result]:
    results = []
    targets = {1: "<= 0.5 s (quiet machine)", 5: "<= 0.5 s (quiet machine)", 20: "<= 1.0 s"}
    for n, target in targets.items():
        ours = _median_start(_Daemon, n, repeat=3)
        fresh = _median_start(_Fresh, n, repeat=3)
        results.append(
            result(
                f"cold start to READY=1, {n} agents",
                ours,
                "s",
                f"{n} fresh interpreters importing the agent's code",
                fresh,
                target,
            )
        )
    results.append(idle_install())
    n = 20
    one, many = _Daemon(1), _Daemon(n)
    fresh = _Fresh(n)
    try:
        per_agent_mb = (many.pss_total_kb() - one.pss_total_kb()) / (n - 1) / 1024
        fresh_per_mb = fresh.pss_total_kb() / n / 1024
        total_mb = many.pss_total_kb() / 1024
        fresh_total_mb = fresh.pss_total_kb() / 1024
    finally:
        one.close()
        many.close()
        fresh.close()
    results.append(
        result(
            "PSS per idle agent (incremental), offline",
            per_agent_mb,
            "MB",
            "PSS per fresh interpreter importing the agent's code",
            fresh_per_mb,
            "<= 8 MB",
        )
    )
    results.append(
        result(
            f"PSS daemon + {n} idle agents",
            total_mb,
            "MB",
            f"PSS of {n} fresh interpreters",
            fresh_total_mb,
        )
    )
    results.extend(pss_per_provider_kind(("openai", "anthropic")))
    return results


def idle_install() -> Result:
    """An idle 1-agent install, everything counted (the daemon, the zygote, the agent), once
    its first discovery scan is over; beside one fresh interpreter importing the agent."""
    daemon = _Daemon(1)
    fresh = _Fresh(1)
    try:
        daemon.settle()
        total_mb = daemon.pss_total_kb() / 1024
        fresh_mb = fresh.pss_total_kb() / 1024
    finally:
        daemon.close()
        fresh.close()
    return result(
        "PSS of an idle 1-agent install, offline",
        total_mb,
        "MB",
        "PSS of 1 fresh interpreter importing the agent's code",
        fresh_mb,
        "<= 60 MB",
    )


def pss_per_provider_kind(kinds: tuple[str, ...] = PROVIDER_KINDS, n: int = 10) -> list[Result]:
    """Incremental PSS of an idle agent whose provider is of each kind (network ones point
    at loopback and are never asked), beside a fresh interpreter that builds the same."""
    results = []
    for kind in kinds:
        one, many = _Daemon(1, kind), _Daemon(n, kind)
        fresh = _Fresh(n, kind)
        try:
            per_agent_mb = (many.pss_total_kb() - one.pss_total_kb()) / (n - 1) / 1024
            fresh_per_mb = fresh.pss_total_kb() / n / 1024
        finally:
            one.close()
            many.close()
            fresh.close()
        results.append(
            result(
                f"PSS per idle agent (incremental), {kind}",
                per_agent_mb,
                "MB",
                f"PSS per fresh interpreter building the {kind} provider",
                fresh_per_mb,
                "<= 6 MB",
            )
        )
    return results
