"""prctl(2) for the few Linux process attributes we rely on: death signal, subreaper,
no-new-privileges (which Landlock requires) and dumpability (ADR 0011)."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def get(option: int) -> int:
    """A prctl that answers with its return value (PR_GET_*)."""
    result = int(_libc.prctl(option, 0, 0, 0, 0))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def set_not_dumpable() -> None:
    """No ptrace, no /proc/<pid>/environ, mem or fd for other processes of our uid that lack
    CAP_SYS_PTRACE; no core dump. Reset by execve, so every process that holds secrets sets
    it itself."""
    prctl(PR_SET_DUMPABLE, 0)


def set_death_signal(expected_parent: int, signum: int = signal.SIGKILL) -> None:
    """Get `signum` (default: die by SIGKILL) when the parent dies; exit now if it already
    has (the fork race)."""
    prctl(PR_SET_PDEATHSIG, signum)
    if os.getppid() != expected_parent:
        os._exit(1)
