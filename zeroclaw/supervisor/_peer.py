"""Who is on the other end of a control connection (ADR 0011).

Agents run as the daemon's uid, so the uid alone cannot tell the operator from an agent.
The zygote is every agent's parent and their child subreaper: whatever an agent starts,
and whatever those start, stays below the zygote even when orphaned. So a peer whose
ancestry reaches the zygote is inside some agent's sandbox and gets only a refusal. So
does a peer whose ancestry reaches the daemon itself: what the daemon starts for an agent
(a discovered adapter's program, an MCP adapter's server) runs with that agent's sandbox,
and the daemon never starts the operator.

`judge_peer` is the decision, pure; `peer_credentials` and `ancestry` read the kernel.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux 6.5
MAX_DEPTH = 4096  # deeper than pid_max allows in practice; a loop guard, not a policy

OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})

PeerVerdict = Literal["operator", "foreign_uid", "agent", "unverifiable"]


@dataclass(frozen=True)
class ProcEntry:
    """One process on the way from the peer up to init, as /proc/<pid>/stat shows it."""

    pid: int
    ppid: int
    start: int  # clock ticks after boot: a reused pid starts later than its old children


def judge_peer(
    uid: int,
    chain: Sequence[ProcEntry] | None,
    allowed_uids: frozenset[int],
    agent_uid: int,
    zygote_pid: int,
    *,
    daemon_pid: int,
) -> PeerVerdict:
    """May this peer use the control socket?

    Agents run as `agent_uid` (the daemon's) and cannot change it (no_new_privs, no
    capabilities), so only a peer of that uid needs its ancestry read; root as the operator
    of a daemon that runs as its own user is served on its uid alone.

    `chain` is the peer's ancestry, the peer first, each entry the parent of the one before,
    ending at a process whose parent is 0 (init, or the top of a pid namespace). None, an
    empty, broken or unfinished chain, or a parent younger than its child (a pid reused while
    we read) cannot be vouched for: we fail closed."""
    if uid not in allowed_uids:
        return "foreign_uid"
    if uid != agent_uid:
        return "operator"
    if not chain:
        return "unverifiable"
    for child, parent in itertools.pairwise(chain):
        if parent.pid != child.ppid or parent.start > child.start:
            return "unverifiable"
    if any(entry.pid in (zygote_pid, daemon_pid) for entry in chain):
        return "agent"
    if chain[-1].ppid != 0:
        return "unverifiable"
    return "operator"


def needs_ancestry(uid: int, agent_uid: int) -> bool:
    return uid == agent_uid


# --------------------------------------------------------------------------- the kernel side


@dataclass(frozen=True)
class PeerCredentials:
    pid: int
    uid: int
    pidfd: int | None  # pins the peer's identity while we read /proc (None: kernel too old)


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """SO_PEERCRED (as of connect()) and, where the kernel has it, a pidfd for that process.
    The caller closes the pidfd."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    pidfd: int | None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, struct.calcsize("i"))
        pidfd = struct.unpack("i", raw)[0]
    except OSError:
        pidfd = None
    return PeerCredentials(int(pid), int(uid), pidfd)


def read_stat(pid: int) -> ProcEntry | None:
    """The process's entry; None when it is gone. Out of descriptors, the OSError is
    raised: that is the daemon's trouble, not a peer we cannot vouch for."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError as exc:
        if exc.errno in OUT_OF_DESCRIPTORS:
            raise
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and ')', so split at the last one.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return ProcEntry(pid, int(fields[1]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def ancestry(pid: int) -> list[ProcEntry] | None:
    """The peer and its ancestors, or None if any of them vanished while we looked."""
    if pid <= 0:
        return None  # another pid namespace: SO_PEERCRED cannot name the process
    chain: list[ProcEntry] = []
    while pid > 0 and len(chain) < MAX_DEPTH:
        entry = read_stat(pid)
        if entry is None:
            return None
        chain.append(entry)
        pid = entry.ppid
    return chain


def peer_ancestry(creds: PeerCredentials) -> list[ProcEntry] | None:
    """`ancestry` of the peer, trusted only if the peer itself is still the process that
    connected: a live pidfd after the read proves the pid was not reused meanwhile."""
    chain = ancestry(creds.pid)
    if creds.pidfd is not None:
        try:
            signal.pidfd_send_signal(creds.pidfd, 0)
        except OSError:
            return None  # the peer exited: its pid may now be someone else's
    return chain


def close_pidfd(creds: PeerCredentials) -> None:
    if creds.pidfd is not None:
        with contextlib.suppress(OSError):
            os.close(creds.pidfd)
