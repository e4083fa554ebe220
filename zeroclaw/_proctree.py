"""The process tree from /proc: who is whose child, and killing whole subtrees.

Used by the zygote, a subreaper that must clean up what others left behind: after each
agent and when the daemon dies (ADR 0012). (The agent sweeps its commands' orphans with
`tools._orphans`, since its Landlock ruleset keeps /proc closed.) Deciding what
to kill is pure (a parent map in, pids out); reading /proc and signalling are thin.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection, Mapping

Parents = Mapping[int, int]  # pid -> parent pid


def stat_fields(path: str) -> list[bytes] | None:
    """The fields of a /proc/<pid>/stat after `comm`, from `state` on (so the parent pid is
    [1], the start time [19]); None when the process is gone."""
    try:
        with open(path, "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and ')', so split at the last one.
    return stat[stat.rfind(b")") + 2 :].split()


def read_parents(proc: str = "/proc") -> dict[int, int]:
    """Every visible process's parent. Processes that vanish while we read are skipped."""
    parents: dict[int, int] = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        fields = stat_fields(f"{proc}/{name}/stat")
        if fields is not None and len(fields) >= 2:
            parents[int(name)] = int(fields[1])
    return parents


def children_of(parents: Parents, pid: int) -> set[int]:
    return {child for child, parent in parents.items() if parent == pid}


def subtrees(parents: Parents, roots: Collection[int]) -> set[int]:
    """`roots` and every descendant of them."""
    kids: dict[int, list[int]] = {}
    for child, parent in parents.items():
        kids.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [r for r in roots if r in parents]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(kids.get(pid, ()))
    return found


def orphans(parents: Parents, me: int, keep: Collection[int]) -> set[int]:
    """What a subreaper `me` should kill: its children other than `keep`, with their subtrees.
    (`keep`'s own descendants are theirs to answer for while they run.)"""
    return subtrees(parents, children_of(parents, me) - set(keep))


def kill_all(pids: Collection[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
