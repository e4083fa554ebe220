"""A real full disk for the tests that need one: a tmpfs of a few KiB mounted on a directory
(ENOSPC from a real filesystem; skipped where mounting is not allowed)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_tmpfs(disk: Path, size: str = "16k") -> Iterator[Path]:
    """`disk` (made here) with a tmpfs of `size` on it, unmounted afterwards."""
    disk.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr!r}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
