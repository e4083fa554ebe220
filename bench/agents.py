"""Load-generating agent plans, run inside real agent processes on the real AgentBus.

An agent whose workspace holds plan.json runs that plan (see tests/supervisor/fault_agents,
the entry point that dispatches here). Results go to result.json in the workspace.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import trio

from zeroclaw._ops import Nothing, encode_body
from zeroclaw.bus import AgentBus, Message, Outcome, PeerNote

from ._harness import p50_p99

# name -> a file opened before the agent's sandbox: a readonly agent's kernel rules let it
# create nothing in its workspace (ADR 0039), so its plan's result goes through this fd.
PREOPENED: dict[str, int] = {}


def write_result(workspace: Path, name: str, data: Any) -> None:
    fd = PREOPENED.pop(name, None)
    if fd is not None:
        os.write(fd, json.dumps(data).encode())  # one write: a reader waits for a non-empty file
        os.close(fd)
        return
    tmp = workspace / f".{name}.tmp"
    tmp.write_text(json.dumps(data))
    tmp.rename(workspace / name)


async def wait_for_peer(bus: AgentBus, to: str, channel: str) -> None:
    """Probe until the peer answers: agents start together, so it may not be on the bus yet."""
    for _ in range(600):
        outcome = await bus.send(to, channel, Nothing(), kind="probe")
        if outcome.delivered:
            return
        await trio.sleep(0.05)
    raise RuntimeError(f"{to} never joined the bus")


async def flood(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """Send `count` messages to `to` as fast as the window allows; wait to receive `expect`."""
    count, to, channel = plan["count"], plan["to"], plan["channel"]
    expect = plan.get("expect", count)
    body = encode_body(PeerNote("x" * plan.get("size", 200)))  # encoded once, sent count times
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
    if count:
        await wait_for_peer(bus, to, channel)
    started = time.perf_counter()
    for _ in range(count):
        await bus.wait_for_room()
        bus.post(to, channel, body, done)
    check()
    await finished.wait()
    write_result(
        workspace,
        "result.json",
        {"outcomes": outcomes, "received": received[0], "seconds": time.perf_counter() - started},
    )


async def pingpong(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """`count` sequential probes; round-trip times in milliseconds."""
    await wait_for_peer(bus, plan["to"], plan["channel"])
    rtts = []
    for _ in range(plan["count"]):
        started = time.perf_counter()
        outcome = await bus.send(plan["to"], plan["channel"], PeerNote("x" * 200), kind="probe")
        rtts.append((time.perf_counter() - started) * 1000)
        assert outcome.delivered, outcome
    write_result(workspace, "result.json", p50_p99(rtts))


async def memwrite(bus: AgentBus, plan: dict[str, Any], workspace: Path) -> None:
    """`writers` concurrent loops of memory stores; every acknowledged key goes to acked.log."""
    count = plan.get("count")  # None: until killed
    content = plan.get("content", "remember this")
    errors: list[str] = []
    started = time.perf_counter()
    with (workspace / "acked.log").open("a", buffering=1) as acked:

        async def writer(w: int) -> None:
            i = 0
            while count is None or i < count:
                key = f"w{w}-{i}"
                body = {"key": key, "content": f"{content} {i}", "agent": plan.get("claim", "")}
                # Raw: the "agent" claim is no field of the struct, and must be ignored.
                raw = msgspec.Raw(msgspec.msgpack.encode(body))
                response = await bus.request("memory", "store", raw)
                if response.ok:
                    acked.write(key + "\n")
                else:
                    errors.append(f"{response.error}: {response.detail}")
                i += 1

        async with trio.open_nursery() as nursery:
            for w in range(plan.get("writers", 8)):
                nursery.start_soon(writer, w)
    total = (count or 0) * plan.get("writers", 8)
    seconds = time.perf_counter() - started
    write_result(workspace, "result.json", {"errors": errors, "stores": total, "seconds": seconds})


Plan = Callable[[AgentBus, dict[str, Any], Path], Awaitable[None]]
PLANS: dict[str, Plan] = {"flood": flood, "pingpong": pingpong, "memwrite": memwrite}


def run_plan_or_agent(spec: Any, link_fd: int, plans: Mapping[str, Plan]) -> int:
    """Run the workspace's plan.json (with `plans`) on the real bus, else the real agent."""
    from zeroclaw.agent import agent_main, serve_agent

    workspace = Path(spec.workspace)
    plan_file = workspace / "plan.json"
    if not plan_file.exists():
        return agent_main(spec, link_fd)
    plan = json.loads(plan_file.read_text())
    if plan.get("preopen_result"):
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        PREOPENED["result.json"] = os.open(workspace / "result.json.out", flags, 0o600)

    def start(bus: AgentBus, nursery: trio.Nursery, _link: Any) -> None:
        nursery.start_soon(plans[plan["do"]], bus, plan, workspace)

    return int(trio.run(lambda: serve_agent(spec, link_fd, on_bus=start)))


def main(spec: Any, link_fd: int) -> int:
    """Agent entry point for benchmarks."""
    return run_plan_or_agent(spec, link_fd, PLANS)
