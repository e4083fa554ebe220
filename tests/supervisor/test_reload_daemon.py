"""Reload against a real daemon: concurrent and bounded; and the events it leaves."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.control import (
    REQUEST_TYPES,
    AgentRestart,
    AgentsList,
    AgentStart,
    AgentStop,
    AnyRequest,
    ApprovalApprove,
    ApprovalDeny,
    ApprovalsList,
    Chat,
    ChatApproval,
    ChatCancel,
    ChatOpen,
    ControlClient,
    EventsFollow,
    EventsRecent,
    MemoryCommand,
    Metrics,
    Reload,
    RouteProbe,
    SessionShow,
    SessionsList,
    Shutdown,
    Status,
    UsageQuery,
)
from zeroclaw.events import AgentTransition, ReloadApplied

DaemonFactory = Callable[..., Daemon]
N = 10
GRACE = 2.0


def stubborn_agents(root: Path, commands: list[str] | None = None) -> dict[str, Any]:
    """N agents that ignore SIGTERM: each stop takes the whole grace, then SIGKILL."""
    doc = make_config(root, {f"stubborn{i}": agent_entry() for i in range(N)}, grace=GRACE)
    if commands is not None:
        doc["risk_profiles"]["sup"]["allowed_commands"] = commands
    return doc


def zygote_of(daemon: Daemon) -> int:
    assert daemon.proc is not None
    pid = daemon.proc.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    [zygote] = [
        int(c) for c in children if b"zeroclaw zygote" in Path(f"/proc/{c}/cmdline").read_bytes()
    ]
    return zygote


def test_a_reload_of_ten_changed_agents_replaces_them_at_once(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(stubborn_agents(root)).start()
    before = daemon.pids()
    assert len(before) == N
    daemon.write_config(stubborn_agents(root, commands=["ls"]))  # every agent's spec changes
    result = daemon.cli("reload", "--json")
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["reload"] == "ok" and len(reply["diff"]["changed"]) == N
    # At once, told by the daemon's own events rather than by a clock a loaded machine slows:
    # every agent was asked to stop before any had stopped (each ignores SIGTERM for its
    # whole grace; one after another, the first would stop before the second is asked).
    events = daemon.cli("events", "--kind", "agent.transition", "--json")
    moves = [
        (e["alias"], e["from_state"], e["to_state"])
        for e in (json.loads(line)["event"] for line in events.stdout.splitlines())
    ]
    asked = [i for i, (_, old, new) in enumerate(moves) if (old, new) == ("running", "stopping")]
    stopped = [i for i, (_, old, _new) in enumerate(moves) if old == "stopping"]
    assert len(asked) == N and len(stopped) >= N, moves
    assert max(asked) < min(stopped), moves
    status = daemon.wait_for(lambda s: all(a["state"] == "running" for a in s["agents"]))
    after = {a["alias"]: a["pid"] for a in status["agents"]}
    assert all(after[alias] != pid for alias, pid in before.items())


def test_a_reload_whose_agents_never_stop_returns_within_its_bound(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(root, {"alpha": agent_entry(), "beta": agent_entry()}, grace=1.0)
    daemon = daemons(doc).start()
    old = daemon.pids()
    doc["risk_profiles"]["sup"]["allowed_commands"] = ["ls"]
    daemon.write_config(doc)
    zygote = zygote_of(daemon)
    # A stopped zygote reports no exit: the old agents never count as stopped.
    os.kill(zygote, signal.SIGSTOP)
    try:
        result = daemon.cli("reload", "--json", timeout=60)
    finally:
        os.kill(zygote, signal.SIGCONT)
    assert result.returncode == 1, result.stderr
    reply = json.loads(result.stdout)
    assert reply["ok"] is False and reply["reload"] == "incomplete"
    assert sorted(reply["errors"]) == [
        f"agent {a} did not stop within 6s; its new process starts once it has "
        "(is the zygote alive?)"
        for a in ("alpha", "beta")
    ]
    # Once the zygote reports the exits, the replacements start after all.
    status = daemon.wait_for(
        lambda s: (
            {a["alias"]: a["state"] for a in s["agents"]} == {"alpha": "running", "beta": "running"}
            and all(a["pid"] not in old.values() for a in s["agents"])
        )
    )
    assert status["daemon"]["reload"]["state"] == "incomplete"
    assert daemon.cli("reload").returncode == 0  # nothing left to replace


def test_a_reload_and_an_agent_start_leave_their_events(root: Path, daemons: DaemonFactory) -> None:
    doc = make_config(
        root,
        {"alpha": agent_entry(), "lazy": agent_entry(runtime_profile="lazy")},
        extra_profiles={"lazy": {"activation": "on-demand", "idle_stop_secs": 60.0}},
    )
    daemon = daemons(doc).start()
    assert daemon.cli("agents", "start", "lazy").returncode == 0
    del doc["agents"]["alpha"]
    daemon.write_config(doc)
    assert daemon.cli("reload").returncode == 0
    reply = ControlClient(daemon.runtime_dir).call(EventsRecent())
    assert reply.ok and reply.data is not None
    events = [p.event for p in reply.data.events]
    lazy = [(e.from_state, e.to_state) for e in events if isinstance(e, AgentTransition)]
    assert ("stopped", "starting") in lazy and ("starting", "running") in lazy
    reloads = [e for e in events if isinstance(e, ReloadApplied)]
    assert reloads == [ReloadApplied(outcome="ok", removed=("alpha",))]
    assert AgentTransition("alpha", "running", "stopping", "removed from config") in events
    newest = ControlClient(daemon.runtime_dir).call(EventsRecent(limit=1)).data
    assert newest is not None and len(newest.events) == 1
    assert newest.events[0].seq >= max(p.seq for p in reply.data.events)


def test_every_request_type_reaches_its_handler(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()})).start()
    client = ControlClient(daemon.runtime_dir)
    samples: dict[type[Any], tuple[AnyRequest, str | None]] = {
        Status: (Status(), None),
        AgentsList: (AgentsList(), None),
        AgentStart: (AgentStart("nope"), "unknown_agent"),
        AgentStop: (AgentStop("nope"), "unknown_agent"),
        AgentRestart: (AgentRestart("nope"), "unknown_agent"),
        RouteProbe: (RouteProbe(from_="alpha", to="nope"), "unknown_agent"),
        MemoryCommand: (MemoryCommand(op="stats", agent="nope"), "unknown_agent"),
        SessionsList: (SessionsList(agent="nope"), "unknown_agent"),
        SessionShow: (SessionShow(agent="alpha", session="nope"), "session_not_found"),
        ApprovalsList: (ApprovalsList(), None),
        ApprovalApprove: (ApprovalApprove(id="nope"), "unknown_approval"),
        ApprovalDeny: (ApprovalDeny(id="nope"), "unknown_approval"),
        UsageQuery: (UsageQuery(since="nope"), "bad_request"),
        Chat: (Chat(agent="nope", text="hi"), "unknown_agent"),
        ChatOpen: (ChatOpen(agent="nope"), "unknown_agent"),
        ChatCancel: (ChatCancel(), "bad_request"),
        ChatApproval: (ChatApproval(approved=True), "bad_request"),
        EventsRecent: (EventsRecent(), None),
        EventsFollow: (EventsFollow(kinds=("nope",)), "bad_request"),
        Reload: (Reload(), None),
        Metrics: (Metrics(), None),
        Shutdown: (Shutdown(), None),  # last: it stops the daemon
    }
    assert set(samples) == set(REQUEST_TYPES)
    for request, code in samples.values():
        reply = client.request(request)
        assert reply.error == code, (request, reply)
    assert daemon.wait_exit() == 0


def test_an_agent_a_reload_adds_or_changes_is_running_when_the_reload_answers(
    root: Path, daemons: DaemonFactory
) -> None:
    # `zeroclaw reload` and then a chat with the new agent: the reload answers once what it
    # started has come up, as the daemon's start sends READY only then (a chat right after
    # it found the new agent `unavailable` while it was still starting).
    daemon = daemons(make_config(root, {"alpha": agent_entry()})).start()
    daemon.write_config(
        make_config(root, {"alpha": agent_entry(peer_tools=["file_read"]), "beta": agent_entry()})
    )
    result = daemon.cli("reload", "--json")
    assert result.returncode == 0, result.stderr
    diff = json.loads(result.stdout)["diff"]
    assert (diff["added"], diff["changed"]) == (["beta"], ["alpha"])
    # Told by the daemon's own event order, not by how fast a CLI process starts.
    events = daemon.cli("events", "--json")
    seen = [json.loads(line)["event"] for line in events.stdout.splitlines()]
    applied = max(i for i, e in enumerate(seen) if e["kind"] == "reload")
    up = [
        e["alias"]
        for e in seen[:applied]
        if e["kind"] == "agent.transition" and e["to_state"] == "running"
    ]
    assert up.count("alpha") == 2 and up.count("beta") == 1, seen
    chat = daemon.cli("--agent", "beta", "chat", "-m", "hello")
    assert chat.returncode == 0, chat.stderr
