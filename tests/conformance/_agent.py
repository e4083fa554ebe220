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
import zmq

from zeroclaw.agent import AgentSpec, agent_main, serve_agent
from zeroclaw.bus import AgentBus, Message, Request, Response, Send, encode


def main(spec: AgentSpec, link_fd: int) -> int:
    if not spec.alias.startswith("k_"):
        return agent_main(spec, link_fd)
    plan = json.loads((Path(spec.workspace) / "probe.json").read_text())
    out = os.open(plan["fifo"], os.O_RDWR | os.O_CLOEXEC)  # O_RDWR: never blocks on a FIFO
    go = os.open(plan["go"], os.O_RDWR | os.O_CLOEXEC)

    def start(bus: AgentBus, nursery: trio.Nursery, _link: Any) -> None:
        # Keep every reply that comes back, to count how often a replayed question acted.
        replies = Replies()
        before = bus.on_message

        def on_message(message: Message) -> None:
            if message.kind == "reply" and isinstance(message.body, dict):
                replies.add(str(message.body.get("in_reply_to")), message)
            before(message)

        bus.on_message = on_message
        nursery.start_soon(run_probes, bus, plan, out, go, replies)

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


class Replies:
    """The replies this probe received, by the id of the question they answer."""

    def __init__(self) -> None:
        self.by_id: dict[str, list[Message]] = {}
        self._changed = trio.Event()

    def add(self, message_id: str, message: Message) -> None:
        self.by_id.setdefault(message_id, []).append(message)
        self._changed.set()
        self._changed = trio.Event()

    async def to(self, message_id: str, want: int, wait_secs: float) -> list[Message]:
        """The replies to `message_id` once `want` came, or what came in `wait_secs` (the
        bound for a reply that must never come: nothing signals its absence)."""
        with trio.move_on_after(wait_secs):
            while len(self.by_id.get(message_id, [])) < want:
                await self._changed.wait()
        return self.by_id.get(message_id, [])


def forged_request(creds: Any, identity: bytes, frame: Request) -> None:
    """Send one request on a second connection made with this agent's own CURVE keys but
    a routing id that names another agent (the router assigns routing ids; this asks)."""
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 2000)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.curve_serverkey = creds.server_public
        sock.curve_publickey = creds.public
        sock.curve_secretkey = creds.secret
        sock.connect(creds.endpoint)
        sock.send(encode(frame))
        sock.close()  # LINGER: the frame leaves before the socket goes
    finally:
        ctx.term()


async def replays(bus: AgentBus, plan: dict[str, Any], replies: Replies) -> dict[str, Any]:
    """Frames an authenticated agent replays or forges with its real keys (issue 16)."""
    results: dict[str, Any] = {}
    peer = plan["replay_to"]
    sent = {}
    refused = {}
    for kind in ("ask", "delegate"):
        # The same question, the same message id, twice: one turn, one answer.
        message_id = bus.new_id()
        outcomes = [
            await bus.send(
                peer,
                plan["channel"],
                {"text": f"replayed {kind}"},
                kind=kind,
                message_id=message_id,
            )
            for _ in range(2)
        ]
        sent[kind] = message_id
        refused[kind] = outcomes[1].code == "replayed"
    # The router refused the replay: the one answer is all that can come. Otherwise a
    # second answer must never come, and nothing signals its absence but a bound.
    wait = 30 if all(refused.values()) else 15
    with trio.move_on_after(wait):
        for message_id in sent.values():
            await replies.to(message_id, 1 if all(refused.values()) else 2, wait)
    for kind, message_id in sent.items():
        got = len(replies.by_id.get(message_id, []))
        results[f"replay_{kind}"] = {0: "no_answer", 1: "acted_once"}.get(got, "acted_twice")
    # A question claiming another sender: answered to who sent it (the router stamps it).
    forged = Message(
        id=bus.new_id(),
        to=peer,
        channel=plan["channel"],
        body={"text": "who asks?"},
        sent_at=0.0,
        from_=plan["foreign"],
        kind="ask",
    )
    bus.send_frame(Send(message=forged))
    answered = await replies.to(forged.id, 1, 30)
    results["forged_from"] = "answered_to_sender" if answered else "not_answered_to_sender"
    # A memory store replayed with the same request id: the record exists once.
    store = Request(
        id=bus.new_id(),
        service="memory",
        op="store",
        body={"key": "replayed", "content": "replayed store"},
    )
    bus.send_raw(encode(store))
    bus.send_raw(encode(store))
    # A request on a second connection whose routing id names another agent: the key
    # decides who asks, and the answer comes back on this agent's own connection.
    send, receive = trio.open_memory_channel[Response](1)
    request = Request(
        id=bus.new_id(),
        service="memory",
        op="store",
        body={"key": "forged-rid", "content": "forged routing id"},
    )
    bus._requests[request.id] = send  # the answer arrives here if it comes to this agent
    await trio.to_thread.run_sync(forged_request, bus.creds, plan["foreign"].encode(), request)
    with trio.move_on_after(30):
        answer = await receive.receive()
        results["forged_rid_answer"] = "ok" if answer.ok else str(answer.error)
    results.setdefault("forged_rid_answer", "no_answer")
    # Ordered after the replays on this connection: they are committed when it answers.
    await bus.request("memory", "get", {"key": "replayed"})
    return results


async def run_probes(
    bus: AgentBus, plan: dict[str, Any], out: int, go: int, replies: Replies
) -> None:
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
    if plan.get("replay_to"):
        results.update(await replays(bus, plan, replies))
    os.write(out, json.dumps(results).encode() + b"\n")
    os.close(out)
