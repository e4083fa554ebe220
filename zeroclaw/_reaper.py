"""A small intermediate that runs one program so that everything it starts ends with it.

Run as a script (`python -I -S _reaper.py TIMEOUT RULESET_FD STATUS_FD FILTER -- ARGV...`), it
imports nothing of zeroclaw (it must start in milliseconds and outside any finder hook).
It makes itself a child subreaper, so that a descendant of the program that double-forks
or calls `setsid()` — leaving the program's process group and session — is re-parented to
it instead of to init; it forks, and the child enters the Landlock ruleset RULESET_FD
(-1: none), then the seccomp filter FILTER (hex of its BPF instructions; `-`: none) and
execs ARGV. When the program exits, when TIMEOUT seconds have passed, or when
this process gets SIGTERM (its parent's stop, or the death signal of its parent), every
descendant left is killed, generation by generation, and reaped. Then it writes one status
line on STATUS_FD — `exit N`, `signal N`, `timeout`, `exec_refused ERRNO`, `exec_failed
ERRNO` — and exits. The program's own output is never parsed for that status.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SYS_LANDLOCK_RESTRICT_SELF = 446
MAX_PASSES = 256  # one generation of a leftover tree dies per pass

_libc = ctypes.CDLL(None, use_errno=True)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _enter_filter(program: bytes) -> bool:
    code = ctypes.create_string_buffer(program, len(program))
    fprog = _Program(len(program) // 8, ctypes.addressof(code))
    result: int = _libc.prctl(
        ctypes.c_int(PR_SET_SECCOMP),
        ctypes.c_ulong(SECCOMP_MODE_FILTER),
        ctypes.byref(fprog),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )
    return result == 0


class Stop(Exception):
    """The deadline passed (`timeout`) or the parent asked to stop."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _children(me: int) -> list[int]:
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            kids.append(int(name))
    return kids


def kill_descendants() -> None:
    """Kill and reap every child; a killed one's children are ours by then, for the next
    pass (this process is their subreaper)."""
    me = os.getpid()
    for _ in range(MAX_PASSES):
        kids = _children(me)
        if not kids:
            break
        for pid in kids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in kids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    while True:  # zombies whose exit raced the last listing
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _exec(ruleset: int, program: bytes, argv: list[str], status_fd: int, error_fd: int) -> None:
    """In the forked child: enter the ruleset, run the program; never returns. Why it could
    not goes on `error_fd`, which a successful exec closes (close-on-exec)."""
    why = b"exec_failed child"
    try:
        os.close(status_fd)
        for signum in (signal.SIGTERM, signal.SIGALRM):
            signal.signal(signum, signal.SIG_DFL)
        # The program dies with this process, should it ever be killed before cleaning up.
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if ruleset >= 0:
            if _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
                why = b"exec_refused sandbox"
                raise OSError(ctypes.get_errno(), "landlock_restrict_self")
            os.close(ruleset)
        if program and not _enter_filter(program):
            why = b"exec_refused seccomp"
            raise OSError(ctypes.get_errno(), "seccomp")
        os.execv(argv[0], argv)
    except OSError as exc:
        if why == b"exec_failed child":
            name = errno.errorcode.get(exc.errno or 0, "EIO").encode()
            refused = exc.errno in (errno.EACCES, errno.EPERM)
            why = (b"exec_refused " if refused else b"exec_failed ") + name
        with contextlib.suppress(OSError):
            os.write(error_fd, why)
    os._exit(127)


def _stop(why: str) -> None:
    raise Stop(why)


def main(args: list[str]) -> int:
    timeout, ruleset, status_fd = float(args[0]), int(args[1]), int(args[2])
    program = b"" if args[3] == "-" else bytes.fromhex(args[3])
    argv = args[5:]
    if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os.write(status_fd, b"exec_failed subreaper\n")
        return 1
    signal.signal(signal.SIGTERM, lambda *_: _stop("stopped"))
    signal.signal(signal.SIGALRM, lambda *_: _stop("timeout"))
    signal.setitimer(signal.ITIMER_REAL, timeout)
    status = "exec_failed fork"
    try:
        error_r, error_w = os.pipe()  # close-on-exec: EOF once the program runs
        pid = os.fork()
        if pid == 0:
            _exec(ruleset, program, argv, status_fd, error_w)
        os.close(error_w)
        if ruleset >= 0:
            os.close(ruleset)
        failed = os.read(error_r, 256).decode(errors="replace")
        _, code = os.waitpid(pid, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if failed:
            status = failed
        elif os.WIFSIGNALED(code):
            status = f"signal {os.WTERMSIG(code)}"
        else:
            status = f"exit {os.WEXITSTATUS(code)}"
    except Stop as stop:
        status = stop.why
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the cleanup itself is not cut short
        kill_descendants()
        with contextlib.suppress(OSError):
            os.write(status_fd, status.encode() + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
