"""The operator's approval queue in the daemon: the trio shell of `ApprovalQueue`.

A channel turn whose origin's approvals go to the operator (ADR 0042) waits here until the
operator answers on the control socket (`zeroclaw approvals approve|deny ID`), its
deadline passes, or its turn ends; every way but a yes is a denial. Each request and each
decision is published as an event.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

import trio

from ..bus import Origin
from ..events import ApprovalRequested, ApprovalResolved, EventSink
from ._approvals import (
    MAX_PENDING_APPROVALS,
    ApprovalQueue,
    Decided,
    NotPending,
    PendingApproval,
)

log = logging.getLogger("zeroclaw.approvals")


def new_approval_id() -> str:
    """Short enough to type, random so that nobody predicts the next one."""
    return f"ap-{secrets.token_hex(5)}"


class OperatorApprovals:
    def __init__(
        self,
        events: EventSink | None = None,
        *,
        clock: Callable[[], float] = trio.current_time,
        new_id: Callable[[], str] = new_approval_id,
        max_pending: int = MAX_PENDING_APPROVALS,
    ) -> None:
        self._queue = ApprovalQueue(new_id, max_pending=max_pending)
        self._events = events
        self._clock = clock
        self._answered: dict[str, tuple[trio.Event, list[Decided]]] = {}

    def pending(self) -> tuple[PendingApproval, ...]:
        return self._queue.pending()

    def remaining(self, approval: PendingApproval) -> float:
        """Seconds until its deadline (0 once passed)."""
        return max(0.0, approval.deadline - self._clock())

    async def ask(self, agent: str, origin: Origin, what: str, *, wait_secs: float) -> bool:
        """Queue the approval and wait for its decision; True only for an operator's yes."""
        approval = self._queue.ask(
            agent, origin.channel, origin.sender or "", what, now=self._clock(), timeout=wait_secs
        )
        if approval is None:
            log.warning(
                "agent %s: %d approvals already wait for the operator (or that sender's or "
                "channel's share of them); denied one from %s",
                agent,
                len(self._queue.pending()),
                origin.channel,
            )
            return False
        done = trio.Event()
        box: list[Decided] = []
        self._answered[approval.id] = (done, box)
        self._publish_asked(approval, wait_secs)
        try:
            with trio.move_on_at(approval.deadline):
                await done.wait()
        finally:
            del self._answered[approval.id]
            if not box:  # its deadline passed, or its turn went away first
                closed = self._queue.close(approval.id, now=self._clock())
                if isinstance(closed, Decided):
                    box.append(closed)
                    self._publish_decided(closed)
        return bool(box) and box[0].approved

    def decide(self, approval_id: str, approved: bool) -> Decided | NotPending:
        """The operator's answer. A second answer, or an unknown id, changes nothing."""
        decided = self._queue.answer(approval_id, approved, now=self._clock())
        if isinstance(decided, Decided):
            self._finish(decided)
        return decided

    def _finish(self, decided: Decided) -> None:
        waiter = self._answered.get(decided.approval.id)
        if waiter is not None:
            waiter[1].append(decided)
            waiter[0].set()
        self._publish_decided(decided)

    def _publish_asked(self, approval: PendingApproval, timeout: float) -> None:
        if self._events is not None:
            self._events.publish(
                ApprovalRequested(
                    approval.id,
                    approval.agent,
                    approval.channel,
                    approval.sender,
                    approval.what,
                    timeout,
                )
            )

    def _publish_decided(self, decided: Decided) -> None:
        if self._events is not None:
            a = decided.approval
            self._events.publish(ApprovalResolved(a.id, a.agent, a.channel, decided.outcome))
