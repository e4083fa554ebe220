"""Conversation turns: their events (shared by agent, daemon and CLI), the typed bodies
that carry them over the bus, and the daemon's turn service (the one way an inbound
conversation enters an agent).

The service loads on first use, so agent processes, which only need the events and the
bodies, never import daemon code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_attributes
from ._adapter import (
    ADAPTER_SERVICE,
    AdapterAdmission,
    AdapterCall,
    AdapterInvoke,
    AdapterRefusalCode,
    AdapterResult,
)
from ._approvals import ApprovalOutcome, ApprovalQueue, Decided, NotPending, PendingApproval
from ._dispatch import (
    SUBAGENT_SERVICE,
    TERMINAL_STATES,
    CatalogAnswer,
    CatalogCall,
    CatalogEntry,
    DispatchAnswer,
    DispatchCall,
    InvocationState,
)
from ._events import ApprovalAsked, Delta, ToolCallRecord, ToolUsed, TurnDone, TurnEvent
from ._subagent_records import (
    DispatchRefusalCode,
    EventBody,
    Invocation,
    InvocationErrorCode,
    InvocationEvent,
    McpBinding,
    Policy,
    RevisionRecord,
    StateEntered,
    TextDelta,
    ToolCalled,
)
from ._wire import (
    TURN_SERVICE,
    AgentTurnEvent,
    ApprovalAnswer,
    ApprovalQuestion,
    TurnCancel,
    TurnEventPost,
    TurnInput,
)

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
    from ._service import Turn, TurnService

# The outcomes name the bus's refusal codes (the bus client: trio, zmq); the CLI, which
# only prints events, does not load them (ADR 0035).
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
        "Turn": "._service",
        "TurnService": "._service",
    },
)


def __getattr__(name: str) -> Any:
    return _load(name, globals())


__all__ = [
    "ADAPTER_SERVICE",
    "SUBAGENT_SERVICE",
    "TERMINAL_STATES",
    "TURN_SERVICE",
    "AdapterAdmission",
    "AdapterCall",
    "AdapterInvoke",
    "AdapterRefusalCode",
    "AdapterResult",
    "AgentDown",
    "AgentTurnEvent",
    "ApprovalAnswer",
    "ApprovalAsked",
    "ApprovalOutcome",
    "ApprovalQuestion",
    "ApprovalQueue",
    "CatalogAnswer",
    "CatalogCall",
    "CatalogEntry",
    "Decided",
    "Delta",
    "DispatchAnswer",
    "DispatchCall",
    "DispatchRefusalCode",
    "EventBody",
    "Invocation",
    "InvocationErrorCode",
    "InvocationEvent",
    "InvocationState",
    "McpBinding",
    "NotPending",
    "OperatorApprovals",
    "PendingApproval",
    "Policy",
    "RevisionRecord",
    "ServiceEvent",
    "StateEntered",
    "TextDelta",
    "ToolCallRecord",
    "ToolCalled",
    "ToolUsed",
    "Turn",
    "TurnCancel",
    "TurnCancelled",
    "TurnDone",
    "TurnEvent",
    "TurnEventPost",
    "TurnInput",
    "TurnOutcome",
    "TurnOverflow",
    "TurnRefused",
    "TurnService",
    "result_json",
]
