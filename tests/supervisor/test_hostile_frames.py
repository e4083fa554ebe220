"""Deeply nested frames against a real daemon: on the bus from an agent with its real
keys, on the control socket from a local client, on an agent's private link. Each fails
only that frame (or that link) with a typed error; the daemon serves on (ADR 0014)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.hostile import nested_msgpack, spliced
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.control import ControlClient, Status

DaemonFactory = Callable[..., Daemon]
DEPTH = 10_000  # a few KB of msgpack; RecursionError in an unguarded decoder


def topology(root: Path, extra: dict[str, Any]) -> dict[str, Any]:
    agents = {"alpha": agent_entry(), "beta": agent_entry(), **extra}
    members = ["alpha", "beta", *extra]
    return make_config(root, agents, groups={"ops": {"channel": "cli", "agents": members}})


def write_plan(root: Path, alias: str, **steps: Any) -> None:
    workspace = root / "state" / "agents" / alias / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "plan.json").write_text(json.dumps(steps))


def serves(daemon: Daemon) -> None:
    """`status` answers and a probe between two agents is delivered."""
    states = {a["alias"]: a["state"] for a in daemon.status()["agents"]}
    assert states["alpha"] == states["beta"] == "running"
    probe = daemon.cli("route", "probe", "--from", "alpha", "--to", "beta", "--json")
    assert probe.returncode == 0 and json.loads(probe.stdout)["outcome"] == "delivered"


def test_nested_bus_frames_from_an_agent_are_refused_and_the_daemon_serves(
    root: Path, daemons: DaemonFactory
) -> None:
    write_plan(root, "nester", do="nested", to="alpha", channel="cli.local", depth=DEPTH, repeat=5)
    daemon = daemons(topology(root, {"nester": agent_entry()})).start()
    result = daemon.wait_for(lambda s: s["router"]["outcomes"]["malformed"] >= 25)
    assert result["router"]["outcomes"]["delivered"] >= 1
    workspace = root / "state" / "agents" / "nester" / "workspace"
    done = daemon.wait_for(lambda s: (workspace / "result.json").exists())
    report = json.loads((workspace / "result.json").read_text())
    # Nested past the bound but readable: refused to its sender, by id, as malformed.
    assert report["refusals"] == {f"deep-{i}": "malformed" for i in range(5)}
    assert report["after"] == "delivered"  # the nester's own connection still works
    assert {a["alias"]: a["restarts"] for a in done["agents"]}["nester"] == 0
    serves(daemon)
    daemon.assert_alive()


def test_nested_control_frames_get_malformed_and_the_daemon_serves(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(topology(root, {})).start()
    client = ControlClient(daemon.runtime_dir, timeout=10)
    memory = {"cmd": "memory", "op": "list", "agent": "alpha", "args": {"limit": ...}}
    for payload in (
        nested_msgpack(DEPTH),
        nested_msgpack(DEPTH, b"\x81\xa1k"),
        spliced(memory, nested_msgpack(DEPTH)),
        spliced(memory, nested_msgpack(100)),  # past the bound, within the interpreter's
        spliced({"cmd": "chat", "agent": "alpha", "text": ...}, nested_msgpack(DEPTH)),
    ):
        with client.session() as session:
            session.send_payload(payload)
            reply = session.next_reply()
        assert (reply.ok, reply.error) == (False, "malformed")
    assert client.request(Status()).ok
    serves(daemon)
    daemon.assert_alive()


def test_a_nested_link_frame_drops_only_that_agents_link(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(topology(root, {"linkbomb": agent_entry()})).start()
    status = daemon.wait_for(
        lambda s: (
            {a["alias"]: (a["state"], a["restarts"]) for a in s["agents"]}["linkbomb"]
            == ("running", 1)
        ),
        timeout=60,
    )
    assert "sent a bad link frame" in daemon.log_text()
    assert {a["alias"]: a["restarts"] for a in status["agents"]}["alpha"] == 0
    serves(daemon)
    daemon.assert_alive()
