"""An agent's heartbeat: HEARTBEAT.md in its workspace, read by the daemon, and a turn on its
open items when it has some (none when it is empty, absent, or every item is done).

Open items are list items not checked off: `- [ ] water the plants`, `- call Bob`,
`* ...`, `+ ...`, `1. ...`; `- [x] done` is closed. Headings, blank lines, HTML comments
and prose are not items.

The file is the agent's own (it may write it), so the daemon reads it as it would read
anything an agent controls: beneath the workspace without following a symlink, never a
FIFO or a device (non-blocking, a regular file only), never a file with a second hard link
(it may be one of the daemon's), and at most MAX_BYTES.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

HEARTBEAT_FILE = "HEARTBEAT.md"
MAX_BYTES = 64 * 1024
MAX_ITEMS = 100  # open items put in one turn's text; more are counted
_ITEM = re.compile(r"^\s{0,8}(?:[-*+]|\d{1,9}[.)])\s+(?:\[(?P<box>[ xX])\]\s*)?(?P<text>\S.*)$")
COMMENT_OPEN, COMMENT_CLOSE = "<!--", "-->"


@dataclass(frozen=True)
class Unreadable:
    """Why HEARTBEAT.md was not read (a person reads it in the failure's detail)."""

    detail: str


def open_items(text: str) -> list[str]:
    """The open items of a HEARTBEAT.md, in order."""
    items = []
    for line in without_comments(text).splitlines():
        found = _ITEM.match(line)
        if found is None:
            continue
        if found["box"] is not None and found["box"] in "xX":
            continue
        items.append(found["text"].strip())
    return items


def without_comments(text: str) -> str:
    """`text` without its HTML comments, in one pass (a regex's lazy `<!--.*?-->` tried
    every `<!--` of a file of unclosed ones to its end: seconds of the daemon's loop for
    64 KiB an agent wrote). An unclosed comment is left as it is."""
    kept, at = [], 0
    while (start := text.find(COMMENT_OPEN, at)) >= 0:
        end = text.find(COMMENT_CLOSE, start + len(COMMENT_OPEN))
        if end < 0:
            break  # no comment closes after this one: none after it does either
        kept.append(text[at:start])
        at = end + len(COMMENT_CLOSE)
    kept.append(text[at:])
    return "".join(kept)


def heartbeat_text(items: list[str]) -> str:
    """The turn's message for the open items (the first MAX_ITEMS; the rest counted)."""
    shown = items[:MAX_ITEMS]
    lines = [
        f"Heartbeat: {HEARTBEAT_FILE} has {len(items)} open item(s). Work through them; "
        "say what you did and what is left.",
        *(f"- [ ] {item}" for item in shown),
    ]
    if len(items) > len(shown):
        lines.append(f"(and {len(items) - len(shown)} more in {HEARTBEAT_FILE})")
    return "\n".join(lines)


def read_heartbeat(workspace: Path) -> str | Unreadable | None:
    """The file's text; None when there is none (nothing to do). Blocking."""
    try:
        root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return None if exc.errno == errno.ENOENT else Unreadable(f"workspace: {exc.strerror}")
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
        try:
            fd = os.open(HEARTBEAT_FILE, flags, dir_fd=root)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            if exc.errno == errno.ELOOP:
                return Unreadable(f"{HEARTBEAT_FILE} is a symlink; it is read only as a file")
            return Unreadable(f"{HEARTBEAT_FILE}: {exc.strerror}")
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return Unreadable(f"{HEARTBEAT_FILE} is not a regular file")
            if info.st_nlink > 1:
                return Unreadable(f"{HEARTBEAT_FILE} has another hard link; it is not read")
            data = os.read(fd, MAX_BYTES + 1)
        finally:
            os.close(fd)
    finally:
        os.close(root)
    if len(data) > MAX_BYTES:
        return Unreadable(f"{HEARTBEAT_FILE} is larger than {MAX_BYTES} bytes")
    return data.decode("utf-8", errors="replace")
