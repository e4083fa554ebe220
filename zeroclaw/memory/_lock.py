"""The memory write lock: the daemon holds it for its lifetime, the CLI while it writes
without a daemon, so the two never write at once."""

from __future__ import annotations

from pathlib import Path

from .._flock import FileLock, LockHeld


class MemoryLocked(Exception):
    pass


class MemoryLock(FileLock):
    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        super().__init__(path, timeout=timeout, make_parent=True)

    def acquire(self) -> None:
        try:
            super().acquire()
        except LockHeld:
            raise MemoryLocked(
                f"the memory store is locked by another writer ({self.path})"
            ) from None
