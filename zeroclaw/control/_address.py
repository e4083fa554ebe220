"""Where the control socket lives: an abstract unix socket name derived from the runtime dir.

Abstract, not a file: Landlock can forbid a sandboxed process to connect to an abstract
socket made outside its domain (scope ABSTRACT_UNIX_SOCKET, ABI 6), while connect() to a
pathname socket is no filesystem right it governs (ADR 0011). The name is a digest of the
resolved runtime dir, so the CLI finds the daemon of a config file with no extra setting
and two daemons with different runtime dirs never collide. Abstract names live in the
network namespace: a daemon under systemd's PrivateNetwork= cannot be reached from outside.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PREFIX = "zeroclaw/control/"
PROC_NET_UNIX = "/proc/net/unix"
_LISTENING = 0x00010000  # __SO_ACCEPTCON in /proc/net/unix's Flags column


def control_address(runtime_dir: Path) -> str:
    """The socket address (a leading NUL makes it abstract) for this runtime dir."""
    resolved = os.path.realpath(runtime_dir)
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:32]
    return f"\0{PREFIX}{digest}"


def printable(address: str) -> str:
    """How `ss -xl` and /proc/net/unix show it."""
    return "@" + address[1:] if address.startswith("\0") else address


def is_listening(address: str, table: str | None = None) -> bool:
    """Whether some process listens on `address` in our network namespace, without
    connecting to it (`stop` waits for this to turn false)."""
    if table is None:
        try:
            with open(PROC_NET_UNIX) as fh:
                table = fh.read()
        except OSError:
            return False
    wanted = printable(address)
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7] == wanted and int(fields[3], 16) & _LISTENING:
            return True
    return False
