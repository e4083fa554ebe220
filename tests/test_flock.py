"""The one lock file (daemon runtime dir, memory store): exclusive, says whose, released
with its holder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zeroclaw._flock import FileLock, LockHeld
from zeroclaw.memory import MemoryLock, MemoryLocked


def test_a_held_lock_refuses_a_second_holder_and_names_the_first(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with FileLock(path, record_pid=True):
        with pytest.raises(LockHeld) as caught:
            FileLock(path).acquire()
        assert caught.value.pid == os.getpid()
    assert path.read_text() == ""  # the pid leaves with its holder


def test_a_released_lock_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    first = FileLock(path)
    first.acquire()
    first.release()
    with FileLock(path) as second:
        assert second.held
    assert not second.held


def test_a_waiting_lock_gives_up_after_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "deeper" / "memory.lock"
    # The first creates the parent directory; the second waits, then gives up.
    with (
        MemoryLock(path, timeout=0.1),
        pytest.raises(MemoryLocked, match="locked by another writer"),
    ):
        MemoryLock(path, timeout=0.1).acquire()
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
