"""What the daemon's sub-agent service offers the control commands (`zeroclaw subagents`,
`dispatch`, `invocations`). The dispatch service implements it; the command handlers in
`_control` only translate requests and replies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import trio

from ..turns import Invocation, InvocationEvent, InvocationState, RevisionRecord
from ._admission import DispatchRequest, Refused
from ._bundle import Bundle, BundleProblems


@dataclass(frozen=True)
class LoadedRevision:
    """The current revision of one sub-agent: its bundle, snapshot and runtime identity."""

    bundle: Bundle
    snapshot: Path
    identity: str  # the bus identity of this revision's runtime process


class SubagentsApi(Protocol):
    def current(self) -> Mapping[str, LoadedRevision]:
        """Every loaded sub-agent by id (the revision a new dispatch runs)."""

    def problems(self) -> Sequence[BundleProblems]:
        """Bundles of the last scan that were refused, with why."""

    async def revisions(self, agent_id: str) -> list[RevisionRecord]:
        """Every revision recorded for `agent_id`, oldest first."""

    async def dispatch(self, request: DispatchRequest, task: str) -> Invocation | Refused:
        """Run the pipeline; wait for the invocation's end (an idempotent repeat returns the
        existing invocation as it is now)."""

    async def invocations(
        self, *, state: InvocationState | None, agent_id: str | None, limit: int
    ) -> list[Invocation]:
        """Newest first."""

    async def invocation(self, invocation_id: str) -> Invocation | None: ...

    async def timeline(
        self, invocation_id: str, after_seq: int = 0
    ) -> list[InvocationEvent] | None:
        """The events of this invocation and of every earlier attempt it re-runs, attempt by
        attempt, each in sequence order (None: no such invocation). `after_seq` applies to
        the invocation named."""

    def follow(
        self, invocation_id: str
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[InvocationEvent]]:
        """Events of a running invocation as they are persisted (the channel closes at its
        terminal state)."""

    async def cancel(self, invocation_id: str) -> Invocation | None:
        """Cancel an accepted or running invocation (a finished one is returned as it is)."""
