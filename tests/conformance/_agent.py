"""The conformance daemon's agent entry point (ZEROCLAW_AGENT_ENTRYPOINT): every agent is
the real one, except the kernel probes (alias `k_*`). A probe is a real agent process
confined exactly as its risk profile says (serve_agent applies the same Landlock plan);
once on the bus it makes direct syscalls, knocks on the control socket, and sends what a
hostile agent would (a raw memory write, a forged delegation), then writes what happened
as one JSON line to a FIFO it opened before confinement (an inherited fd: Landlock does
not check it)."""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

import trio

from zeroclaw.agent import AgentSpec, agent_main, serve_agent
from zeroclaw.bus import AgentBus


def main(spec: AgentSpec, link_fd: int) -> int:
    if not spec.alias.startswith("k_"):
        return agent_main(spec, link_fd)
    plan = json.loads((Path(spec.workspace) / "probe.json").read_text())
    out = os.open(plan["fifo"], os.O_RDWR | os.O_CLOEXEC)  # O_RDWR: never blocks on a FIFO
    go = os.open(plan["go"], os.O_RDWR | os.O_CLOEXEC)

    def start(bus: AgentBus, nursery: trio.Nursery, _link: Any) -> None:
        nursery.start_soon(run_probes, bus, plan, out, go)

    return int(trio.run(lambda: serve_agent(spec, link_fd, on_bus=start)))


def syscall(op: str, path: str) -> str:
    """One direct syscall: "ok" or the errno name."""
    try:
        if op == "read":
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            os.read(fd, 1)
        else:  # create
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.close(fd)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def knock(address: str) -> str:
    """Connect to the control socket and ask for status: "forbidden", "answered" or errno."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect("\0" + address[1:])
        payload = bytes([0x81, 0xA3]) + b"cmd" + bytes([0xA6]) + b"status"
        s.sendall(struct.pack(">I", len(payload)) + payload)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    finally:
        s.close()
    return "forbidden" if b"forbidden" in data else ("answered" if data else "closed")


async def run_probes(bus: AgentBus, plan: dict[str, Any], out: int, go: int) -> None:
    results: dict[str, Any] = {}
    for key, (op, path) in plan["probes"].items():
        results[key] = syscall(op, path)
    # The test says go once the daemon is up and the owner's record exists.
    # abandon_on_cancel: a probe never told to go must not hold up its agent's stop
    order = json.loads(await trio.to_thread.run_sync(os.read, go, 65536, abandon_on_cancel=True))
    os.close(go)
    forgot = await bus.request("memory", "forget", {"id": order["forget_id"]})
    results["forget_foreign_id"] = (
        forgot.error
        if not forgot.ok
        else ("ok" if (forgot.body or {}).get("forgotten") else "forgotten_false")
    )
    missing = await bus.request("memory", "forget", {"id": "0" * 26})
    results["forget_missing_id"] = (
        missing.error
        if not missing.ok
        else ("ok" if (missing.body or {}).get("forgotten") else "forgotten_false")
    )
    results["control"] = await trio.to_thread.run_sync(knock, plan["control"])
    results["env_secret"] = "present" if "HOOK_SECRET" in os.environ else "absent"
    # What the agent's own tools would refuse, sent raw with its real keys.
    stored = await bus.request("memory", "store", {"key": "raw", "content": "raw write"})
    results["store"] = "ok" if stored.ok else stored.error
    foreign = await bus.request(
        "memory", "store", {"key": "raw", "content": "x", "agent": plan["foreign"]}
    )
    results["store_foreign"] = "ok" if foreign.ok else foreign.error
    recalled = await bus.request("memory", "recall", {"query": "ownersecret", "agents": ["owner"]})
    results["recall_foreign"] = "ok" if recalled.ok else recalled.error
    exported = await bus.request("memory", "export", {"agent": "owner"})
    results["export_foreign"] = "ok" if exported.ok else exported.error
    session = await bus.request("memory", "session", {"session": "default", "agent": "owner"})
    if not session.ok:
        results["session_foreign"] = session.error
    else:  # answered: with the owner's transcript, or (the body's claim ignored) its own
        seen = order["session_marker"] in json.dumps(session.body)
        results["session_foreign"] = "ok" if seen else "own_session_only"
    if plan.get("delegate_to"):
        outcome = await bus.send(
            plan["delegate_to"], plan["channel"], {"text": "do it", "depth": 0}, kind="delegate"
        )
        results["delegate"] = "ok" if outcome.delivered else outcome.code
    # A dispatch whose body claims an allowed caller: the router's identity decides.
    body = {"agent_id": "helper", "task": "forged", "caller": "sup", "source": "cli"}
    dispatched = await bus.request("subagent", "dispatch", body, wait_secs=60)
    results["dispatch_forged"] = "ok" if dispatched.ok else dispatched.error
    os.write(out, json.dumps(results).encode() + b"\n")
    os.close(out)
