"""Agent entry points that misbehave or follow a script, loaded into the real zygote
through ZEROCLAW_AGENT_ENTRYPOINT. They inject faults and drive load through the real
AgentBus; they do not replace any zeroclaw component.

- alias "crash*":    exits 3 at once
- alias "stubborn*": ignores SIGTERM and leaves a grandchild behind
- alias "mute*":     never joins the bus
- a workspace with plan.json: runs that plan (flood, stream, fuzz) on the real bus
- anything else:     the real agent
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from zeroclaw.agent import AgentSpec, agent_main, serve_agent
from zeroclaw.bus import AgentBus, Message, Outcome, Send, encode


def main(spec: AgentSpec, link_fd: int) -> int:
    alias = spec.alias
    workspace = Path(spec.workspace)
    if alias.startswith("crash"):
        return 3
    if alias.startswith("stubborn"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "1000"])
        (workspace / "grandchild.pid").write_text(str(child.pid))
        return trio.run(lambda: serve_agent(spec, link_fd, stop_signals=()))
    if alias.startswith("mute"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
        return 0
    plan_file = workspace / "plan.json"
    if plan_file.exists():
        plan = json.loads(plan_file.read_text())

        def start(bus: AgentBus, nursery: trio.Nursery) -> None:
            nursery.start_soon(PLANS[plan["do"]], bus, plan, workspace)

        return trio.run(lambda: serve_agent(spec, link_fd, on_bus=start))
    return agent_main(spec, link_fd)


def _write(workspace: Path, name: str, data: Any) -> None:
    tmp = workspace / f".{name}.tmp"
    tmp.write_text(json.dumps(data))
    tmp.rename(workspace / name)


async def flood(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """Send `count` messages to `to` as fast as the window allows; wait to receive `expect`."""
    count, to, channel = plan["count"], plan["to"], plan["channel"]
    expect = plan.get("expect", count)
    body = "x" * plan.get("size", 200)
    outcomes: dict[str, int] = {}
    received = [0]
    finished = trio.Event()

    def check() -> None:
        if sum(outcomes.values()) >= count and received[0] >= expect:
            finished.set()

    def done(outcome: Outcome) -> None:
        outcomes[outcome.label] = outcomes.get(outcome.label, 0) + 1
        check()

    def on_message(message: Message) -> None:
        if message.kind == "message":  # the peer's probes are not part of the flood
            received[0] += 1
            check()

    bus.on_message = on_message
    await wait_for_peer(bus, to, channel)
    started = time.perf_counter()
    for _ in range(count):
        await bus.wait_for_room()
        bus.post(to, channel, body, done)
    check()
    await finished.wait()
    _write(
        workspace,
        "result.json",
        {
            "outcomes": outcomes,
            "received": received[0],
            "seconds": time.perf_counter() - started,
        },
    )


async def wait_for_peer(bus: AgentBus, to: str, channel: str) -> None:
    """Probe until the peer answers: agents start together, so it may not be on the bus yet."""
    for _ in range(600):
        outcome = await bus.send(to, channel, None, kind="probe")
        if outcome.delivered:
            return
        await trio.sleep(0.05)
    raise RuntimeError(f"{to} never joined the bus")


async def stream(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """Send `count` messages at `interval`, recording every outcome in order."""
    results: list[str | None] = [None] * plan["count"]
    pending = [plan["count"]]
    finished = trio.Event()

    def record(index: int) -> Any:
        def done(outcome: Outcome) -> None:
            results[index] = outcome.label
            pending[0] -= 1
            if pending[0] == 0:
                finished.set()

        return done

    await wait_for_peer(bus, plan["to"], plan["channel"])
    _write(workspace, "started.json", {})
    for i in range(plan["count"]):
        bus.post(plan["to"], plan["channel"], {"n": i}, record(i))
        await trio.sleep(plan["interval"])
    with trio.move_on_after(60):
        await finished.wait()
    _write(workspace, "result.json", {"results": results})


async def fuzz(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """Send random and mutated frames straight onto the wire."""
    rng = random.Random(plan.get("seed", 1))
    valid = encode(
        Send(
            message=Message(
                id="fz-1", to=plan["to"], channel=plan["channel"], body="hi", sent_at=0.0
            )
        )
    )
    for i in range(plan["count"]):
        kind = i % 6
        if kind == 0:
            frame = rng.randbytes(rng.randint(0, 300))
        elif kind == 1:  # flip bytes of a valid frame
            raw = bytearray(valid)
            for _ in range(rng.randint(1, 5)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            frame = bytes(raw)
        elif kind == 2:  # truncate a valid frame
            frame = valid[: rng.randrange(len(valid))]
        elif kind == 3:  # unknown tag / wrong version
            frame = msgspec.msgpack.encode(
                {"t": rng.choice(["nope", "send", "ack"]), "v": rng.choice([0, 2, 99])}
            )
        elif kind == 4:  # well-formed msgpack of the wrong shape
            frame = msgspec.msgpack.encode({"t": "send", "v": 1, "message": {"id": i, "to": []}})
        else:  # oversized
            frame = b"\x00" * (plan["max_frame"] + 1 + rng.randrange(1000))
        bus.send_raw(frame)
        if i % 500 == 0:
            await trio.lowlevel.checkpoint()
    _write(workspace, "result.json", {"sent": plan["count"]})


PLANS = {"flood": flood, "stream": stream, "fuzz": fuzz}
