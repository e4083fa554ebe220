"""`skill_read`: an agent reads one of its own skills (ADR 0056), by the skill's name and
a path inside its folder (SKILL.md by default; a folder path lists it).

Only the skills the daemon loaded for this agent exist here, each under the real path it
was loaded from; a name outside them is `skill_not_found`. The path is refused before
anything is opened when it is absolute, holds `..` or a NUL (`skill_path_not_allowed`);
the open then walks from the folder without following any symlink (openat2
RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or an O_NOFOLLOW walk: `_beneath`), so a symlink
placed or swapped in after the load leads nowhere, and a file with more than one hard link
is refused as well (it may be a file outside the folder). Landlock lets the agent read its
skills' folders and write none of them; the file tools refuse them (they are the daemon's
files), so this is the one way in. What is read is bounded.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Annotated

import msgspec
import trio

from ._base import ToolResult
from ._beneath import open_beneath, open_root
from ._files import Refused, open_regular, read_closing
from ._snapshot import MAX_LISTED_ENTRIES, MAX_SKILL_READ_BYTES, SKILL_READ
from ._toolset import Tool, ToolContext

SKILL_FILE = "SKILL.md"  # zeroclaw.skills.SKILL_FILE (the tools do not import the loader)
_SHOWN = 200  # characters of a requested path quoted back


class SkillReadArgs(msgspec.Struct, frozen=True):
    skill: Annotated[str, msgspec.Meta(description="The skill's name, as your skills list it.")]
    path: Annotated[
        str,
        msgspec.Meta(
            description="A file inside the skill's folder, relative to it; a folder lists "
            "its entries. Default: SKILL.md."
        ),
    ] = SKILL_FILE


def _not_allowed(path: str, why: str) -> ToolResult:
    return ToolResult.refused("skill_path_not_allowed", f"{path[:_SHOWN]!r}: {why}")


def _failure(exc: OSError, path: str) -> ToolResult:
    number = exc.errno or 0
    if number in (errno.ELOOP, errno.EXDEV):
        return _not_allowed(path, "a symlink on the way; a skill is read inside its folder only")
    if number in (errno.ENOENT, errno.ENOTDIR):
        return ToolResult(False, "", "not_found", f"{path[:_SHOWN]!r}: no such file in the skill")
    name = errno.errorcode.get(number, f"errno {number}")
    return ToolResult(False, "", "io_error", f"{path[:_SHOWN]!r}: {name}")


def read_skill_file(
    folders: dict[str, str],
    skill: str,
    path: str = SKILL_FILE,
    limit: int = MAX_SKILL_READ_BYTES,
    *,
    use_openat2: bool = True,
) -> ToolResult:
    """The text of `path` in skill `skill` (`folders`: name -> the folder's real path), or
    its folder's entries. Blocking: run it in a thread."""
    folder = folders.get(skill)
    if folder is None:
        mine = ", ".join(sorted(folders)) or "none"
        return ToolResult.refused(
            "skill_not_found", f"{skill[:_SHOWN]!r} is not one of your skills ({mine})"
        )
    wanted = path.strip() or SKILL_FILE
    if "\x00" in wanted:
        return _not_allowed(wanted, "not a path")
    rel = PurePosixPath(wanted)
    if rel.is_absolute():
        return _not_allowed(wanted, "an absolute path; paths are relative to the skill's folder")
    if ".." in rel.parts:
        return _not_allowed(wanted, "'..' leads out of the skill's folder")
    try:
        root = open_root(PurePosixPath(folder), use_openat2=use_openat2)
        try:
            return _read(root, rel, wanted, skill, limit, use_openat2)
        finally:
            os.close(root)
    except Refused as refused:
        return refused.result
    except OSError as exc:
        return _failure(exc, wanted)


def _read(
    root: int, rel: PurePosixPath, path: str, skill: str, limit: int, use_openat2: bool
) -> ToolResult:
    shown = path[:_SHOWN]
    target = open_beneath(root, rel, os.O_PATH, use_openat2=use_openat2)
    try:
        info = os.fstat(target)
        if stat.S_ISDIR(info.st_mode):
            return _listing(root, rel, shown, skill, use_openat2)
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            return _not_allowed(path, f"a file with {info.st_nlink} hard links may lie outside it")

        def again() -> int:
            return open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK, use_openat2=use_openat2)

        fd = open_regular(target, os.O_RDONLY, again, repr(shown))
    finally:
        os.close(target)
    body = read_closing(fd, limit)
    truncated = len(body) > limit
    text = body[:limit].decode("utf-8", errors="replace")
    if truncated:
        text += f"\n[truncated at {limit} bytes]"
    return ToolResult(True, text, data={"skill": skill, "path": shown, "truncated": truncated})


def _listing(
    root: int, rel: PurePosixPath, shown: str, skill: str, use_openat2: bool
) -> ToolResult:
    fd = open_beneath(root, rel, os.O_RDONLY | os.O_DIRECTORY, use_openat2=use_openat2)
    try:
        with os.scandir(fd) as listing:
            names = sorted(
                f"{e.name}/" if e.is_dir(follow_symlinks=False) else e.name for e in listing
            )
    finally:
        os.close(fd)
    kept = names[:MAX_LISTED_ENTRIES]
    return ToolResult(
        True, "\n".join(kept), data={"skill": skill, "path": shown, "count": len(kept)}
    )


def skill_tool(skills: Sequence[tuple[str, str]]) -> Tool[SkillReadArgs]:
    """The `skill_read` tool of an agent whose loaded skills are `skills`: (name, the
    folder's real path) pairs."""
    folders = dict(skills)

    async def run(ctx: ToolContext, args: SkillReadArgs) -> ToolResult:
        return await trio.to_thread.run_sync(read_skill_file, folders, args.skill, args.path)

    return Tool(
        SKILL_READ,
        "Read one of your skills (listed under 'Skills' in your instructions): its SKILL.md "
        "by default, or a file or folder inside it by its relative path. Read a skill's "
        "SKILL.md before you follow it.",
        SkillReadArgs,
        run,
    )
