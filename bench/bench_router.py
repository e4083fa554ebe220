"""Router throughput and round-trip latency, beside a raw pyzmq relay in the same run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._daemon import workspace, write_bench_config
from ._harness import Result, result

REPO = Path(__file__).resolve().parent.parent
COUNT = 50_000
PINGS = 2_000
SIZE = 200
REPEAT = 3


def _run_daemon_plan(plans: dict[str, dict[str, Any]], wait_for: str) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="zcr-", dir="/tmp"))
    try:
        config = write_bench_config(root, plans, grouped=True)
        for alias, plan in plans.items():
            workspace(root, alias).mkdir(parents=True)
            (workspace(root, alias) / "plan.json").write_text(json.dumps(plan))
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "ZEROCLAW_AGENT_ENTRYPOINT": "bench.agents:main",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "zeroclaw", "--config", str(config), "daemon"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(root / "daemon.log").open("wb"),
        )
        try:
            out = workspace(root, wait_for) / "result.json"
            deadline = time.monotonic() + 300
            while not out.exists():
                if time.monotonic() > deadline or proc.poll() is not None:
                    log = (root / "daemon.log").read_text()[-3000:]
                    raise RuntimeError(f"benchmark agents produced no result:\n{log}")
                time.sleep(0.05)
            data: dict[str, Any] = json.loads(out.read_text())
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        return data
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _raw(*roles: list[str]) -> list[dict[str, Any]]:
    """Start the relay and the given client roles; return the JSON each role printed."""
    root = Path(tempfile.mkdtemp(prefix="zcraw-", dir="/tmp"))
    endpoint = f"ipc://{root}/relay.sock"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    py = [sys.executable, "-m", "bench.raw_relay"]
    relay = subprocess.Popen([*py, "relay", endpoint], env=env)
    try:
        procs = [
            subprocess.Popen(
                [*py, role[0], endpoint, *role[1:]], env=env, stdout=subprocess.PIPE, text=True
            )
            for role in roles
        ]
        outputs = []
        for proc in procs:
            out, _ = proc.communicate(timeout=300)
            if out.strip():
                outputs.append(json.loads(out.strip().splitlines()[-1]))
        return outputs
    finally:
        relay.kill()
        relay.wait()
        shutil.rmtree(root, ignore_errors=True)


def _ours_throughput() -> float:
    data = _run_daemon_plan(
        {
            "sender": {
                "do": "flood",
                "count": COUNT,
                "expect": 0,
                "to": "receiver",
                "channel": "cli.local",
                "size": SIZE,
            },
            "receiver": {
                "do": "flood",
                "count": 0,
                "expect": 0,
                "to": "sender",
                "channel": "cli.local",
            },
        },
        wait_for="sender",
    )
    assert data["outcomes"] == {"delivered": COUNT}, data
    return COUNT / float(data["seconds"])


def _raw_throughput() -> float:
    (sink,) = _raw(["sink", str(COUNT)], ["blast", str(COUNT), str(SIZE)])
    return COUNT / float(sink["seconds"])


def _ours_latency() -> dict[str, float]:
    return _run_daemon_plan(
        {
            "pinger": {"do": "pingpong", "count": PINGS, "to": "ponger", "channel": "cli.local"},
            "ponger": {
                "do": "flood",
                "count": 0,
                "expect": 0,
                "to": "pinger",
                "channel": "cli.local",
            },
        },
        wait_for="pinger",
    )


def _raw_latency() -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="zcraw-", dir="/tmp"))
    endpoint = f"ipc://{root}/relay.sock"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    py = [sys.executable, "-m", "bench.raw_relay"]
    relay = subprocess.Popen([*py, "relay", endpoint], env=env)
    echo_proc = subprocess.Popen([*py, "echo", endpoint], env=env)
    try:
        out = subprocess.run(
            [*py, "ping", endpoint, str(PINGS), str(SIZE)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]
    finally:
        for proc in (echo_proc, relay):
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def run() -> list[Result]:
    ours_rate = statistics.median(_ours_throughput() for _ in range(REPEAT))
    raw_rate = statistics.median(_raw_throughput() for _ in range(REPEAT))
    ours_lat = [_ours_latency() for _ in range(REPEAT)]
    raw_lat = [_raw_latency() for _ in range(REPEAT)]
    p50 = statistics.median(x["p50"] for x in ours_lat)
    p99 = statistics.median(x["p99"] for x in ours_lat)
    raw_p50 = statistics.median(x["p50"] for x in raw_lat)
    raw_p99 = statistics.median(x["p99"] for x in raw_lat)
    return [
        result(
            f"router throughput A->B, {SIZE} B, acked, CURVE",
            ours_rate,
            "msg/s",
            "raw pyzmq ROUTER relay, no auth/policy/acks",
            raw_rate,
            ">= 0.6 of raw",
        ),
        result(
            "probe round trip p50", p50, "ms", "raw relay echo round trip p50", raw_p50, "<= 2x raw"
        ),
        result("probe round trip p99", p99, "ms", "raw relay echo round trip p99", raw_p99),
    ]
