"""One exclusive lock file, held with flock for as long as its holder keeps it.

The kernel drops an flock when its holder dies, so a lock file left by a SIGKILLed process
is simply taken over: stale files are harmless. Used for the daemon's runtime dir (one
daemon per dir, its pid in the file) and the memory store (the daemon or one CLI writer).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Self

POLL_SECS = 0.05  # a blocking flock cannot time out, so a wait polls instead


class LockHeld(Exception):
    """Someone else holds the lock; `pid` is theirs when the file records it."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(f"{path} is locked by {f'pid {pid}' if pid else 'another process'}")
        self.path = path
        self.pid = pid


class FileLock:
    def __init__(
        self,
        path: Path,
        *,
        timeout: float = 0.0,
        record_pid: bool = False,
        make_parent: bool = False,
    ) -> None:
        self.path = path
        self.timeout = timeout  # seconds to wait for a holder to let go; 0: do not wait
        self.record_pid = record_pid  # write our pid in the file, so a refusal can say whose
        self.make_parent = make_parent  # create the parent directory 0700 when missing
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise LockHeld (after `timeout` seconds of trying)."""
        if self.make_parent:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = read_pid(fd)
                    os.close(fd)
                    raise LockHeld(self.path, holder) from None
                time.sleep(POLL_SECS)
            except BaseException:
                os.close(fd)
                raise
        if self.record_pid:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            if self.record_pid:
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
