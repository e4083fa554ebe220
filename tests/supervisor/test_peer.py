"""Telling the operator from an agent by ancestry (ADR 0011): the pure decision, exhaustively,
and the /proc reading it runs on, against real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.supervisor._peer import (
    ProcEntry,
    ancestry,
    close_pidfd,
    judge_peer,
    needs_ancestry,
    peer_ancestry,
    peer_credentials,
)

US = frozenset({1000, 0})
ZYGOTE = 50
DAEMON = 45  # the zygote's parent, as in the daemon


def chain(*pids: int) -> list[ProcEntry]:
    """A well-formed chain: each pid's parent is the next, the last one's parent is 0."""
    parents = [*pids[1:], 0]
    return [ProcEntry(pid, ppid, 100) for pid, ppid in zip(pids, parents, strict=True)]


def test_operator_outside_the_zygote_is_served() -> None:
    assert judge_peer(1000, chain(900, 800, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON) == "operator"
    assert judge_peer(0, chain(900, 1), US, 0, ZYGOTE, daemon_pid=DAEMON) == "operator"


def test_uid_is_checked_first() -> None:
    assert judge_peer(65534, chain(900, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON) == "foreign_uid"


def test_root_operating_a_daemon_of_another_uid_needs_no_ancestry() -> None:
    """Agents have the daemon's uid and cannot change it: root is never one of them (and
    under ProtectProc=invisible the daemon could not read root's /proc anyway)."""
    assert needs_ancestry(1000, 1000) and not needs_ancestry(0, 1000)
    assert judge_peer(0, None, US, 1000, ZYGOTE, daemon_pid=DAEMON) == "operator"
    assert judge_peer(1000, None, US, 1000, ZYGOTE, daemon_pid=DAEMON) == "unverifiable"


def test_anything_below_the_zygote_and_the_zygote_itself_is_an_agent() -> None:
    assert judge_peer(1000, chain(ZYGOTE, 40, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON) == "agent"
    assert (
        judge_peer(1000, chain(60, ZYGOTE, 40, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON) == "agent"
    )
    assert (
        judge_peer(1000, chain(70, 61, 60, ZYGOTE, 40, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON)
        == "agent"
    )


def test_attack_what_the_daemon_itself_starts_is_never_the_operator() -> None:
    # A discovered adapter's program or an MCP adapter's server, run by the daemon for an
    # agent: its ancestry reaches the daemon but not the zygote. It was the operator.
    assert judge_peer(1000, chain(70, DAEMON, 40, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON) == (
        "agent"
    )
    assert judge_peer(1000, chain(71, 70, DAEMON, 40, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON) == (
        "agent"
    )
    # the operator's CLI shares the daemon's ancestors, never the daemon
    assert judge_peer(1000, chain(900, 40, 1), US, 1000, ZYGOTE, daemon_pid=DAEMON) == "operator"


def test_what_cannot_be_vouched_for_is_refused() -> None:
    assert (
        judge_peer(1000, None, US, 1000, ZYGOTE, daemon_pid=DAEMON) == "unverifiable"
    )  # vanished mid-read
    assert judge_peer(1000, [], US, 1000, ZYGOTE, daemon_pid=DAEMON) == "unverifiable"
    broken = [ProcEntry(900, 800, 100), ProcEntry(700, 0, 90)]  # 800 is not 700
    assert judge_peer(1000, broken, US, 1000, ZYGOTE, daemon_pid=DAEMON) == "unverifiable"
    unfinished = [ProcEntry(900, 800, 100)]  # stops before init
    assert judge_peer(1000, unfinished, US, 1000, ZYGOTE, daemon_pid=DAEMON) == "unverifiable"
    # A parent that started after its child is a reused pid: the real parent is gone.
    reused = [ProcEntry(900, 800, 100), ProcEntry(800, 0, 500)]
    assert judge_peer(1000, reused, US, 1000, ZYGOTE, daemon_pid=DAEMON) == "unverifiable"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=100), min_size=2, max_size=60), st.data())
def test_agent_exactly_when_the_zygote_or_the_daemon_is_an_ancestor(
    parent_index: list[int], data: st.DataObject
) -> None:
    """A random process tree (node i's parent is an earlier node, node 0 is init)."""
    n = len(parent_index)
    parent = [0] + [parent_index[i] % i for i in range(1, n)]
    pid = [i + 1 for i in range(n)]  # pid 1 is init
    zygote = data.draw(st.integers(min_value=0, max_value=n - 1))
    daemon = data.draw(st.integers(min_value=0, max_value=n - 1))
    peer = data.draw(st.integers(min_value=0, max_value=n - 1))
    path = [peer]
    while path[-1] != 0:
        path.append(parent[path[-1]])
    entries = [
        ProcEntry(pid[i], pid[parent[i]] if i else 0, 10 * len(path) - depth)
        for depth, i in enumerate(path)
    ]
    verdict = judge_peer(0, entries, US, 0, pid[zygote], daemon_pid=pid[daemon])
    assert verdict == ("agent" if zygote in path or daemon in path else "operator")


def test_ancestry_of_a_real_process_reaches_init() -> None:
    mine = ancestry(os.getpid())
    assert mine is not None
    assert mine[0].pid == os.getpid() and mine[0].ppid == os.getppid()
    assert mine[-1].ppid == 0
    me, us = os.geteuid(), frozenset({os.geteuid()})
    assert judge_peer(me, mine, us, me, os.getppid(), daemon_pid=-1) == "agent"
    assert judge_peer(me, mine, us, me, -1, daemon_pid=os.getppid()) == "agent"
    assert judge_peer(me, mine, us, me, -1, daemon_pid=-1) == "operator"
    assert ancestry(0) is None  # a peer in another pid namespace has no pid for us


def test_a_peer_that_exited_is_not_vouched_for() -> None:
    """Its pid could belong to someone else by the time we read /proc: the pidfd knows."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"zeroclaw-test-peer-{os.getpid()}"
    listener.bind("\0" + name)
    listener.listen(1)
    code = "import socket, sys; socket.socket(socket.AF_UNIX).connect('\\0' + sys.argv[1])"
    child = subprocess.Popen([sys.executable, "-c", code, name])
    conn, _ = listener.accept()
    child.wait()
    creds = peer_credentials(conn)
    try:
        assert creds.pid == child.pid
        if creds.pidfd is not None:
            assert peer_ancestry(creds) is None
        else:  # a kernel before 6.5: only the start-time check stands in
            assert ancestry(creds.pid) is None
    finally:
        close_pidfd(creds)
        conn.close()
        listener.close()
