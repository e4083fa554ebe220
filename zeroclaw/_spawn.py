"""Start a child process from the trio thread, so that a death signal it sets means "when
this process dies" (ADR 0051).

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process
(prctl(2): "the parent in this case is considered to be the thread that created this
process"). `trio.lowlevel.open_process` forks in one of trio's cached worker threads, and
trio retires a worker after 10 s idle: each child of ours that sets a death signal was then
SIGKILLed about 10 s after its start while we were alive. `open_child` forks on the calling
thread — the trio thread, the main thread, which lives as long as the process — and hands
back a `Child` with the part of `trio.Process` our call sites use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

import trio


class Child:
    """One started child: its pipes as trio streams, `wait()` on its pidfd, signals."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        pidfd: int | None,
        stdin: trio.lowlevel.FdStream | None,
        stdout: trio.lowlevel.FdStream | None,
        stderr: trio.lowlevel.FdStream | None,
    ) -> None:
        self._popen = popen
        self._pidfd: int | None = pidfd
        self._wait_lock = trio.Lock()
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: the signal), or None while it runs; always current
        (it reaps the child once it exited, as `trio.Process.returncode` does)."""
        result = self._popen.poll()
        if result is not None:
            self._close_pidfd()
        return result

    async def wait(self) -> int:
        """Until the child exits; then it is reaped and its status returned."""
        async with self._wait_lock:
            if self.returncode is None:
                if self._pidfd is not None:
                    # A concurrent `returncode` may close the pidfd under us: it exited then.
                    with contextlib.suppress(trio.ClosedResourceError):
                        await trio.lowlevel.wait_readable(self._pidfd)
                else:
                    # A kernel without pidfds (before 5.3): wait in a thread, as trio does;
                    # abandoned on cancel, it ends when the child does (callers kill it).
                    await trio.to_thread.run_sync(
                        _wait_exited, self._popen.pid, abandon_on_cancel=True
                    )
                # Readable means exited: reaping through Popen keeps its state right (and
                # does not block).
                self._popen.wait()
                self._close_pidfd()
        assert self._popen.returncode is not None
        return self._popen.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the child unless it was reaped (Popen checks, so never a reused pid)."""
        self._popen.send_signal(signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None


def _wait_exited(pid: int) -> None:
    """Until `pid` (our child) exited, leaving it unreaped (WNOWAIT) for Popen to reap."""
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


async def open_child(
    argv: Sequence[str],
    *,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    **popen_options: Any,
) -> Child:
    """`subprocess.Popen(argv, ...)` on the calling (trio) thread. `stdin`, `stdout` and
    `stderr` take what Popen takes as an int (PIPE, DEVNULL, an fd; STDOUT for stderr); a
    PIPE becomes the matching `Child` stream. Raises what Popen raises."""
    await trio.lowlevel.checkpoint_if_cancelled()
    ours: list[trio.lowlevel.FdStream] = []
    theirs: list[int] = []

    def pipe(ours_is_read: bool) -> tuple[trio.lowlevel.FdStream, int]:
        read, write = os.pipe()  # both close-on-exec; Popen dup2s the child's end
        ours_fd, their_fd = (read, write) if ours_is_read else (write, read)
        theirs.append(their_fd)
        stream = trio.lowlevel.FdStream(ours_fd)
        ours.append(stream)
        return stream, their_fd

    child_stdin: trio.lowlevel.FdStream | None = None
    child_stdout: trio.lowlevel.FdStream | None = None
    child_stderr: trio.lowlevel.FdStream | None = None
    try:
        if stdin == subprocess.PIPE:
            child_stdin, stdin = pipe(ours_is_read=False)
        if stdout == subprocess.PIPE:
            child_stdout, stdout = pipe(ours_is_read=True)
        if stderr == subprocess.STDOUT and stdout is not None:
            stderr = stdout  # the same pipe (or file) as stdout, as trio.Process does
        elif stderr == subprocess.PIPE:
            child_stderr, stderr = pipe(ours_is_read=True)
        # On this thread, not a worker thread: the child's death signal is tied to the
        # thread that forks it (see the module docstring). It blocks the trio thread for
        # the fork and the exec only (Popen returns once the exec happened), milliseconds.
        popen = subprocess.Popen(  # noqa: ASYNC220 - must fork on the trio thread (ADR 0051)
            list(argv), stdin=stdin, stdout=stdout, stderr=stderr, **popen_options
        )
    except BaseException:
        for stream in ours:
            stream.close()
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    pidfd: int | None
    try:
        # Opened before anyone can reap it (only `Child` does), so it names this child.
        pidfd = os.pidfd_open(popen.pid)
    except OSError as exc:
        if exc.errno != errno.ENOSYS:
            popen.kill()
            popen.wait()
            for stream in ours:
                stream.close()
            raise
        pidfd = None
    # A scheduling point that cannot raise Cancelled: the child is started, the caller
    # must get it to stop and reap it.
    await trio.lowlevel.cancel_shielded_checkpoint()
    return Child(popen, pidfd, child_stdin, child_stdout, child_stderr)
