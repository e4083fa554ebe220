"""The life of one invocation as pure code: which state may follow which, and what the
daemon does with unfinished invocations when it starts again (issue 12, Deliver 4 and 5).

    accepted -> running | failed | timed_out | cancelled | interrupted
    running  -> succeeded | failed | timed_out | cancelled | interrupted
    succeeded, failed, timed_out, cancelled, interrupted: terminal, never left

No I/O: the store applies these inside its transactions, so a refused transition writes
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ..turns import TERMINAL_STATES, EventBody, Invocation, InvocationState, StateEntered

NEXT: Mapping[InvocationState, frozenset[InvocationState]] = {
    "accepted": frozenset({"running", "failed", "timed_out", "cancelled", "interrupted"}),
    "running": frozenset({"succeeded", "failed", "timed_out", "cancelled", "interrupted"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "timed_out": frozenset(),
    "cancelled": frozenset(),
    "interrupted": frozenset(),
}

UNFINISHED: frozenset[InvocationState] = frozenset({"accepted", "running"})

# What every invocation left accepted or running by a stopped daemon becomes at its start.
RESTART_INTERRUPT = StateEntered(
    "interrupted", "daemon_restarted", "the daemon stopped before the invocation ended"
)


class IllegalTransition(ValueError):
    """An event the invocation's state does not allow (a terminal state never changes)."""

    def __init__(self, invocation_id: str, state: str, wanted: str) -> None:
        super().__init__(f"invocation {invocation_id} is {state}: it cannot take {wanted}")
        self.invocation_id = invocation_id
        self.state = state
        self.wanted = wanted


def is_terminal(inv: Invocation) -> bool:
    return inv.state in TERMINAL_STATES


def advance(
    inv: Invocation,
    entered: StateEntered,
    now: float,
    *,
    output: Any = None,
    reply: str = "",
    pointer: str | None = None,
) -> Invocation:
    """The record after `entered`, or IllegalTransition. The error fields come from the
    body; output, reply and pointer are the caller's (a terminal state's results)."""
    if entered.state not in NEXT[inv.state]:
        raise IllegalTransition(inv.id, inv.state, f"the state {entered.state}")
    if entered.state == "succeeded" and entered.error_code is not None:
        raise IllegalTransition(inv.id, inv.state, f"succeeded with {entered.error_code}")
    return msgspec.structs.replace(
        inv,
        state=entered.state,
        updated_at=now,
        error_code=entered.error_code,
        error_detail=entered.detail,
        error_pointer=pointer,
        output=output,
        reply=reply,
    )


def check_event(inv: Invocation, body: EventBody) -> None:
    """An ended invocation's timeline is closed: a late delta after a timeout or a cancel
    is refused rather than appended after the state that ended it."""
    if is_terminal(inv) and not isinstance(body, StateEntered):
        raise IllegalTransition(inv.id, inv.state, f"a {type(body).__name__} event")


@dataclass(frozen=True)
class Recovery:
    """What to do with one invocation left unfinished: enter `entered`, and re-run it
    when `retry`."""

    invocation: Invocation
    entered: StateEntered
    retry: bool


def recovery_plan(
    unfinished: Sequence[Invocation], retryable: Callable[[Invocation], bool]
) -> list[Recovery]:
    """At daemon start: every accepted or running invocation is interrupted. It is re-run
    when `retryable` says its sub-agent may be (effects none/read_only, retry_on_restart)
    and it is a first attempt: a retry is never retried, so nothing runs more than twice."""
    plan = []
    for inv in unfinished:
        if inv.state not in UNFINISHED:
            continue  # ended already: nothing to recover
        first = inv.attempt == 1 and inv.retry_of is None and inv.retried_by is None
        plan.append(Recovery(inv, RESTART_INTERRUPT, first and retryable(inv)))
    return plan


def retry_of(inv: Invocation, new_id: str, now: float) -> Invocation:
    """The next attempt of `inv`: the same request, under the same idempotency key, on the
    same revision (its digest is kept: a revision is immutable, and the retry re-runs what
    was accepted, even if the bundle changed since)."""
    return Invocation(
        id=new_id,
        agent_id=inv.agent_id,
        digest=inv.digest,
        caller=inv.caller,
        source=inv.source,
        task=inv.task,
        input=inv.input,
        parent_run_id=inv.parent_run_id,
        idempotency_key=inv.idempotency_key,
        created_at=now,
        updated_at=now,
        attempt=inv.attempt + 1,
        retry_of=inv.id,
    )
