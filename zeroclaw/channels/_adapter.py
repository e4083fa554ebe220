"""A channel adapter: one transport (HTTP, a serial line) that turns what it receives into
`Inbound` messages for the `ChannelHost` and sends each outcome back where it came from."""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import trio

from .._atomic import atomic_write
from ._host import ChannelHost
from ._types import Scheduled

log = logging.getLogger("zeroclaw.channels")


class ChannelStartFailed(Exception):
    """The adapter cannot serve (port in use, device missing): the daemon reports it in
    `status` and the log and retries with backoff; the rest of the daemon serves on."""


async def write_state(key: str, path: Path, data: bytes) -> None:
    """Write a channel's kept state atomically (a worker thread: it fsyncs), its directory
    the daemon's user's alone; ChannelStartFailed says why not (a full disk by name)."""

    def write() -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, data, fsync=True)

    try:
        await trio.to_thread.run_sync(write)
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise ChannelStartFailed(
            f"{key}: cannot write {path}: {exc.strerror or exc}"
            + (" (the disk is full)" if full else "")
        ) from None


async def save_turns_end(save: Callable[[], Awaitable[None]]) -> None:
    """Save a turn's end (a chat channel's `_save`) even while the channel stops: an
    answered message is not told to send again (the write is bounded; a worker thread is
    not abandoned). A failed write is logged: told to send again next start, at worst."""
    try:
        with trio.CancelScope(shield=True):
            await save()
    except ChannelStartFailed as exc:
        log.error("%s", exc)


class ChannelAdapter(Protocol):
    """`keys`: the channel keys it serves (one webhook listener may serve several channels
    on one address). `serve` signals `task_status.started()` once it accepts input, runs
    until cancelled, and raises ChannelStartFailed (or any error) when it cannot go on."""

    @property
    def keys(self) -> tuple[str, ...]: ...

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None: ...

    async def push(self, key: str, scheduled: Scheduled) -> str | None:
        """Send a scheduled run's outcome out on channel `key` (one it serves): None once
        it is delivered, else why not (for a person)."""
        ...
