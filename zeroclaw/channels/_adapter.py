"""A channel adapter: one transport (HTTP, a serial line) that turns what it receives into
`Inbound` messages for the `ChannelHost` and sends each outcome back where it came from."""

from __future__ import annotations

from typing import Protocol

import trio

from ._host import ChannelHost
from ._types import Scheduled


class ChannelStartFailed(Exception):
    """The adapter cannot serve (port in use, device missing): the daemon reports it in
    `status` and the log and retries with backoff; the rest of the daemon serves on."""


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
