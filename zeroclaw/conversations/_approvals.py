"""The operator's approval queue: pending approvals of outside origins. Pure (ADR 0042).

A supervised action in a turn an outside sender started is asked here, not of the sender
(unless its peer group says `approvals = "sender"`). Each approval is answered once:

    ask -> pending --answer(yes)------------> approved
                   --answer(no)-------------> denied
                   --deadline passed--------> timed_out   (a denial)
                   --its turn ended first---> abandoned   (a denial, `close`)

An answer after the deadline is a timeout, whenever `expire` runs; a second answer, or an
answer to an id never asked, changes nothing (`NotPending`). At most `max_pending` wait at
once, at most `max_per_sender` of one sender and `max_per_channel` of one channel:
beyond, `ask` answers None, a denial. Time is given, never read:
the trio shell (`OperatorApprovals`) passes its clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

ApprovalOutcome = Literal["approved", "denied", "timed_out", "abandoned"]
# Approvals waiting at once; beyond, a new one is denied at once (outside senders must not
# grow the daemon's memory, or the operator's list, without bound).
MAX_PENDING_APPROVALS = 256
# One sender's share of them, and one channel's: a sender flooding supervised actions is
# denied beyond its own share, not every other sender (or channel) beyond the queue's.
MAX_PENDING_PER_SENDER = 16
MAX_PENDING_PER_CHANNEL = MAX_PENDING_APPROVALS // 2


@dataclass(frozen=True, slots=True)
class PendingApproval:
    id: str
    agent: str
    channel: str  # the origin's channel key ("webhook.ops")
    sender: str  # the outside sender on it
    what: str
    deadline: float  # on the queue's clock; no answer by then is a denial


@dataclass(frozen=True, slots=True)
class Decided:
    approval: PendingApproval
    outcome: ApprovalOutcome

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"


@dataclass(frozen=True, slots=True)
class NotPending:
    """Nothing to answer: the id was never asked, or was decided already."""

    id: str


class ApprovalQueue:
    def __init__(
        self,
        new_id: Callable[[], str],
        *,
        max_pending: int = MAX_PENDING_APPROVALS,
        max_per_sender: int = MAX_PENDING_PER_SENDER,
        max_per_channel: int = MAX_PENDING_PER_CHANNEL,
    ) -> None:
        self._new_id = new_id
        self._max_pending = max_pending
        self._max_per_sender = max_per_sender
        self._max_per_channel = max_per_channel
        self._pending: dict[str, PendingApproval] = {}  # in the order asked

    def ask(
        self, agent: str, channel: str, sender: str, what: str, *, now: float, timeout: float
    ) -> PendingApproval | None:
        """The new pending approval; None when `max_pending` wait already, or this
        sender's or channel's share of them (a denial)."""
        if len(self._pending) >= self._max_pending:
            return None
        waiting = self._pending.values()
        on_channel = [a for a in waiting if a.channel == channel]
        if len(on_channel) >= self._max_per_channel:
            return None
        if sum(a.sender == sender for a in on_channel) >= self._max_per_sender:
            return None
        approval_id = self._new_id()
        while approval_id in self._pending:  # ids are random; never let one shadow another
            approval_id = self._new_id()
        approval = PendingApproval(approval_id, agent, channel, sender, what, now + timeout)
        self._pending[approval_id] = approval
        return approval

    def answer(self, approval_id: str, approved: bool, *, now: float) -> Decided | NotPending:
        approval = self._pending.pop(approval_id, None)
        if approval is None:
            return NotPending(approval_id)
        if now >= approval.deadline:
            return Decided(approval, "timed_out")
        return Decided(approval, "approved" if approved else "denied")

    def expire(self, *, now: float) -> list[Decided]:
        """Every approval whose deadline passed, each decided `timed_out`."""
        due = [a for a in self._pending.values() if now >= a.deadline]
        for approval in due:
            del self._pending[approval.id]
        return [Decided(a, "timed_out") for a in due]

    def close(self, approval_id: str, *, now: float) -> Decided | NotPending:
        """Whoever waits for it stops waiting, unanswered: `timed_out` once its deadline
        passed, `abandoned` before (its turn ended first)."""
        approval = self._pending.pop(approval_id, None)
        if approval is None:
            return NotPending(approval_id)
        return Decided(approval, "timed_out" if now >= approval.deadline else "abandoned")

    def pending(self) -> tuple[PendingApproval, ...]:
        """Oldest first."""
        return tuple(self._pending.values())

    def get(self, approval_id: str) -> PendingApproval | None:
        return self._pending.get(approval_id)
