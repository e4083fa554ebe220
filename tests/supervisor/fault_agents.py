"""Agent entry points that misbehave or follow a script, loaded into the real zygote
through ZEROCLAW_AGENT_ENTRYPOINT. They inject faults and drive load through the real
AgentBus; they do not replace any zeroclaw component.

- alias "crash*":    exits 3 at once
- alias "stubborn*": ignores SIGTERM and leaves a grandchild behind
- alias "mute*":     never joins the bus
- a workspace with plan.json: runs that plan (flood, stream, fuzz, silent_callee) on the
  real bus
- anything else:     the real agent
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from bench.agents import PLANS as LOAD_PLANS
from bench.agents import run_plan_or_agent, wait_for_peer, write_result
from zeroclaw.agent import AgentSpec, serve_agent
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
    return run_plan_or_agent(spec, link_fd, PLANS)


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
    write_result(workspace, "started.json", {})
    for i in range(plan["count"]):
        bus.post(plan["to"], plan["channel"], {"n": i}, record(i))
        await trio.sleep(plan["interval"])
    with trio.move_on_after(60):
        await finished.wait()
    write_result(workspace, "result.json", {"results": results})


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
    write_result(workspace, "result.json", {"sent": plan["count"]})


class _Void(list[int]):
    def append(self, item: int) -> None:
        pass


async def deaf(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """Receive everything, acknowledge nothing."""
    bus._acks = _Void()


def _try_read(target: str) -> str:
    try:
        Path(target).read_bytes()
    except PermissionError:
        return "denied"
    except OSError as exc:
        return type(exc).__name__
    return "read"


async def snoop(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """Open files directly, bypassing every tool check: only the kernel can say no."""
    results = {target: _try_read(target) for target in plan["targets"]}
    (workspace / "own.txt").write_text("own workspace stays writable")
    write_result(workspace, "result.json", results)


async def askflood(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """`count` asks to `to` at once, as a peer that never waits; count how each is answered."""
    await wait_for_peer(bus, plan["to"], plan["channel"])
    answers: dict[str, Any] = {}
    all_in = trio.Event()

    def on_message(message: Message) -> None:
        if message.kind == "reply" and isinstance(message.body, dict):
            answers[message.body["in_reply_to"]] = message.body
            if len(answers) == plan["count"]:
                all_in.set()

    bus.on_message = on_message
    for i in range(plan["count"]):
        bus.post(plan["to"], "", {"text": f"hello {i}", "depth": 1}, lambda o: None, kind="ask")
    with trio.move_on_after(60):
        await all_in.wait()
    busy = sum(1 for a in answers.values() if str(a.get("error", "")).startswith("busy"))
    write_result(workspace, "result.json", {"answers": len(answers), "busy": busy})


async def silent_callee(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """Take an ask (the bus acks it) and never answer; say so once the router has the ack:
    a request sent after the ack on the same connection is answered after it was handled."""
    asked = trio.Event()

    def on_message(message: Message) -> None:
        if message.kind in ("ask", "delegate"):
            asked.set()

    bus.on_message = on_message
    await asked.wait()
    await bus.request("no-such-service", "ping", None)
    write_result(workspace, "result.json", {"asked": True})


PLANS = {
    **LOAD_PLANS,
    "silent_callee": silent_callee,
    "stream": stream,
    "fuzz": fuzz,
    "deaf": deaf,
    "snoop": snoop,
    "askflood": askflood,
}
