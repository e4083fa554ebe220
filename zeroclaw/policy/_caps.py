"""Capabilities: drop them all, for good (ADR 0043). A thin ctypes layer over prctl(2)
and capset(2); what to drop is decided in `_confine`.

Order matters: the bounding set can only be shrunk while CAP_SETPCAP is effective, so it
goes first; then the ambient set; then effective, permitted and inheritable are zeroed.
With an empty bounding set and no_new_privs, no later execve (a setuid binary, a file
with capabilities, root's own exec rule) gives any back.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterable

from .._prctl import PR_SET_NO_NEW_PRIVS

PR_CAPBSET_READ = 23
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_LAST_CAP_FILE = "/proc/sys/kernel/cap_last_cap"
FALLBACK_LAST_CAP = 40  # CAP_CHECKPOINT_RESTORE, Linux 5.9

_libc = ctypes.CDLL(None, use_errno=True)


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def cap_last_cap() -> int:
    """The kernel's highest capability number."""
    try:
        with open(CAP_LAST_CAP_FILE) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return FALLBACK_LAST_CAP


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    result = int(_libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), 0, 0))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def drop_capabilities(caps: Iterable[int]) -> None:
    """Drop `caps` from the bounding set, clear the ambient set, zero effective, permitted
    and inheritable, and set no_new_privs. Raises OSError if a step the process has the
    right to do fails. Without CAP_SETPCAP (a daemon not run as root) the bounding set
    cannot shrink; with nothing permitted and no_new_privs it can give nothing back."""
    for cap in caps:
        try:
            if not _prctl(PR_CAPBSET_READ, cap):
                continue
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # a number this kernel does not know
                continue
            if exc.errno != errno.EPERM:
                raise
            break  # no CAP_SETPCAP: the bounding set stays, inert (see above)
    try:
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # a kernel before 4.3 has no ambient set
            raise
    header = _Header(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()  # all zero: nothing effective, permitted or inheritable
    if _libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
