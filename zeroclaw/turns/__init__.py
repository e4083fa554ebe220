"""Conversation turns: their events (shared by agent, daemon and CLI) and the typed bodies
that carry them, and the sub-agent and adapter calls, over the bus.

Neutral (ADRs 0016, 0049): it imports no other zeroclaw package, so an agent process,
the daemon and the CLI agree on a turn without importing each other. The
daemon's turn service, which speaks to the router, is in `conversations`.
"""

from __future__ import annotations

from ._adapter import (
    ADAPTER_SERVICE,
    AdapterAdmission,
    AdapterCall,
    AdapterInvoke,
    AdapterRefusalCode,
    AdapterResult,
)
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
    "AgentTurnEvent",
    "ApprovalAnswer",
    "ApprovalAsked",
    "ApprovalQuestion",
    "CatalogAnswer",
    "CatalogCall",
    "CatalogEntry",
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
    "Policy",
    "RevisionRecord",
    "StateEntered",
    "TextDelta",
    "ToolCallRecord",
    "ToolCalled",
    "ToolUsed",
    "TurnCancel",
    "TurnDone",
    "TurnEvent",
    "TurnEventPost",
    "TurnInput",
]
