"""file_read, file_write, file_list: the path policy, then an open beneath the allowed tree.

The policy decides on the resolved real path and names the tree it allowed it under
(the workspace, a granted sibling, or `/` for a profile without workspace_only). The
tool then reaches that path from the tree's root without following any symlink
(`_beneath`: openat2, or an O_NOFOLLOW walk), so a directory swapped for a symlink after
the decision makes the open fail instead of leading outside; nothing is created or
truncated before that walk succeeded (ADR 0013).

A file is first opened O_PATH and fstat'ed: anything but a regular file (FIFO, socket,
device, directory) is refused before it is opened for real, so nothing blocks and no
driver sees an open; the real open goes through that same inode. A write goes to a
fresh file beside the target and is renamed over it, so a full disk leaves the old
content whole. Every OSError becomes a typed result: these functions do not raise.
Blocking calls: the agent runs them in trio.to_thread.run_sync.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import PurePosixPath

from .._atomic import atomic_write
from ..policy import Access, PathDecision, PathRules, check_path
from ._base import ToolErrorCode, ToolResult
from ._beneath import make_dirs_beneath, open_beneath, open_root, reopen

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 1024 * 1024
MAX_LIST_ENTRIES = 1000

# errno -> code; every other errno is io_error with its name in the detail.
_ERRNO_CODES: dict[int, ToolErrorCode] = {
    errno.ENOSPC: "no_space",
    errno.EDQUOT: "no_space",
    errno.EFBIG: "too_large",
    errno.ENOENT: "not_found",
    errno.ENOTDIR: "not_a_directory",
    errno.EISDIR: "not_a_regular_file",
    errno.ELOOP: "path_not_allowed",  # a symlink on the way: it appeared after the check
    errno.EXDEV: "path_not_allowed",  # openat2 saw the walk leave its root
}


class Refused(Exception):
    """A typed refusal raised from inside an open (the file tools' and skill_read's)."""

    def __init__(self, result: ToolResult) -> None:
        self.result = result


def failure(exc: OSError, shown: str) -> ToolResult:
    """An OS error as a typed result. The detail names the request, not the real path."""
    number = exc.errno or 0
    code = _ERRNO_CODES.get(number, "io_error")
    if code == "path_not_allowed":
        return ToolResult.refused(
            code, f"{shown} changed while it was opened (a symlink on the way)"
        )
    name = errno.errorcode.get(number, f"errno {number}")
    return ToolResult(False, "", code, f"{shown}: {name} ({os.strerror(number)})")


def _allowed(
    rules: PathRules, path: str, access: Access
) -> tuple[PathDecision, PurePosixPath, PurePosixPath]:
    """The decision, the tree it allowed the path under, and the path relative to it."""
    decision = check_path(rules, path, access)
    if not decision.allowed or decision.path is None or decision.root is None:
        raise Refused(ToolResult.refused(decision.code or "path_not_allowed", decision.reason))
    return decision, decision.root, decision.path.relative_to(decision.root)


def _not_regular(st: os.stat_result, shown: str) -> ToolResult:
    if stat.S_ISDIR(st.st_mode):
        return ToolResult(False, "", "not_a_regular_file", f"{shown} is a directory; use file_list")
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "a device"
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        else "not a regular file"
    )
    return ToolResult(False, "", "not_a_regular_file", f"{shown} is {kind}; only regular files")


def open_regular(target: int, flags: int, again: Callable[[], int], shown: str) -> int:
    """Open the O_PATH `target` for real, after checking it is a regular file."""
    st = os.fstat(target)
    if stat.S_ISLNK(st.st_mode):  # O_PATH | O_NOFOLLOW gives the link itself
        raise OSError(errno.ELOOP, "a symlink", shown)
    if not stat.S_ISREG(st.st_mode):
        raise Refused(_not_regular(st, shown))
    flags |= os.O_NONBLOCK | os.O_NOCTTY  # nothing blocks, even a file that becomes odd
    try:
        return reopen(target, flags)
    except FileNotFoundError:
        if os.path.isdir("/proc/self/fd"):
            raise
    # No /proc: open the name again and make sure it is still the inode we checked.
    fd = again()
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise OSError(errno.ELOOP, "the file changed while it was opened")
    return fd


def read_closing(fd: int, cap: int) -> bytes:
    """At most `cap` + 1 bytes of `fd` (one more tells a longer file), then `fd` closed."""
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= cap and (chunk := os.read(fd, cap + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_read(
    rules: PathRules, path: str, max_bytes: int = MAX_READ_BYTES, *, use_openat2: bool = True
) -> ToolResult:
    shown = repr(path[:200])
    try:
        decision, tree, rel = _allowed(rules, path, "read")
        root = open_root(tree, use_openat2=use_openat2)
        try:

            def again() -> int:
                return open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK, use_openat2=use_openat2)

            target = open_beneath(root, rel, os.O_PATH, use_openat2=use_openat2)
            try:
                fd = open_regular(target, os.O_RDONLY, again, shown)
            finally:
                os.close(target)
        finally:
            os.close(root)
        data = read_closing(fd, max_bytes)
    except Refused as refused:
        return refused.result
    except OSError as exc:
        return failure(exc, shown)
    truncated = len(data) > max_bytes
    text = data[:max_bytes].decode("utf-8", errors="replace")
    return ToolResult(True, text, data={"truncated": truncated, "path": str(decision.path)})


def file_write(
    rules: PathRules, path: str, content: str, *, use_openat2: bool = True
) -> ToolResult:
    shown = repr(path[:200])
    try:
        encoded = content.encode()
    except UnicodeEncodeError:
        return ToolResult(False, "", "bad_arguments", "the content is not valid text")
    if len(encoded) > MAX_WRITE_BYTES:
        return ToolResult(False, "", "too_large", f"more than {MAX_WRITE_BYTES} bytes")
    try:
        decision, tree, rel = _allowed(rules, path, "write")
        if not rel.name:
            return ToolResult(False, "", "not_a_regular_file", f"{shown} is a directory")
        root = open_root(tree, use_openat2=use_openat2)
        try:
            parent = make_dirs_beneath(root, rel.parent, use_openat2=use_openat2)
        finally:
            os.close(root)
        try:
            _write_beside(parent, rel.name, encoded, shown)
        finally:
            os.close(parent)
    except Refused as refused:
        return refused.result
    except OSError as exc:
        return failure(exc, shown)
    return ToolResult(True, f"wrote {len(encoded)} bytes", data={"path": str(decision.path)})


def _write_beside(parent: int, name: str, encoded: bytes, shown: str) -> None:
    """Write a fresh file in `parent` and rename it over `name`: the target is replaced
    whole or not at all, and never opened (a FIFO or device there is refused)."""
    try:
        st: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "a symlink", name)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise Refused(_not_regular(st, shown))
    # Not fsynced: a tool's write is as durable as any write of the agent's own.
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o600
    atomic_write(name, encoded, mode=mode, dir_fd=parent, fsync=False)


def file_list(rules: PathRules, path: str = ".", *, use_openat2: bool = True) -> ToolResult:
    shown = repr(path[:200])
    entries: list[str] = []
    try:
        _, tree, rel = _allowed(rules, path, "read")
        root = open_root(tree, use_openat2=use_openat2)
        try:
            # O_DIRECTORY: anything but a directory fails here, before any driver opens it.
            fd = open_beneath(root, rel, os.O_RDONLY | os.O_DIRECTORY, use_openat2=use_openat2)
        finally:
            os.close(root)
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    entries.append(f"{entry.name}{'/' if is_dir else ''}")
                    if len(entries) >= MAX_LIST_ENTRIES:
                        break
        finally:
            os.close(fd)
    except Refused as refused:
        return refused.result
    except OSError as exc:
        return failure(exc, shown)
    entries.sort()
    return ToolResult(True, "\n".join(entries), data={"count": len(entries)})
