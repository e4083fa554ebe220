"""What the filesystem shows of a skill: `gather` looks, `_decide.decide_skill` judges.

The folder is found by name in each skills dir in turn; its real path is recorded, and
only a folder inside its dir's real path is listed. The listing never follows a symlink:
the folder is reached from the dir's real path and each directory below it opened with
O_NOFOLLOW relative to its parent's descriptor, each entry
lstat'ed, and it stops one entry past the cap and at the depth cap, so a huge or deep tree
costs a bounded walk. SKILL.md is read through the descriptor that listed it, at most one
byte past its cap; each other file's first two bytes are read to see a `#!`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import PurePosixPath

from ._decide import (
    MAX_SKILL_DEPTH,
    MAX_SKILL_ENTRIES,
    MAX_SKILL_MD_BYTES,
    Entry,
    EntryKind,
    SkillFacts,
)
from ._front import SKILL_FILE

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_EXECUTABLE = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def gather(roots: Sequence[str], name: str) -> SkillFacts:
    """The facts of skill `name`: the first skills dir holding an entry of that name (a
    folder, a symlink, anything) decides. `name` has the skill name syntax (no `/`)."""
    for root in roots:
        candidate = os.path.join(root, name)
        if not os.path.lexists(candidate):
            continue
        real_root = os.path.realpath(root)
        folder = os.path.realpath(candidate)
        facts = SkillFacts(name, real_root, folder, is_dir=os.path.isdir(folder))
        if not facts.is_dir or PurePosixPath(real_root) not in PurePosixPath(folder).parents:
            return facts  # decided without a look inside
        return _listed(facts)
    return SkillFacts(name)


def _listed(facts: SkillFacts) -> SkillFacts:
    entries: list[Entry] = []
    found: dict[str, bytes] = {}  # SKILL.md's bytes, once read
    too_deep = False
    try:
        top = _open_folder(facts.root, facts.folder)
    except OSError:  # gone, unreadable, or a symlink swapped in since realpath()
        return SkillFacts(facts.name, facts.root, facts.folder, is_dir=False)
    todo: list[tuple[int, str, int]] = [(top, "", 0)]  # (dir fd, relative path, depth)
    try:
        while todo and len(entries) <= MAX_SKILL_ENTRIES:
            fd, rel, depth = todo.pop()
            try:
                too_deep |= _list_one(fd, rel, depth, entries, todo, found)
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in todo:
            os.close(fd)
    return SkillFacts(
        facts.name,
        facts.root,
        facts.folder,
        is_dir=True,
        entries=tuple(entries),
        too_deep=too_deep,
        skill_md=found.get(SKILL_FILE),
    )


def _open_folder(root: str, folder: str) -> int:
    """The folder, reached from its skills dir's real path one component at a time, none
    a symlink: what is listed lies inside the dir even if a component is swapped now."""
    fd = os.open(root, _DIR & ~os.O_NOFOLLOW)  # the operator's dir, already real
    try:
        for part in PurePosixPath(folder).relative_to(root).parts:
            step = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _list_one(
    fd: int,
    rel: str,
    depth: int,
    entries: list[Entry],
    todo: list[tuple[int, str, int]],
    found: dict[str, bytes],
) -> bool:
    """List the directory `fd` (at `rel`) into `entries`, its subdirectories onto `todo`
    (open) unless too deep; whether one was too deep."""
    too_deep = False
    try:
        with os.scandir(fd) as listing:
            names = sorted(e.name for e in listing)
    except OSError:
        names = []
    for name in names[: MAX_SKILL_ENTRIES + 1 - len(entries)]:
        path = f"{rel}{name}"
        entry, opened = _entry(fd, name, path)
        entries.append(entry)
        if opened is None:
            continue
        if entry.kind == "dir" and depth + 1 < MAX_SKILL_DEPTH:
            todo.append((opened, f"{path}/", depth + 1))
            continue
        too_deep = too_deep or entry.kind == "dir"
        if path == SKILL_FILE:
            found[path] = _read(opened, MAX_SKILL_MD_BYTES + 1)
        os.close(opened)
    return too_deep


def _entry(dir_fd: int, name: str, path: str) -> tuple[Entry, int | None]:
    """The entry, and for a directory or a regular file an open descriptor of it (the
    caller closes it)."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return Entry(path, "other"), None
    kind: EntryKind = (
        "symlink"
        if stat.S_ISLNK(info.st_mode)
        else "dir"
        if stat.S_ISDIR(info.st_mode)
        else "file"
        if stat.S_ISREG(info.st_mode)
        else "other"
    )
    if kind not in ("dir", "file"):
        return Entry(path, kind), None
    try:
        opened = os.open(name, _DIR if kind == "dir" else _FILE, dir_fd=dir_fd)
    except OSError:  # swapped meanwhile (ELOOP: now a symlink), or not readable
        return Entry(path, "other"), None
    if kind == "dir":
        return Entry(path, kind), opened
    now = os.fstat(opened)
    if not stat.S_ISREG(now.st_mode):
        os.close(opened)
        return Entry(path, "other"), None
    head = b"" if now.st_mode & _EXECUTABLE else _read(opened, 2)
    with contextlib.suppress(OSError):
        os.lseek(opened, 0, os.SEEK_SET)
    script = bool(now.st_mode & _EXECUTABLE) or head == b"#!"
    return Entry(path, kind, links=now.st_nlink, script=script), opened


def _read(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        try:
            chunk = os.read(fd, limit - size)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
