"""What every conversation turn shares across processes: its events."""

from ._events import ApprovalAsked, Delta, ToolCallRecord, ToolUsed, TurnDone, TurnEvent

__all__ = ["ApprovalAsked", "Delta", "ToolCallRecord", "ToolUsed", "TurnDone", "TurnEvent"]
