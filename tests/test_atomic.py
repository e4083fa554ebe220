"""The one atomic-write helper: whole files, the asked mode, no leftovers on failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zeroclaw._atomic import atomic_write


def test_replaces_the_file_whole_with_the_asked_mode(tmp_path: Path) -> None:
    target = tmp_path / "zeroclaw.toml"
    target.write_text("old")
    old_umask = os.umask(0o077)
    try:
        atomic_write(target, b"new", mode=0o644)
    finally:
        os.umask(old_umask)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o644
    assert os.listdir(tmp_path) == ["zeroclaw.toml"]


def test_a_failed_rename_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "inside").write_text("x")
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path / "dir", b"data")  # a non-empty directory cannot be replaced
    assert sorted(os.listdir(tmp_path)) == ["dir"]


def test_a_name_under_a_directory_fd_stays_in_that_directory(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        atomic_write("note.txt", b"beneath", dir_fd=fd, fsync=False)
    finally:
        os.close(fd)
    assert (tmp_path / "note.txt").read_bytes() == b"beneath"
    assert (tmp_path / "note.txt").stat().st_mode & 0o777 == 0o600
