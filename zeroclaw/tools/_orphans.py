"""Nothing a shell command starts outlives it (ADR 0012).

The agent process is a child subreaper (`become_subreaper`), so a command's descendants
that lose their parent — a daemon that double-forked, a grandchild that called setsid and
so left the command's process group — become the agent's children instead of init's. After
each command ends, `CommandReaper.finished` kills every child of the agent that is not a
running command and reaps it; the killed one's own children are handed to the agent in
turn and die on the next pass, until no orphan is left. Reaping is by pid only, so the
exit status of a command still running is never stolen from the task that waits for it.

The agent's Landlock ruleset does not let it open anything under /proc, so the agent keeps
a directory fd on /proc opened before it confined itself: listing it names the pids (and
nothing more: every file below is still opened through the ruleset), and `waitid` with
WNOWAIT tells which of them are the agent's children without touching their state.

A spawn and a sweep never overlap (one lock): a command forked a moment ago but not yet
registered would otherwise look like an orphan.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Collection, Iterable

import trio

from .._prctl import PR_SET_CHILD_SUBREAPER, prctl
from .._proctree import kill_all

log = logging.getLogger("zeroclaw.agent")

MAX_PASSES = 64  # one generation of a leftover tree dies per pass


def become_subreaper(proc: str = "/proc") -> None:
    """Make this process the reaper of its commands' orphans; call it before Landlock."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    CommandReaper.instance().proc_fd = os.open(proc, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def strays(pids: Iterable[int], is_child: Callable[[int], bool], keep: Collection[int]) -> set[int]:
    """The children among `pids` that are not running commands. Pure given `is_child`."""
    return {pid for pid in pids if pid not in keep and is_child(pid)}


def is_my_child(pid: int) -> bool:
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def sweep(proc_fd: int, keep: frozenset[int]) -> int:
    """Kill and reap every child of this process not in `keep`, generation by generation;
    how many died."""
    killed = 0
    for _ in range(MAX_PASSES):
        pids = (int(name) for name in os.listdir(proc_fd) if name.isdigit())
        doomed = strays(pids, is_my_child, keep)
        if not doomed:
            break
        kill_all(doomed)
        for pid in doomed:
            # Reaped once dead; its children are ours by then, for the next pass.
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        killed += len(doomed)
    return killed


class CommandReaper:
    """The running commands of this process, and the sweep that runs after each."""

    _instance: CommandReaper | None = None

    def __init__(self) -> None:
        self.proc_fd: int | None = None  # set by become_subreaper: only a subreaper sweeps
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
        if self.proc_fd is None:
            return
        async with self.lock:
            try:
                killed = await trio.to_thread.run_sync(sweep, self.proc_fd, frozenset(self.running))
            except OSError as exc:  # never fail the tool call over the cleanup
                log.error("sweeping what a command left behind failed: %s", exc)
                return
        if killed:
            log.info("killed %d process(es) a finished command left behind", killed)
