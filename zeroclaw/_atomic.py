"""Replace a file whole or not at all: write a fresh file beside it, then rename it over.

A reader (or a crash) sees the old content or the new, never part of either. With `dir_fd`
the name is resolved in that directory only (openat semantics), as the file tools need to
stay beneath their root.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def atomic_write(
    path: str | Path,
    data: bytes,
    *,
    mode: int = 0o600,
    dir_fd: int | None = None,
    fsync: bool = True,
) -> None:
    """Write `data` to `path` with permissions `mode` (not narrowed by the umask). The
    directory must exist. `fsync`: the data is on disk before the rename makes it visible."""
    path = Path(path)
    temp = str(path.with_name(f".{path.name}.zc-{secrets.token_hex(6)}"))
    fd = os.open(temp, _CREATE, 0o600, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
