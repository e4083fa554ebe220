"""One daemon per runtime directory: an flock'd lock file holding the owner's pid."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None, lock_path: Path) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"another zeroclaw daemon ({who}) is already running with runtime dir "
            f"{lock_path.parent}; stop it first (zeroclaw stop) or use another runtime_dir"
        )
        self.pid = pid


class PidLock:
    """Held for the daemon's lifetime. The kernel drops an flock when its holder dies, so a
    lock file left by a SIGKILLed daemon is simply taken over: stale files are harmless."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise AlreadyRunning(owner, self.path) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
