"""`zeroclaw events [--follow]` against a real daemon: real agents killed with SIGKILL, a
real follower subprocess read line by line, a raw control-socket client that stops reading."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE, REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.control import (
    ControlClient,
    ControlSession,
    DaemonUnreachable,
    EventsFollow,
    EventsReply,
    MemoryCommand,
    Reply,
    Status,
)
from zeroclaw.ops import KIND_NAMES

DaemonFactory = Callable[..., Daemon]


class Lines:
    """A subprocess's stdout, read line by line with a deadline (no sleeps)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self._fd = proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._buffer = b""
        self.seen: list[str] = []

    def next(self, deadline: float) -> str:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                raise AssertionError(f"no line in time; so far: {self.seen[-10:]}")
            chunk = os.read(self._fd, 65536)
            if not chunk:
                raise AssertionError(f"stdout ended; so far: {self.seen[-10:]}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.seen.append(line.decode())
        return self.seen[-1]

    def until(
        self, match: Callable[[dict[str, Any]], bool], timeout: float = PATIENCE
    ) -> dict[str, Any]:
        """The first JSON line from now on that `match`es."""
        deadline = time.monotonic() + timeout
        while True:
            item: dict[str, Any] = json.loads(self.next(deadline))
            if match(item):
                return item


@contextmanager
def follower(daemon: Daemon, *args: str) -> Iterator[Lines]:
    proc = subprocess.Popen(
        [*daemon.cli_argv(), "events", "--follow", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    try:
        yield Lines(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        assert proc.stdout is not None
        proc.stdout.close()


def transition(alias: str, old: str, new: str) -> Callable[[dict[str, Any]], bool]:
    def match(item: dict[str, Any]) -> bool:
        event = item["event"]
        return (
            event["kind"] == "agent.transition"
            and event["alias"] == alias
            and (event["from_state"], event["to_state"]) == (old, new)
        )

    return match


def running(daemon: Daemon, *aliases: str) -> dict[str, Any]:
    return daemon.wait_for(
        lambda s: all(a["state"] == "running" for a in s["agents"] if a["alias"] in aliases)
    )


@pytest.fixture
def daemon(root: Path, daemons: DaemonFactory) -> Daemon:
    started = daemons(make_config(root, {"alpha": agent_entry(), "beta": agent_entry()})).start()
    running(started, "alpha", "beta")
    return started


def test_follow_json_shows_a_kill_9_and_the_restart(daemon: Daemon) -> None:
    # --kind agent: the start-up discovery scan's events may push alpha's start out of the
    # backlog of 10 (see test_sigint_ends_a_follow_quietly).
    with follower(daemon, "--json", "--kind", "agent") as lines:
        # The backlog (the newest 10) shows alpha's start: the follower is subscribed.
        started = lines.until(transition("alpha", "starting", "running"))
        assert started["schema_version"] == 1
        os.kill(daemon.pids()["alpha"], signal.SIGKILL)
        died = lines.until(transition("alpha", "running", "backoff"))
        again = lines.until(transition("alpha", "backoff", "starting"))
        back = lines.until(transition("alpha", "starting", "running"))
        assert started["seq"] < died["seq"] < again["seq"] < back["seq"]
        assert all(json.loads(line)["schema_version"] == 1 for line in lines.seen)
    running(daemon, "alpha")


def test_events_prints_past_transitions_in_words_and_filters_them(daemon: Daemon) -> None:
    old = daemon.pids()["alpha"]
    os.kill(old, signal.SIGKILL)
    daemon.wait_for(
        lambda s: any(
            a["alias"] == "alpha" and a["pid"] not in (None, old) and a["state"] == "running"
            for a in s["agents"]
        )
    )
    result = daemon.cli("events")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(" agent.transition alpha running -> backoff" in line for line in lines), lines
    assert any(" agent.transition alpha backoff -> starting" in line for line in lines), lines
    assert any(" agent.transition beta starting -> running" in line for line in lines), lines
    # Filtered: by agent (local or global option), by kind family.
    for args in (["events", "--agent", "beta"], ["--agent", "beta", "events"]):
        result = daemon.cli(*args)
        assert result.returncode == 0, result.stderr
        assert result.stdout and all(" beta " in line for line in result.stdout.splitlines())
    result = daemon.cli("events", "--kind", "agent", "--json", "--limit", "2")
    items = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(items) == 2 and all(i["event"]["kind"] == "agent.transition" for i in items)
    assert items[0]["seq"] < items[1]["seq"]
    result = daemon.cli("events", "--kind", "reload")
    assert result.returncode == 0 and result.stdout == ""


def test_a_memory_purge_is_an_event(daemon: Daemon) -> None:
    result = daemon.cli("memory", "purge", "--agent", "beta", "--yes")
    assert result.returncode == 0, result.stderr
    result = daemon.cli("events", "--kind", "memory", "--agent", "beta", "--json")
    events = [json.loads(line)["event"] for line in result.stdout.splitlines()]
    assert {"kind": "memory", "agent": "beta", "op": "purge"} in events
    assert (
        daemon.cli("events", "-k", "memory")
        .stdout.splitlines()[-1]
        .endswith(" memory beta purge ok")
    )


def test_an_unknown_kind_is_a_usage_error_naming_the_known_ones(daemon: Daemon) -> None:
    result = daemon.cli("events", "--kind", "agent", "--kind", "agnt")
    assert result.returncode == 2
    assert "unknown event kind 'agnt'" in result.stderr
    assert all(kind in result.stderr for kind in KIND_NAMES)
    result = daemon.cli("events", "--follow", "--kind", "nope", "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "bad_request"
    # The daemon checks too (a CLI of another version).
    reply = ControlClient(daemon.runtime_dir).request(EventsFollow(kinds=("nope",)))
    assert reply.error == "bad_request" and "agent.transition" in (reply.message or "")


def test_sigint_ends_a_follow_quietly(daemon: Daemon) -> None:
    # Agent events only: the backlog is the newest 10, and the daemon's start-up discovery
    # scan (a dozen events, later than the agents' start on a loaded machine) can fill it.
    with follower(daemon, "--kind", "agent") as lines:
        assert " agent.transition " in lines.next(time.monotonic() + PATIENCE)
        lines.proc.send_signal(signal.SIGINT)
        assert lines.proc.wait(PATIENCE) == 130
        assert lines.proc.stderr is not None
        assert lines.proc.stderr.read() == b""


def test_a_follow_sees_the_daemon_stop_its_agents_then_exits_3(daemon: Daemon) -> None:
    with follower(daemon, "--json", "--kind", "agent", "--agent", "beta") as lines:
        lines.until(transition("beta", "starting", "running"))
        assert daemon.cli("stop").returncode == 0
        lines.until(transition("beta", "running", "stopping"))
        last = lines.until(lambda item: "ok" in item)  # --json: the failure is JSON too
        assert last["ok"] is False and last["error"]["code"] == "unavailable"
        assert "the daemon closed the connection" in last["error"]["message"]
        assert lines.proc.wait(PATIENCE) == 3


def test_no_daemon_is_exit_3(root: Path) -> None:
    idle = Daemon(root, make_config(root, {"alpha": agent_entry()}))
    try:
        for args in (["events"], ["events", "--follow"]):
            result = idle.cli(*args)
            assert result.returncode == 3, result
            assert "no zeroclaw daemon" in result.stderr
        result = idle.cli("events", "--json")
        assert result.returncode == 3
        assert json.loads(result.stdout)["ok"] is False
    finally:
        idle.stop()


# --- slow readers -------------------------------------------------------------------------


def flood(daemon: Daemon, count: int) -> None:
    """`count` events, fast: memory operations on an agent that does not exist (each is
    refused, and published, without touching the store)."""
    with ControlSession(daemon.runtime_dir) as session:
        for _ in range(count):
            session.send(MemoryCommand(op="get", agent="nobody", args={"key": "k"}))
            assert session.next_reply().error == "unknown_agent"


def drain(session: ControlSession, timeout: float = 30) -> list[Reply[Any]]:
    """Every reply until the daemon closes the connection."""
    session._sock.settimeout(timeout)
    replies: list[Reply[Any]] = []
    try:
        while True:
            replies.append(session.next_reply(EventsReply))
    except DaemonUnreachable:
        return replies


def answers_status(daemon: Daemon) -> bool:
    """The daemon still answers a control request (a stalled one never would; how fast it
    answers is the machine's load, not a property of the daemon)."""
    return ControlClient(daemon.runtime_dir, timeout=PATIENCE).call(Status()).ok


def test_a_reader_that_never_reads_is_cut_off_and_the_daemon_goes_on(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()}))
    daemon.start(ZEROCLAW_EVENTS_SEND_SECS="1")
    stuck = ControlSession(daemon.runtime_dir, timeout=30)
    stuck.send(EventsFollow(backlog=0, kinds=("memory",)))
    flood(daemon, 3000)
    assert answers_status(daemon)
    replies = drain(stuck)  # ends: the daemon closed the connection
    stuck.close()
    assert replies and all(r.ok and r.more for r in replies[:-1])
    received = sum(len(r.data.events) for r in replies if r.data is not None)
    assert received < 3000
    assert replies[-1].ok or replies[-1].error == "slow_reader"
    assert "events reader cut off" in daemon.log_text()
    assert answers_status(daemon)
    # Still serving readers: the whole ring's memory events, in batches.
    request = EventsFollow(follow=False, kinds=("memory",))
    replies = list(ControlClient(daemon.runtime_dir).stream(request, EventsReply))
    assert len(replies) > 1 and all(r.more for r in replies[:-1]) and replies[-1].ok
    assert sum(len(r.data.events) for r in replies) >= 3000


def test_a_reader_that_falls_too_far_behind_gets_slow_reader(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()}))
    # A long send deadline: what cuts this reader off is the overflow of its buffer.
    daemon.start(ZEROCLAW_EVENTS_SEND_SECS="600")
    lagging = ControlSession(daemon.runtime_dir, timeout=30)
    lagging.send(EventsFollow(backlog=0, kinds=("memory",)))
    flood(daemon, 5000)  # more than its socket and its 1024-event buffer hold
    replies = drain(lagging)  # reading again: what it got, then the reason it gets no more
    lagging.close()
    assert replies[-1].error == "slow_reader", replies[-1]
    assert "behind" in (replies[-1].message or "")
    seqs = [p.seq for r in replies[:-1] if r.data is not None for p in r.data.events]
    assert seqs == sorted(seqs) and len(seqs) < 5000
    assert answers_status(daemon)
