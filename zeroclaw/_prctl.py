"""prctl(2) for the few Linux process attributes we rely on: death signal, subreaper, and
no-new-privileges (which Landlock requires)."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_death_signal(expected_parent: int, signum: int = signal.SIGKILL) -> None:
    """Get `signum` (default: die by SIGKILL) when the parent dies; exit now if it already
    has (the fork race)."""
    prctl(PR_SET_PDEATHSIG, signum)
    if os.getppid() != expected_parent:
        os._exit(1)
