"""One daemon per runtime directory: an flock'd lock file holding the owner's pid."""

from __future__ import annotations

from pathlib import Path

from .._flock import FileLock, LockHeld


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None, lock_path: Path) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"another zeroclaw daemon ({who}) is already running with runtime dir "
            f"{lock_path.parent}; stop it first (zeroclaw stop) or use another runtime_dir"
        )
        self.pid = pid


class PidLock(FileLock):
    """Held for the daemon's lifetime, with the daemon's pid in the file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, record_pid=True)

    def acquire(self) -> None:
        try:
            super().acquire()
        except LockHeld as exc:
            raise AlreadyRunning(exc.pid, self.path) from None
