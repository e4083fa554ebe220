"""Nothing a shell command starts outlives it (ADR 0012).

The agent process is a child subreaper (`become_subreaper`), so a command's descendants
that lose their parent — a daemon that double-forked, a grandchild that called setsid and
so left the command's process group — become the agent's children instead of init's. After
each command ends, `CommandReaper.sweep` kills every child of the agent that is not a
running command, with its whole subtree, and reaps them: by pid only, so the exit status of
a command still running is never stolen from the task that waits for it.

A spawn and a sweep never overlap (one lock): a command forked a moment ago but not yet
registered would otherwise look like an orphan.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable

import trio

from .._prctl import PR_SET_CHILD_SUBREAPER, prctl
from .._proctree import kill_all, orphans, read_parents

MAX_PASSES = 50  # a subtree that keeps forking is SIGKILLed again on each pass


def become_subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (the agent does this)."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    CommandReaper.instance().enabled = True


class CommandReaper:
    """The running commands of this process, and the sweep that runs after each."""

    _instance: CommandReaper | None = None

    def __init__(self) -> None:
        self.enabled = False  # only a subreaper sweeps: elsewhere orphans go to someone else
        self.running: set[int] = set()
        self.lock = trio.Lock()

    @classmethod
    def instance(cls) -> CommandReaper:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    @contextlib.asynccontextmanager
    async def spawning(self) -> AsyncIterator[Callable[[int], None]]:
        """Hold off sweeps while a command is started; call the yielded function with its pid."""
        async with self.lock:
            yield self.running.add

    async def finished(self, pid: int) -> None:
        """The command `pid` was waited for: forget it and kill what it left behind."""
        self.running.discard(pid)
        if not self.enabled:
            return
        async with self.lock:
            keep = frozenset(self.running)
            await trio.to_thread.run_sync(sweep, os.getpid(), keep)


def sweep(me: int, keep: frozenset[int]) -> int:
    """Kill and reap every child of `me` not in `keep`, subtrees included; how many died."""
    killed: set[int] = set()
    for _ in range(MAX_PASSES):
        doomed = orphans(read_parents(), me, keep)
        if not doomed:
            break
        kill_all(doomed)
        killed |= doomed
        for pid in doomed:
            # Our own children among them: reap, or they stay zombies. A grandchild is
            # reaped on a later pass, once its dead parent has handed it to us.
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return len(killed)
