"""Conversations in the daemon: the turn service (the one way an inbound conversation
enters an agent), how a turn ends when its agent did not end it, and the operator's
approval queue.

Daemon side (ADR 0049): it speaks to the router, so it imports the bus. What agent and
daemon share about a turn (its events and the bodies that carry them) is in the neutral
`turns` package, which imports none of this.

The service, the outcomes and the approval queue's trio shell load on first use: the bus
client (trio, zmq) comes with them, and the CLI, which may name one, loads only what it
asks for (ADR 0035). `ApprovalQueue`, the queue's pure core, is plain Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._approvals import ApprovalOutcome, ApprovalQueue, Decided, NotPending, PendingApproval

if TYPE_CHECKING:
    from ._operator_approvals import OperatorApprovals
    from ._outcomes import (
        AgentDown,
        ServiceEvent,
        TurnCancelled,
        TurnOutcome,
        TurnOverflow,
        TurnRefused,
        result_json,
    )
    from ._service import (
        AdmitAll,
        ContextReader,
        Refusal,
        Turn,
        TurnAdmission,
        TurnService,
    )

_load = lazy_attributes(
    __name__,
    {
        "AgentDown": "._outcomes",
        "ServiceEvent": "._outcomes",
        "TurnCancelled": "._outcomes",
        "TurnOutcome": "._outcomes",
        "TurnOverflow": "._outcomes",
        "TurnRefused": "._outcomes",
        "result_json": "._outcomes",
        "OperatorApprovals": "._operator_approvals",
        "AdmitAll": "._service",
        "ContextReader": "._service",
        "Refusal": "._service",
        "Turn": "._service",
        "TurnAdmission": "._service",
        "TurnService": "._service",
    },
)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "AdmitAll",
    "AgentDown",
    "ApprovalOutcome",
    "ApprovalQueue",
    "ContextReader",
    "Decided",
    "NotPending",
    "OperatorApprovals",
    "PendingApproval",
    "Refusal",
    "ServiceEvent",
    "Turn",
    "TurnAdmission",
    "TurnCancelled",
    "TurnOutcome",
    "TurnOverflow",
    "TurnRefused",
    "TurnService",
    "result_json",
]
