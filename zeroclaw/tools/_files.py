"""file_read, file_write, file_list: the path policy, then a re-check at open time.

The policy decides on the resolved path. Between that decision and the open, a symlink
could be swapped in; so the file is opened by its resolved path with O_NOFOLLOW, and the
path the kernel actually opened (/proc/self/fd/N) must equal the one decided on.
Blocking calls: the agent runs these in trio.to_thread.run_sync.
"""

from __future__ import annotations

import errno
import os
from pathlib import PurePosixPath

from ..policy import PathRules, check_path
from ._base import ToolResult

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 1024 * 1024
MAX_LIST_ENTRIES = 1000


def _opened_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _open_checked(real: PurePosixPath, flags: int, mode: int = 0o600) -> int | ToolResult:
    try:
        fd = os.open(str(real), flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ToolResult.refused(
                "path_not_allowed", "the path became a symlink after the check"
            )
        return ToolResult(False, "", "io_error", f"{exc.strerror}")
    if _opened_path(fd) != str(real):
        os.close(fd)
        return ToolResult.refused("path_not_allowed", "the path changed between check and open")
    return fd


def file_read(rules: PathRules, path: str, max_bytes: int = MAX_READ_BYTES) -> ToolResult:
    decision = check_path(rules, path, "read")
    if not decision.allowed or decision.path is None:
        return ToolResult.refused(decision.code or "path_not_allowed", decision.reason)
    fd = _open_checked(decision.path, os.O_RDONLY)
    if isinstance(fd, ToolResult):
        return fd
    try:
        data = os.read(fd, max_bytes + 1)
    except IsADirectoryError:
        return ToolResult(False, "", "io_error", "is a directory; use file_list")
    finally:
        os.close(fd)
    truncated = len(data) > max_bytes
    text = data[:max_bytes].decode("utf-8", errors="replace")
    return ToolResult(True, text, data={"truncated": truncated, "path": str(decision.path)})


def file_write(rules: PathRules, path: str, content: str) -> ToolResult:
    encoded = content.encode()
    if len(encoded) > MAX_WRITE_BYTES:
        return ToolResult(False, "", "too_large", f"more than {MAX_WRITE_BYTES} bytes")
    decision = check_path(rules, path, "write")
    if not decision.allowed or decision.path is None:
        return ToolResult.refused(decision.code or "path_not_allowed", decision.reason)
    parent = decision.path.parent
    # Parents are inside an allowed tree already (the decision covered the full path).
    os.makedirs(str(parent), mode=0o700, exist_ok=True)
    fd = _open_checked(decision.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    if isinstance(fd, ToolResult):
        return fd
    try:
        os.write(fd, encoded)
    finally:
        os.close(fd)
    return ToolResult(True, f"wrote {len(encoded)} bytes", data={"path": str(decision.path)})


def file_list(rules: PathRules, path: str = ".") -> ToolResult:
    decision = check_path(rules, path, "read")
    if not decision.allowed or decision.path is None:
        return ToolResult.refused(decision.code or "path_not_allowed", decision.reason)
    try:
        fd = os.open(
            str(decision.path), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except OSError as exc:
        return ToolResult(False, "", "io_error", f"{exc.strerror}")
    try:
        if _opened_path(fd) != str(decision.path):
            return ToolResult.refused("path_not_allowed", "the path changed between check and open")
        entries = []
        with os.scandir(fd) as it:
            for entry in it:
                kind = (
                    "dir"
                    if entry.is_dir(follow_symlinks=False)
                    else ("link" if entry.is_symlink() else "file")
                )
                entries.append(f"{entry.name}{'/' if kind == 'dir' else ''}")
                if len(entries) >= MAX_LIST_ENTRIES:
                    break
    finally:
        os.close(fd)
    entries.sort()
    return ToolResult(True, "\n".join(entries), data={"count": len(entries)})
