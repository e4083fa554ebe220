"""What the daemon persists about sub-agents, and what `zeroclaw invocations` shows.

The records themselves are defined once, in the neutral `zeroclaw.turns` (the control
replies carry the same structs); this module adds what only the daemon side names.
"""

from __future__ import annotations

from ..turns import (
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

SCHEMA_VERSION = 1  # of every listing the CLI prints (`schema_version`)

# Who may be a caller besides an agent alias (allowedCallers).
CLI_CALLER = "cli"
WORKFLOW_CALLER = "internal-workflow"

__all__ = [
    "CLI_CALLER",
    "SCHEMA_VERSION",
    "WORKFLOW_CALLER",
    "DispatchRefusalCode",
    "EventBody",
    "Invocation",
    "InvocationErrorCode",
    "InvocationEvent",
    "McpBinding",
    "Policy",
    "RevisionRecord",
    "StateEntered",
    "TextDelta",
    "ToolCalled",
]
