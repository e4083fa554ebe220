"""Cold start to READY=1 and memory per idle agent, each beside fresh interpreters."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ._daemon import ReadyDaemon
from ._harness import Result, result

REPO = Path(__file__).resolve().parent.parent
IMPORT_AGENT = (
    "import sys, zeroclaw.agent; sys.stdout.write('r'); sys.stdout.flush(); sys.stdin.read()"
)


def pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def _tree(pid: int) -> list[int]:
    out = [pid]
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        out.extend(_tree(int(child)))
    return out


class _Daemon(ReadyDaemon):
    def __init__(self, n: int) -> None:
        super().__init__([f"a{i:03d}" for i in range(n)])

    def pss_total_kb(self) -> int:
        return sum(pss_kb(p) for p in _tree(self.proc.pid))


class _Fresh:
    """n fresh interpreters that import the agent module and idle."""

    def __init__(self, n: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        start = time.perf_counter()
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", IMPORT_AGENT],
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
    for n in (1, 10, 20, 50):
        ours = _median_start(_Daemon, n, repeat=3)
        fresh = _median_start(_Fresh, n, repeat=3)
        target = "<= 1.0 s" if n == 20 else ""
        results.append(
            result(
                f"cold start to READY=1, {n} agents",
                ours,
                "s",
                f"{n} fresh interpreters importing zeroclaw.agent",
                fresh,
                target,
            )
        )
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
            "PSS per idle agent (incremental)",
            per_agent_mb,
            "MB",
            "PSS per fresh interpreter importing zeroclaw.agent",
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
    return results
