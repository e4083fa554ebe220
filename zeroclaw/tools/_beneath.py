"""Open a path beneath a directory without following any symlink (ADR 0013).

The path policy decides on a resolved real path; these functions then reach that path
again from the directory it was allowed under, one step at a time, refusing every
symlink on the way (ELOOP), so a directory swapped for a symlink between the decision
and the open leads nowhere outside.

`openat2(2)` with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS does the
walk in the kernel in one call; where it is missing (ENOSYS, or a seccomp filter that
answers EPERM) each component is opened with O_NOFOLLOW relative to its parent's fd.
Directories along the way are O_PATH fds: they grant nothing by themselves, Landlock does
not judge them, and they work as the dirfd of every *at call. Missing parents are made
with mkdirat relative to those fds, never with a path string.

Every function raises OSError; the tools turn it into a typed result.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import struct
from pathlib import PurePosixPath

# The generic syscall table: the same number on x86_64 and aarch64.
SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS

DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_openat2_works: bool | None = None  # probed once per process


def _openat2(dirfd: int, rel: str, flags: int, mode: int) -> int:
    # The kernel refuses a mode unless the call may create (O_TMPFILE includes O_DIRECTORY).
    creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE
    how = struct.pack("=QQQ", flags, mode if creates else 0, RESOLVE)
    fd = _libc.syscall(
        SYS_OPENAT2,
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(rel)),
        ctypes.c_char_p(how),
        ctypes.c_size_t(len(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), rel)
    return int(fd)


def openat2_available() -> bool:
    """Whether this kernel (and any seccomp filter around us) lets openat2 through."""
    global _openat2_works
    if _openat2_works is None:
        try:
            os.close(_openat2(-100, ".", os.O_PATH | os.O_CLOEXEC, 0))  # AT_FDCWD
            _openat2_works = True
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EPERM):
                raise
            _openat2_works = False
    return _openat2_works


def _components(rel: PurePosixPath) -> tuple[str, ...]:
    parts = tuple(p for p in rel.parts if p not in ("", "."))
    if rel.is_absolute() or ".." in parts:
        raise OSError(errno.EXDEV, "not a path beneath its root", str(rel))
    return parts


def _raise_if_symlink(dirfd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)


def _open_component(dirfd: int, name: str, flags: int, mode: int) -> int:
    """One step of the fallback walk: never through a symlink, and a symlink is ELOOP
    whether or not the flags asked for a directory."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
    except NotADirectoryError:
        _raise_if_symlink(dirfd, name)
        raise


def open_beneath(
    dirfd: int, rel: PurePosixPath, flags: int, mode: int = 0o600, *, use_openat2: bool = True
) -> int:
    """An fd for `rel` beneath the directory `dirfd`, no symlink followed anywhere."""
    parts = _components(rel)
    if not parts:
        return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=dirfd)
    if use_openat2 and openat2_available():
        try:
            return _openat2(dirfd, "/".join(parts), flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        except NotADirectoryError:
            # O_DIRECTORY on a trailing symlink says ENOTDIR; it is a symlink all the same.
            parent = _openat2(dirfd, "/".join(parts[:-1]) or ".", DIR_FLAGS, 0)
            try:
                _raise_if_symlink(parent, parts[-1])
            finally:
                os.close(parent)
            raise
    current = dirfd
    try:
        for name in parts[:-1]:
            step = _open_component(current, name, DIR_FLAGS, 0)
            if current != dirfd:
                os.close(current)
            current = step
        return _open_component(current, parts[-1], flags, mode)
    finally:
        if current != dirfd:
            os.close(current)


def open_root(root: PurePosixPath, *, use_openat2: bool = True) -> int:
    """An O_PATH fd for an allowed root (a workspace, a grant, `/`): the root is a resolved
    real path, so it too is reached from `/` without following a symlink."""
    slash = os.open("/", DIR_FLAGS)
    if root == PurePosixPath("/"):
        return slash
    try:
        return open_beneath(slash, root.relative_to("/"), DIR_FLAGS, use_openat2=use_openat2)
    finally:
        os.close(slash)


def make_dirs_beneath(
    dirfd: int, rel: PurePosixPath, mode: int = 0o700, *, use_openat2: bool = True
) -> int:
    """An O_PATH fd for directory `rel` beneath `dirfd`, made (mkdirat) where missing."""
    current = os.dup(dirfd)
    try:
        for name in _components(rel):
            try:
                step = open_beneath(
                    current, PurePosixPath(name), DIR_FLAGS, use_openat2=use_openat2
                )
            except FileNotFoundError:
                # made by someone else meanwhile: the open below judges what it is
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, mode, dir_fd=current)
                step = open_beneath(
                    current, PurePosixPath(name), DIR_FLAGS, use_openat2=use_openat2
                )
            os.close(current)
            current = step
    except BaseException:
        os.close(current)
        raise
    return current


def reopen(fd: int, flags: int) -> int:
    """The same inode as the O_PATH `fd`, opened for real: nothing can be swapped in
    between, because no name is looked up again (/proc/self/fd/N is the open file)."""
    return os.open(f"/proc/self/fd/{fd}", flags | os.O_CLOEXEC)
