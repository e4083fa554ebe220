"""The router in a real daemon: real agents, real CURVE, real signals."""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq

from tests.bodies import raw
from tests.conftest import PATIENCE
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.bus import REFUSAL_CODES, Hello, Message, Send, encode
from zeroclaw.bus._router import HWM

DaemonFactory = Callable[..., Daemon]
OPS = {"ops": {"channel": "cli", "agents": ["alpha", "beta"]}}


def topology(
    root: Path, extra: dict[str, Any] | None = None, groups: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    agents = {
        "alpha": agent_entry(),
        "beta": agent_entry(),
        "gamma": agent_entry(),
        **(extra or {}),
    }
    return make_config(root, agents, groups=groups or OPS, **kw)


def plan(root: Path, alias: str, **steps: Any) -> None:
    workspace = root / "state" / "agents" / alias / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "plan.json").write_text(json.dumps(steps))


def result_of(
    root: Path, alias: str, timeout: float = PATIENCE, name: str = "result.json"
) -> dict[str, Any]:
    workspace = root / "state" / "agents" / alias / "workspace"
    path = workspace / name
    # A plan with preopen_result (a readonly agent, which creates no file) writes once into
    # `<name>.out`, made before its sandbox: it is done when that file is not empty.
    preopened = workspace / f"{name}.out"
    deadline = time.monotonic() + timeout
    while not path.exists():  # written by an agent process: there is no event to await
        if preopened.exists() and preopened.stat().st_size:
            return json.loads(preopened.read_text())  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"{alias} wrote no {name} in {timeout}s"
        time.sleep(0.05)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def probe(daemon: Daemon, a: str, b: str) -> tuple[int, dict[str, Any]]:
    result = daemon.cli("route", "probe", "--from", a, "--to", b, "--json")
    return result.returncode, json.loads(result.stdout)


def test_explain_agrees_with_probe_on_every_ordered_pair(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(topology(root)).start()
    for a, b in itertools.permutations(["alpha", "beta", "gamma"], 2):
        explained = daemon.cli("route", "explain", "--from", a, "--to", b, "--json")
        decision = json.loads(explained.stdout)
        code, probed = probe(daemon, a, b)
        assert explained.returncode == code, (a, b, decision, probed)
        if decision["allowed"]:
            assert probed["outcome"] == "delivered" and probed["rtt_ms"] > 0
            assert decision["group"] == "ops"
        else:
            assert probed["outcome"] == decision["code"] == "not_peers"
    assert {("alpha", "beta"), ("beta", "alpha")} == {
        (a, b)
        for a, b in itertools.permutations(["alpha", "beta", "gamma"], 2)
        if probe(daemon, a, b)[0] == 0
    }
    outcomes = daemon.status()["router"]["outcomes"]
    assert outcomes["delivered"] == 4 and outcomes["not_peers"] == 8
    unknown = daemon.cli("route", "probe", "--from", "alpha", "--to", "zeta")
    assert unknown.returncode == 1 and "unknown_agent" in unknown.stdout


def test_human_output_and_explain_without_daemon(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(topology(root))
    result = daemon.cli("route", "explain", "--from", "gamma", "--to", "beta")
    assert result.returncode == 1
    assert "denied (not_peers)" in result.stdout and "'gamma' is in no peer group" in result.stdout
    assert daemon.cli("route", "probe", "--from", "alpha", "--to", "beta").returncode == 3


def _rogue(endpoint: str, server_public: bytes | None, make_keys: bool) -> zmq.Socket[bytes]:
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if server_public is not None:
        public, secret = zmq.curve_keypair()
        sock.curve_serverkey = server_public
        sock.curve_publickey = public
        sock.curve_secretkey = secret
    sock.connect(endpoint)
    message = Message(id="rogue-1", to="alpha", channel="cli.local", body=raw("pwned"), sent_at=0.0)
    for frame in (Hello(pid=1), Send(message=message)):
        sock.send(encode(frame), zmq.NOBLOCK)
    return sock


def test_rogue_clients_deliver_nothing_and_are_counted(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(topology(root)).start()
    router = daemon.status()["router"]
    endpoint = router["endpoint"]
    made_up = _rogue(endpoint, router["server_public_key"].encode(), True)  # real server key
    wrong_server = _rogue(endpoint, zmq.curve_keypair()[0], True)
    no_security = _rogue(endpoint, None, False)
    status = daemon.wait_for(
        lambda s: (
            s["router"]["refused_connections"]["zap_denied"] >= 1
            and s["router"]["refused_connections"]["handshake_failed"] >= 2
        )
    )
    assert status["router"]["outcomes"]["delivered"] == 0
    assert status["router"]["connected"] == ["alpha", "beta", "gamma"]
    for sock in (made_up, wrong_server, no_security):
        assert sock.poll(200) == 0  # nothing ever comes back to a rogue
        sock.close()
    assert probe(daemon, "alpha", "beta")[0] == 0


def test_ten_thousand_bad_frames_from_an_authenticated_agent(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = topology(
        root,
        {"fuzzer": agent_entry()},
        groups={**OPS, "f": {"channel": "cli", "agents": ["fuzzer", "alpha"]}},
    )
    plan(
        root,
        "fuzzer",
        do="fuzz",
        count=10_000,
        to="alpha",
        channel="cli.local",
        max_frame=1024 * 1024,
    )
    daemon = daemons(doc).start()
    assert probe(daemon, "alpha", "beta")[0] == 0  # traffic flows while the fuzzer runs
    result_of(root, "fuzzer", timeout=120)
    status = daemon.wait_for(
        lambda s: sum(s["router"]["outcomes"][k] for k in ("malformed", "too_large")) >= 6000,
        timeout=60,
    )
    outcomes = status["router"]["outcomes"]
    assert outcomes["too_large"] > 1000 and outcomes["malformed"] > 4000
    for a, b in (("alpha", "beta"), ("beta", "alpha")):
        assert probe(daemon, a, b)[0] == 0
    assert {a["alias"]: a["restarts"] for a in status["agents"]}["alpha"] == 0


@pytest.mark.slow
def test_flood_both_directions(root: Path, daemons: DaemonFactory) -> None:
    # More than the four queues on a message's path hold (sender, router in and out,
    # receiver, each at HWM), so both senders meet back-pressure; 100,000 took twice as
    # long and showed nothing more.
    n = 5 * HWM
    doc = make_config(
        root,
        {"flood-a": agent_entry(), "flood-b": agent_entry()},
        groups={"pair": {"channel": "cli", "agents": ["flood-a", "flood-b"]}},
    )
    plan(root, "flood-a", do="flood", count=n, to="flood-b", channel="cli.local")
    plan(root, "flood-b", do="flood", count=n, to="flood-a", channel="cli.local")
    daemon = daemons(doc).start()
    for alias in ("flood-a", "flood-b"):
        result = result_of(root, alias, timeout=600)
        assert result["outcomes"] == {"delivered": n}, result
        assert result["received"] == n
    outcomes = daemon.status()["router"]["outcomes"]
    assert outcomes["delivered"] >= 2 * n  # plus the probes each side sent first
    assert outcomes["timeout"] == 0


def test_kill_9_destination_mid_stream(root: Path, daemons: DaemonFactory) -> None:
    doc = make_config(
        root,
        {"streamer": agent_entry(), "victim": agent_entry()},
        groups={"pair": {"channel": "cli", "agents": ["streamer", "victim"]}},
    )
    plan(
        root, "streamer", do="stream", count=1500, to="victim", channel="cli.local", interval=0.004
    )
    daemon = daemons(doc).start()
    result_of(root, "streamer", name="started.json")
    daemon.wait_for(lambda s: s["router"]["outcomes"]["delivered"] >= 100)
    os.kill(daemon.agent("victim")["pid"], signal.SIGKILL)
    results = result_of(root, "streamer", timeout=120)["results"]
    assert None not in results, "a message ended without an outcome"
    assert set(results) <= {"delivered", "unavailable"}, set(results)
    assert "unavailable" in results
    first_gap = results.index("unavailable")
    resumed = [r for r in results[first_gap:] if r == "delivered"]
    assert resumed, "delivery did not resume after the restart"
    assert results[-50:] == ["delivered"] * 50
    victim = daemon.agent("victim")
    assert victim["restarts"] == 1 and victim["state"] == "running"


def test_message_starts_an_on_demand_agent(root: Path, daemons: DaemonFactory) -> None:
    doc = make_config(
        root,
        {"alpha": agent_entry(), "lazy": agent_entry(runtime_profile="lazy")},
        groups={"g": {"channel": "cli", "agents": ["alpha", "lazy"]}},
        extra_profiles={"lazy": {"activation": "on-demand", "idle_stop_secs": 60}},
    )
    daemon = daemons(doc).start()
    assert daemon.agent("lazy")["state"] == "stopped"
    code, result = probe(daemon, "alpha", "lazy")
    assert code == 0 and result["outcome"] == "delivered"
    assert daemon.agent("lazy")["state"] == "running"


def test_counters_in_status(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(topology(root)).start()
    probe(daemon, "alpha", "beta")
    probe(daemon, "gamma", "beta")
    router = daemon.status()["router"]
    assert set(router["outcomes"]) == {"delivered", *REFUSAL_CODES}
    assert router["outcomes"]["delivered"] == 1 and router["outcomes"]["not_peers"] == 1
    text = daemon.cli("status").stdout
    assert "router    1 delivered; refused: not_peers 1; rejected connections: 0" in text


def test_no_ack_ends_in_timeout(root: Path, daemons: DaemonFactory) -> None:
    doc = topology(
        root,
        {"deaf": agent_entry()},
        groups={**OPS, "d": {"channel": "cli", "agents": ["alpha", "deaf"]}},
    )
    doc["daemon"]["delivery_timeout_secs"] = 1.0
    plan(root, "deaf", do="deaf")
    daemon = daemons(doc).start()
    code, result = probe(daemon, "alpha", "deaf")
    assert code == 1 and result["outcome"] == "timeout"
    assert "within 1s" in result["detail"]
    assert daemon.status()["router"]["outcomes"]["timeout"] == 1


def test_three_hundred_failed_handshakes_log_a_bounded_number_of_lines(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(topology(root)).start()
    router = daemon.status()["router"]
    ctx = zmq.Context.instance()
    started = time.monotonic()
    # Clients with made-up keys (libzmq does not retry a denial): enough for many times the
    # lines the throttle lets through, whose windows tests/test_log_throttle.py pins.
    for batch in range(1, 4):
        rogues = []
        for _ in range(100):
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.curve_serverkey = router["server_public_key"].encode()
            sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
            sock.connect(router["endpoint"])
            rogues.append(sock)
        try:
            status = daemon.wait_for(
                lambda s, n=batch: s["router"]["refused_connections"]["zap_denied"] >= 100 * n,
                timeout=60,
            )
        finally:
            for sock in rogues:
                sock.close()
    refused = status["router"]["refused_connections"]
    lines = [
        line
        for line in daemon.log_path.read_text().splitlines()
        if "zeroclaw.router" in line and ("bus connection" in line or "handshake" in line)
    ]
    # Per kind (a ZAP denial, a failed handshake): one line at once, then one per 10 s;
    # a loaded machine takes longer over them, and so may log a few more windows.
    windows = 2 + (time.monotonic() - started) / 10
    assert 2 <= len(lines) <= 2 * windows, (len(lines), windows, lines)
    assert refused["zap_denied"] == 300 and refused["handshake_failed"] >= 300
    assert probe(daemon, "alpha", "beta")[0] == 0


def test_the_router_refuses_a_delegation_outside_the_senders_delegates(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = topology(root, {"alpha": agent_entry(delegates=["beta"])})
    plan(root, "alpha", do="forged_questions", to="gamma", channel="cli.local")
    groups = {"all": {"channel": "cli", "agents": ["alpha", "beta", "gamma"]}}
    doc["peer_groups"] = groups
    daemon = daemons(doc).start()
    result = result_of(root, "alpha")
    assert result["code"] == "delegation_not_allowed", result
    assert daemon.status()["router"]["outcomes"]["delegation_not_allowed"] == 1


def test_the_router_counts_the_depth_of_a_chain_of_asks_whatever_the_body_says(
    root: Path, daemons: DaemonFactory
) -> None:
    hops = [f"hop{i}" for i in range(1, 6)]
    doc = make_config(
        root,
        {alias: agent_entry() for alias in hops},
        groups={"chain": {"channel": "cli", "agents": hops}},
    )
    for i, alias in enumerate(hops[:-1]):
        plan(root, alias, do="relay", next=hops[i + 1], channel="cli.local", first=i == 0)
    daemon = daemons(doc).start()
    results = [result_of(root, alias) for alias in hops[:3]]
    assert [r["outcome"] for r in results] == ["delivered", "delivered", "depth_exceeded"]
    # Each hop was told the depth the router counted, not the 0 its asker claimed.
    assert [r["received_depth"] for r in results] == [[], [1], [2]]
    assert daemon.status()["router"]["outcomes"]["depth_exceeded"] == 1
    for alias in hops[3:]:  # the chain stopped at the limit: nobody asked them
        assert not (root / "state" / "agents" / alias / "workspace" / "result.json").exists()
