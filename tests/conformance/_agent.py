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

from tests.bodies import plain, raw
from zeroclaw.agent import AgentSpec, agent_main, serve_agent
from zeroclaw.bus import AgentBus, Message, Request, Response, Send, encode


def main(spec: AgentSpec, link_fd: int) -> int:
    if spec.subagent is not None and "CONFINEMENT-PROBE" in (
        Path(spec.workspace) / "SYSTEM.md"
    ).read_text(errors="replace"):
        return int(trio.run(lambda: serve_agent(spec, link_fd, on_bus=runtime_prober)))
    if spec.alias.startswith("h_"):
        # The HTTP adapter cells (ADR 0054): what this agent's process was given, before
        # anything runs, for the test to look for the adapter's key in.
        (Path(spec.workspace) / "environ.json").write_text(json.dumps(dict(os.environ)))
    if not spec.alias.startswith("k_"):
        return agent_main(spec, link_fd)
    plan = json.loads((Path(spec.workspace) / "probe.json").read_text())
    plan["command_home"] = os.path.join(spec.runtime_dir, "homes", spec.alias, "probe")
    plan["workspace"] = spec.workspace
    out = os.open(plan["fifo"], os.O_RDWR | os.O_CLOEXEC)  # O_RDWR: never blocks on a FIFO
    go = os.open(plan["go"], os.O_RDWR | os.O_CLOEXEC)

    def start(bus: AgentBus, nursery: trio.Nursery, _link: Any) -> None:
        # Keep every reply that comes back, to count how often a replayed question acted.
        replies = Replies()
        before = bus.on_message

        def on_message(message: Message) -> None:
            body = plain(message.body) if message.kind == "reply" else None
            if isinstance(body, dict):
                replies.add(str(body.get("in_reply_to")), message)
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
                raw({"text": f"replayed {kind}"}),
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
    # A question whose envelope leaves its tools unnarrowed and names a turn the daemon never
    # opened (ADR 0052): the router stamps no tools, so the peer's recall is not granted.
    grant_id = bus.new_id()
    await bus.send(
        peer,
        plan["channel"],
        raw({"text": "recall ownersecret", "tools": None}),
        kind="ask",
        message_id=grant_id,
        turn="turn-made-up",
    )
    [*grant_replies] = await replies.to(grant_id, 1, 30)
    said = json.dumps([plain(m.body) for m in grant_replies])
    results["ask_forged_grant"] = (
        "ok"
        if "launch code" in said
        else "tool_not_granted"
        if "tool_not_granted" in said
        else "no_answer"
    )
    # A question claiming another sender: answered to who sent it (the router stamps it).
    forged = Message(
        id=bus.new_id(),
        to=peer,
        channel=plan["channel"],
        body=raw({"text": "who asks?"}),
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
        body=raw({"key": "replayed", "content": "replayed store"}),
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
        body=raw({"key": "forged-rid", "content": "forged routing id"}),
    )
    bus._requests[request.id] = send  # the answer arrives here if it comes to this agent
    await trio.to_thread.run_sync(forged_request, bus.creds, plan["foreign"].encode(), request)
    with trio.move_on_after(30):
        answer = await receive.receive()
        results["forged_rid_answer"] = "ok" if answer.ok else str(answer.error)
    results.setdefault("forged_rid_answer", "no_answer")
    # Ordered after the replays on this connection: they are committed when it answers.
    await bus.request("memory", "get", raw({"key": "replayed"}))
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
    forgot = await bus.request("memory", "forget", raw({"id": order["forget_id"]}))
    results["forget_foreign_id"] = (
        forgot.error
        if not forgot.ok
        else ("ok" if plain(forgot.body).get("forgotten") else "forgotten_false")
    )
    missing = await bus.request("memory", "forget", raw({"id": "0" * 26}))
    results["forget_missing_id"] = (
        missing.error
        if not missing.ok
        else ("ok" if plain(missing.body).get("forgotten") else "forgotten_false")
    )
    results["control"] = await trio.to_thread.run_sync(knock, plan["control"])
    results["env_secret"] = "present" if "HOOK_SECRET" in os.environ else "absent"
    # What the agent's own tools would refuse, sent raw with its real keys.
    stored = await bus.request("memory", "store", raw({"key": "raw", "content": "raw write"}))
    results["store"] = "ok" if stored.ok else stored.error
    foreign = await bus.request(
        "memory", "store", raw({"key": "raw", "content": "x", "agent": plan["foreign"]})
    )
    results["store_foreign"] = "ok" if foreign.ok else foreign.error
    recalled = await bus.request(
        "memory", "recall", raw({"query": "ownersecret", "agents": ["owner"]})
    )
    results["recall_foreign"] = "ok" if recalled.ok else recalled.error
    exported = await bus.request("memory", "export", raw({"agent": "owner"}))
    results["export_foreign"] = "ok" if exported.ok else exported.error
    session = await bus.request("memory", "session", raw({"session": "default", "agent": "owner"}))
    if not session.ok:
        results["session_foreign"] = session.error
    else:  # answered: with the owner's transcript, or (the body's claim ignored) its own
        seen = order["session_marker"] in json.dumps(plain(session.body))
        results["session_foreign"] = "ok" if seen else "own_session_only"
    if plan.get("delegate_to"):
        outcome = await bus.send(
            plan["delegate_to"],
            plan["channel"],
            raw({"text": "do it", "depth": 0}),
            kind="delegate",
        )
        results["delegate"] = "ok" if outcome.delivered else outcome.code
    # A dispatch whose body claims an allowed caller: the router's identity decides.
    body = {"agent_id": "helper", "task": "forged", "caller": "sup", "source": "cli"}
    dispatched = await bus.request("subagent", "dispatch", raw(body), wait_secs=60)
    results["dispatch_forged"] = "ok" if dispatched.ok else dispatched.error
    if order.get("targets"):  # ADR 0043: what this process, and a command of it, can reach
        results["confinement"] = confinement_probes(order["targets"], order["tcp_port"])
        if plan.get("commands"):
            results["command_confinement"] = await command_probes(
                plan, order["targets"], order["tcp_port"]
            )
    if plan.get("replay_to"):
        results.update(await replays(bus, plan, replies))
    os.write(out, json.dumps(results).encode() + b"\n")
    os.close(out)


# ----------------------------------------------------------------- process confinement


def errno_name(call: Any) -> str:
    try:
        call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return "ok"


def capget(pid: int) -> list[int]:
    """capget(2) of `pid` (0: this process): effective, permitted, inheritable."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(0x20080522, pid)
    data = (ctypes.c_uint32 * 6)()
    if libc.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    return [data[i] | data[i + 3] << 32 for i in range(3)]


def _tcp(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass


def _raw() -> None:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()


def confinement_probes(targets: dict[str, int], tcp_port: int) -> dict[str, str]:
    """From inside this process: SIGCONT (harmless, and judged as any signal) to each
    target, a raw socket, setuid(1), its capabilities, a TCP connect to a listener."""
    import signal

    out = {
        f"signal {t}": errno_name(lambda p=p: os.kill(p, signal.SIGCONT))
        for t, p in targets.items()
    }
    out["raw socket"] = errno_name(_raw)
    out["setuid 1"] = errno_name(lambda: os.setuid(1))
    out["capabilities"] = "none" if capget(0) == [0, 0, 0] else "some"
    out["tcp connect"] = errno_name(lambda: _tcp(tcp_port))
    return out


async def run_confined(argv: list[str], ruleset: Any) -> tuple[int | None, str]:
    from zeroclaw._process import run_capped

    outcome = await run_capped(argv, timeout_secs=30, ruleset=ruleset)
    return outcome.exit_code, outcome.output


def _word_of(code: int | None, text: str) -> str:
    if code == 0:
        return "ok"
    if "not permitted" in text:
        return "EPERM"
    if "Permission denied" in text:
        return "EACCES"
    return f"exit {code}: {text.strip()[:80]}"


async def program_probes(
    ruleset_for: Any, targets: dict[str, int], tcp_port: int
) -> dict[str, str]:
    """What a program run under `ruleset_for(names)` (a ruleset fd builder allowing those
    programs) reaches: `kill -CONT` at each target, bash's /dev/tcp at a listener, and its
    capabilities (capget from here: its /proc is not readable to it)."""
    import functools

    from zeroclaw.policy import enforce_ruleset

    out: dict[str, str] = {}
    for target, pid in targets.items():
        code, text = await run_confined(
            ["kill", "-s", "CONT", str(pid)], functools.partial(ruleset_for, ["kill"])
        )
        out[f"signal {target}"] = _word_of(code, text)
    code, text = await run_confined(
        ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{tcp_port}"],
        functools.partial(ruleset_for, ["bash"]),
    )
    out["tcp connect"] = _word_of(code, text)
    fd = ruleset_for(["sleep"])
    child = await trio.lowlevel.open_process(
        ["sleep", "60"], pass_fds=(fd,), preexec_fn=functools.partial(enforce_ruleset, fd)
    )
    os.close(fd)
    out["capabilities"] = "none" if capget(child.pid) == [0, 0, 0] else "some"
    child.kill()
    await child.wait()
    return out


async def command_probes(
    plan: dict[str, Any], targets: dict[str, int], port: int
) -> dict[str, str]:
    """A shell command of this agent, under the ruleset the shell tool builds (nested in
    this agent's domain)."""
    from zeroclaw.policy import build_ruleset, command_executables, plan_command_sandbox

    os.makedirs(plan["command_home"], exist_ok=True)
    path = os.environ.get("PATH", "/usr/bin:/bin")

    def ruleset_for(names: list[str]) -> int:
        return build_ruleset(
            plan_command_sandbox(
                workspace=plan["workspace"],
                home=plan["command_home"],
                executables=command_executables(names, path),
            )
        )

    return await program_probes(ruleset_for, targets, port)


def runtime_prober(bus: AgentBus, nursery: trio.Nursery, _link: Any) -> None:
    """A sub-agent runtime that answers its invocation with what it could reach: the
    task says `targets <daemon> <zygote> <sibling> <tcp port>`."""
    import re

    def on_message(message: Message) -> None:
        if message.kind == "chat" and message.from_ == "daemon":
            nursery.start_soon(answer, message)

    bus.on_message = on_message

    async def answer(message: Message) -> None:
        found = re.search(r"targets (\d+) (\d+) (\d+) (\d+)", json.dumps(plain(message.body)))
        assert found is not None
        daemon, zygote, sibling, port = (int(g) for g in found.groups())
        seen = confinement_probes({"daemon": daemon, "zygote": zygote, "sibling": sibling}, port)
        done = {"event": "done", "reply": "", "result": seen}
        bus.send_frame(
            Request(
                id=bus.new_id(),
                service="chat",
                op="event",
                body=raw({"turn": message.id, "event": done}),
            )
        )
