"""The memory write lock: the daemon holds it for its lifetime, the CLI while it writes
without a daemon, so the two never write at once."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType


class MemoryLocked(Exception):
    pass


class MemoryLock:
    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise MemoryLocked(
                        f"the memory store is locked by another writer ({self.path})"
                    ) from None
                time.sleep(0.05)  # a blocking flock cannot time out; poll briefly instead
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> MemoryLock:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
