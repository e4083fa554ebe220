"""One-shot CLI commands, process start to exit, beside `python -c pass` (issue 17, ADR 0035).

What an operator waits for: `zeroclaw --version`, `zeroclaw status` and `zeroclaw --agent a
chat -m hi` through a running daemon (offline provider), each a fresh interpreter, timed
from spawn to exit; the baseline is the bare interpreter start, measured interleaved with
them so the machine's noise hits both alike.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from ._daemon import REPO, ReadyDaemon
from ._harness import Result, result

ROUNDS = 21
TARGET_SECS = 0.150


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv[3:]} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def run() -> list[Result]:
    daemon = ReadyDaemon(["a"])
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ZEROCLAW_CONFIG": str(daemon.config_path)}
        zeroclaw = [sys.executable, "-m", "zeroclaw"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "zeroclaw --version": [*zeroclaw, "--version"],
            "zeroclaw status": [*zeroclaw, "status"],
            "zeroclaw --agent a chat -m hi": [*zeroclaw, "--agent", "a", "chat", "-m", "hi"],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():  # warm the page cache and the .pyc files
            _timed(argv, env)
        for _ in range(ROUNDS):
            for name, argv in commands.items():
                samples[name].append(_timed(argv, env))
    finally:
        daemon.close()
    base = statistics.median(samples["python -c pass"])
    out = [result("cli: python -c pass p50", base, "s", "python -c pass", base)]
    for name in list(commands)[1:]:
        out.append(
            result(
                f"cli: {name} p50",
                statistics.median(samples[name]),
                "s",
                "python -c pass (same run)",
                base,
                target=f"<= {TARGET_SECS:g} s p50 (daemon running)",
            )
        )
    return out
