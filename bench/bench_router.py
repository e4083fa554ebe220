"""Router throughput and round-trip latency, beside a raw pyzmq relay in the same run.

The daemon runs three agents: the two that measure and a real, idle one (issue 17: "an
idle daemon with 3 agents"). The raw relay sends frames of the size our Send frame has
for the same body, once with CURVE like the bus (the target's baseline) and once without
(the old, harder row). Runs alternate ours / raw-CURVE / raw-plain so that a noisy
machine's slow spell falls on all three.
"""

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

from zeroclaw._ops import encode_body
from zeroclaw.bus import Message, PeerNote, Send, encode

from ._daemon import workspace, write_bench_config
from ._harness import Result, result
from .raw_relay import curve_env

REPO = Path(__file__).resolve().parent.parent
COUNT = 50_000
PINGS = 2_000
SIZE = 200
REPEAT = 3
IDLE = "idle"  # the third agent: a real agent (offline provider) that nobody talks to


def frame_bytes(size: int = SIZE) -> int:
    """The size of our Send frame for a body of `size` characters: what the raw relay sends."""
    message = Message(
        id="sender-1f2e3-4d5c6-12345",
        to="receiver",
        channel="cli.local",
        body=encode_body(PeerNote("x" * size)),
        sent_at=time.time(),
    )
    return len(encode(Send(message=message)))


def _run_daemon_plan(plans: dict[str, dict[str, Any] | None], wait_for: str) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="zcr-", dir="/tmp"))
    try:
        config = write_bench_config(root, plans, grouped=True)
        for alias, plan in plans.items():
            workspace(root, alias).mkdir(parents=True)
            if plan is not None:  # no plan: the real agent runs
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


def _raw_env(curve: bool) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **(curve_env() if curve else {})}


def _raw(curve: bool, *roles: list[str]) -> list[dict[str, Any]]:
    """Start the relay and the given client roles; return the JSON each role printed."""
    root = Path(tempfile.mkdtemp(prefix="zcraw-", dir="/tmp"))
    endpoint = f"ipc://{root}/relay.sock"
    env = _raw_env(curve)
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
            IDLE: None,
        },
        wait_for="sender",
    )
    assert data["outcomes"] == {"delivered": COUNT}, data
    return COUNT / float(data["seconds"])


def _raw_throughput(curve: bool) -> float:
    (sink,) = _raw(curve, ["sink", str(COUNT)], ["blast", str(COUNT), str(frame_bytes())])
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
            IDLE: None,
        },
        wait_for="pinger",
    )


def _raw_latency(curve: bool) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="zcraw-", dir="/tmp"))
    endpoint = f"ipc://{root}/relay.sock"
    env = _raw_env(curve)
    py = [sys.executable, "-m", "bench.raw_relay"]
    relay = subprocess.Popen([*py, "relay", endpoint], env=env)
    echo_proc = subprocess.Popen([*py, "echo", endpoint], env=env)
    try:
        out = subprocess.run(
            [*py, "ping", endpoint, str(PINGS), str(frame_bytes())],
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
    rates: dict[str, list[float]] = {"ours": [], "curve": [], "plain": []}
    lat: dict[str, list[dict[str, float]]] = {"ours": [], "curve": [], "plain": []}
    for _ in range(REPEAT):  # interleaved, so a slow spell of the machine hits all three
        rates["ours"].append(_ours_throughput())
        rates["curve"].append(_raw_throughput(curve=True))
        rates["plain"].append(_raw_throughput(curve=False))
    for _ in range(REPEAT):
        lat["ours"].append(_ours_latency())
        lat["curve"].append(_raw_latency(curve=True))
        lat["plain"].append(_raw_latency(curve=False))
    rate = {k: statistics.median(v) for k, v in rates.items()}
    p50 = {k: statistics.median(x["p50"] for x in v) for k, v in lat.items()}
    p99 = {k: statistics.median(x["p99"] for x in v) for k, v in lat.items()}
    size = frame_bytes()
    curve = f"raw pyzmq ROUTER relay, CURVE, {size} B frames, no ZAP/policy/acks"
    plain = f"raw pyzmq ROUTER relay, no CURVE, {size} B frames, no policy/acks"
    name = f"router throughput, {SIZE} B body, 3 agents"
    return [
        result(name, rate["ours"], "msg/s", curve, rate["curve"], ">= 0.8 of raw"),
        result(name, rate["ours"], "msg/s", plain, rate["plain"]),
        result("probe round trip p50", p50["ours"], "ms", f"{curve}: p50", p50["curve"]),
        result(
            "probe round trip p99", p99["ours"], "ms", f"{curve}: p99", p99["curve"], "<= 5x raw"
        ),
        result("probe round trip p50", p50["ours"], "ms", f"{plain}: p50", p50["plain"]),
        result("probe round trip p99", p99["ours"], "ms", f"{plain}: p99", p99["plain"]),
    ]
