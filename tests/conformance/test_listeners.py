"""The HTTP listener cells (path `http_listener`, ADR 0045), on raw loopback sockets
against real daemons: one with short deadlines (slow headers and bodies are cut, no
credential gets nothing, nor does an agent), one started at 256 descriptors and flooded
(a connection over a listener's cap is closed at once; once the descriptors run low every
listener stops admitting, and `status`, `chat -m` and `memory list` still answer)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conformance._matrix import Cell, Observed, cells_on
from tests.conformance._table import record
from tests.known_secrets import API_TOKEN, HOOK_SECRET, METRICS_TOKEN, assert_no_secret_logged
from tests.ops.test_metrics import samples, value
from tests.supervisor import harness

PROBE_ENTRYPOINT = "tests.conformance._listener_probe:main"
TOKEN_ENV = "ZEROCLAW_METRICS_TOKEN"
TOKEN = METRICS_TOKEN
API_TOKEN_ENV = "ZEROCLAW_API_TOKEN"  # the gateway token `probe` (issue 29)
NOFILE = 256
WAIT = 30.0  # the longest any answer or close is awaited (a bound, never reached)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def limits(seconds: float, cap: int = 64) -> dict[str, Any]:
    return {
        "header_timeout_secs": seconds,
        "body_timeout_secs": seconds,
        "idle_timeout_secs": seconds,
        "max_connections": cap,
    }


@dataclass
class Listeners:
    daemon: harness.Daemon
    ports: dict[str, int]  # listener kind (and "capped") -> port
    probe: dict[str, Any] = field(default_factory=dict)


def config(root: Path, ports: dict[str, int], seconds: float, caps: dict[str, int]) -> Any:
    hooks = {
        alias: {
            "listen": f"127.0.0.1:{port}",
            "secret_env": "HOOK_SECRET",
            "limits": limits(seconds, caps.get(alias, 64)),
        }
        for alias, port in ports.items()
        if alias not in ("metrics", "gateway")
    }
    owned = [f"webhook.{alias}" for alias in hooks]
    doc = harness.make_config(
        root,
        {
            "alpha": harness.agent_entry(channels=["cli.local", *owned]),
            "prober": harness.agent_entry(
                risk_profile="ro", workspace={"path": str(root / "ws-prober")}
            ),
        },
        groups={
            f"hooks-{alias}": {"channel": f"webhook.{alias}", "agents": ["alpha"]}
            for alias in hooks
        },
    )
    doc["risk_profiles"]["ro"] = {"level": "readonly"}
    doc["channels"]["webhook"] = hooks
    doc["daemon"]["metrics_listen"] = f"127.0.0.1:{ports['metrics']}"
    doc["daemon"]["metrics_token_env"] = TOKEN_ENV
    doc["daemon"]["metrics_limits"] = limits(seconds, caps.get("metrics", 64))
    doc["gateway"] = {
        "listen": f"127.0.0.1:{ports['gateway']}",
        "tokens": {"probe": {"token_env": API_TOKEN_ENV, "sender": "api", "agents": ["alpha"]}},
        "limits": limits(seconds, caps.get("gateway", 64)),
    }
    doc["peer_groups"]["api"] = {"channel": "api.probe", "agents": ["alpha"]}
    return doc


def start(seconds: float, caps: dict[str, int], aliases: tuple[str, ...]) -> Iterator[Listeners]:
    root = harness.short_root()
    ports = {alias: free_port() for alias in (*aliases, "metrics", "gateway")}
    fifo = root / "probe.fifo"
    os.mkfifo(fifo, 0o600)
    workspace = root / "ws-prober"
    workspace.mkdir()
    plan = {
        "metrics_port": ports["metrics"],
        "webhook_port": ports["hook"],
        "gateway_port": ports["gateway"],
        "fifo": str(fifo),
    }
    (workspace / "listeners.json").write_text(json.dumps(plan))
    reader = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)  # read end first: the probe never blocks
    daemon = harness.Daemon(root, config(root, ports, seconds, caps), faults=False)
    try:
        daemon.start(
            ZEROCLAW_AGENT_ENTRYPOINT=PROBE_ENTRYPOINT,
            HOOK_SECRET=HOOK_SECRET,
            **{TOKEN_ENV: TOKEN, API_TOKEN_ENV: API_TOKEN},
        )
        listeners = Listeners(daemon, ports)
        ready, _, _ = select.select([reader], [], [], WAIT)
        assert ready, f"the probe agent never reported\n{daemon.log()}"
        listeners.probe = json.loads(os.read(reader, 1 << 20).decode())
        for alias in aliases:
            wait_serving(daemon, f"webhook.{alias}")
        wait_serving(daemon, "gateway")
        yield listeners
    finally:
        os.close(reader)
        daemon.stop()
        try:
            assert_no_secret_logged(daemon.log_path)  # the token above all
        finally:
            harness.remove_root(root)


def wait_serving(daemon: harness.Daemon, key: str) -> None:
    daemon.wait_for(
        lambda s: any(key in c["keys"] and c["state"] == "serving" for c in s.get("channels", []))
    )


@pytest.fixture(scope="module")
def bounded() -> Iterator[Listeners]:
    """Deadlines of half a second on every listener."""
    yield from start(0.5, {}, ("hook",))


@pytest.fixture(scope="module")
def flooded() -> Iterator[Listeners]:
    """Long deadlines; `flood` has room for more connections than the daemon has
    descriptors, `hook`, the gateway and the metrics listener a cap of 2."""
    caps = {"hook": 2, "metrics": 2, "gateway": 2, "flood": 4096}
    yield from start(WAIT * 4, caps, ("hook", "flood"))


def kind_of(cell: Cell) -> str:
    """`metrics`, `hook` (a webhook) or `gateway`: which listener the cell is about."""
    listener = cell.extra["listener"]
    if listener.startswith("daemon."):
        return "metrics"
    return "gateway" if listener.startswith("gateway.") else "hook"


def port_of(listeners: Listeners, cell: Cell) -> int:
    return listeners.ports[kind_of(cell)]


def listener_name(listeners: Listeners, cell: Cell) -> str:
    return LISTENER_NAMES[kind_of(cell)](listeners.ports[kind_of(cell)])


LISTENER_NAMES = {
    "metrics": lambda port: "metrics",
    "hook": lambda port: f"webhook 127.0.0.1:{port}",
    "flood": lambda port: f"webhook 127.0.0.1:{port}",
    "gateway": lambda port: f"gateway 127.0.0.1:{port}",
}


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.settimeout(WAIT)
    return sock


def until_closed(sock: socket.socket) -> tuple[bool, bytes]:
    """(closed by the server within WAIT, what it sent first)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        return False, got
    except ConnectionResetError:
        pass
    return True, got


def cut(closed: bool, got: bytes) -> Observed:
    first = got.split(b"\r\n", 1)[0].decode("latin-1")
    return Observed("refused", "cut", first) if closed else Observed("allowed", None, first)


def slow(listeners: Listeners, cell: Cell) -> Observed:
    port = port_of(listeners, cell)
    with connect(port) as sock:
        if cell.action == "slow_header":
            sock.sendall(b"POST /metrics HTTP/1.1\r\nx-slow: ")  # and never the end
        elif kind_of(cell) == "gateway":  # its body is read only for a valid token
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                b"authorization: Bearer " + API_TOKEN.encode() + b"\r\n"
                b"content-length: 100\r\n\r\n{"
            )
        else:
            sock.sendall(
                b"POST /v1/channels/hook/messages HTTP/1.1\r\nhost: x\r\n"
                b"authorization: Bearer " + TOKEN.encode() + b"\r\n"
                b"content-length: 100\r\n\r\n{"
            )
        return cut(*until_closed(sock))


def no_credential(listeners: Listeners, cell: Cell) -> Observed:
    port = port_of(listeners, cell)
    if port == listeners.ports["metrics"]:
        head = b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        with connect(port) as sock:
            sock.sendall(head)
            _, got = until_closed(sock)
        return from_answer(got.decode("latin-1"))
    if kind_of(cell) == "gateway":
        body = b'{"model": "alpha", "messages": [{"role": "user", "content": "history"}]}'
        with connect(port) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            _, got = until_closed(sock)
        return from_answer(got.decode("latin-1"))
    body = b'{"sender": "eve", "text": "history"}'
    with connect(port) as sock:
        sock.sendall(
            b"POST /v1/channels/hook/messages HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        _, got = until_closed(sock)
    return from_answer(got.decode("latin-1"))


def from_answer(answer: str) -> Observed:
    """An HTTP answer as an outcome: 401 from metrics is `unauthorized`; a webhook refusal
    carries its code in the JSON body, the gateway's in its OpenAI error object."""
    status = answer.split(" ", 2)[1] if answer.startswith("HTTP/") else ""
    if status == "200":
        return Observed("allowed", None, answer[:80])
    if status == "401" and "zeroclaw_" not in answer:
        body = answer.partition("\r\n\r\n")[2]
        if body.startswith("{"):
            return Observed("refused", _error_code(json.loads(body)), answer[:80])
        return Observed("refused", "unauthorized", answer[:80])
    if status:
        body = answer.partition("\r\n\r\n")[2]
        code = _error_code(json.loads(body)) if body.startswith("{") else status
        return Observed("refused", code, answer[:80])
    return Observed("refused", "no_answer", answer[:80])


def _error_code(body: dict[str, Any]) -> str | None:
    error = body.get("error")
    return error.get("code") if isinstance(error, dict) else error


def agent_no_credential(listeners: Listeners, cell: Cell) -> Observed:
    probe = listeners.probe
    leaked = [
        k
        for k, v in probe["env"].items()
        if k in (TOKEN_ENV, API_TOKEN_ENV) or TOKEN in v or API_TOKEN in v
    ]
    if leaked:
        return Observed("allowed", "token_in_env", f"the agent has {leaked}")
    asked = {"metrics": "metrics", "hook": "webhook", "gateway": "gateway"}[kind_of(cell)]
    return from_answer(probe[asked])


def over_cap(listeners: Listeners, cell: Cell) -> Observed:
    port = port_of(listeners, cell)
    name = listener_name(listeners, cell)
    with ExitStack() as held:
        for _ in range(2):  # the cap of `hook`, the gateway and the metrics listener
            held.enter_context(connect(port))
        with connect(port) as extra:
            closed, _got = until_closed(extra)
        counted = value(cli_metrics(listeners.daemon), CUT, listener=name, reason="over_cap")
    if closed and counted:
        return Observed("refused", "over_cap", f"{counted} counted")
    return Observed("allowed", None, f"closed={closed} counted={counted}")


CUT = "zeroclaw_http_connections_cut_total"


def cli_metrics(daemon: harness.Daemon) -> Any:
    result = daemon.cli("metrics")
    assert result.returncode == 0, result.stderr
    return samples(result.stdout)


@dataclass
class Flood:
    refused: dict[str, bool]  # listener name -> a connection cut for low descriptors
    answers: dict[str, subprocess.CompletedProcess[str]]
    log: str


_FLOOD: list[Flood] = []


def flood(listeners: Listeners) -> Flood:
    """Once per module: the daemon down to NOFILE descriptors, the `flood` listener filled
    with connections that each sent one body byte, then one connection to every listener
    and the operator's commands."""
    if _FLOOD:
        return _FLOOD[0]
    daemon = listeners.daemon
    assert daemon.proc is not None
    resource.prlimit(daemon.proc.pid, resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    head = b"POST /v1/channels/flood/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 9\r\n\r\n{"
    names = {kind: LISTENER_NAMES[kind](listeners.ports[kind]) for kind in LISTENER_NAMES}
    with ExitStack() as held:
        for _ in range(NOFILE + 64):  # more than the daemon has: bounded, loopback
            sock = held.enter_context(connect(listeners.ports["flood"]))
            with contextlib.suppress(OSError):  # already cut
                sock.sendall(head)
        # The daemon takes connections in the order they came: once it has cut the last
        # one, it has taken every other and holds all it may. Probed before, a listener
        # still had descriptors to spare and held each probe until its idle deadline.
        sock.settimeout(WAIT * 3)  # a busy machine: within the held ones' deadlines (x4)
        last_cut, _ = until_closed(sock)
        assert last_cut, "the flood's last connection was never cut"
        probes = {}
        for kind in names:
            probes[kind] = held.enter_context(connect(listeners.ports[kind]))
        for sock in probes.values():
            until_closed(sock)  # each is cut at once, descriptors being low
        answers = {
            "status": daemon.cli("status", "--json"),
            "chat": daemon.cli("-a", "alpha", "chat", "-m", "hi"),
            "memory": daemon.cli("memory", "list", "-a", "alpha"),
        }
        parsed = cli_metrics(daemon)
        refused = {
            kind: bool(value(parsed, CUT, listener=name, reason="descriptors_low"))
            for kind, name in names.items()
        }
    _FLOOD.append(Flood(refused, answers, daemon.log_text()))
    return _FLOOD[0]


def flood_then_status(listeners: Listeners, cell: Cell) -> Observed:
    result = flood(listeners)
    kind = kind_of(cell)
    failed = {k: a.stderr.strip()[-200:] for k, a in result.answers.items() if a.returncode}
    if failed:
        return Observed("refused", "operator_locked_out", json.dumps(failed))
    if "cannot verify which process" in result.log:
        return Observed("refused", "misleading_refusal", "the control socket blamed the peer")
    if not result.refused[kind]:
        return Observed("allowed", "not_cut", f"{kind} admitted past the reserve")
    return Observed("allowed", None, "the operator was served")


@pytest.mark.parametrize(
    "cell",
    [
        c
        for c in cells_on("http_listener")
        if c.action != "over_cap" and c.action != "flood_then_status"
    ],
    ids=lambda c: c.key,
)
def test_http_listener_bounds_and_credentials(cell: Cell, bounded: Listeners) -> None:
    drive = {
        "slow_header": slow,
        "slow_body": slow,
        "no_credential": no_credential,
        "agent_no_credential": agent_no_credential,
    }[cell.action]
    record(cell, drive(bounded, cell))


@pytest.mark.parametrize(
    "cell",
    # Every cap first: the flood leaves the daemon short of descriptors.
    sorted(
        (c for c in cells_on("http_listener") if c.action in ("over_cap", "flood_then_status")),
        key=lambda c: c.action != "over_cap",
    ),
    ids=lambda c: c.key,
)
def test_http_listener_caps_and_the_descriptor_reserve(cell: Cell, flooded: Listeners) -> None:
    drive = {"over_cap": over_cap, "flood_then_status": flood_then_status}[cell.action]
    record(cell, drive(flooded, cell))
