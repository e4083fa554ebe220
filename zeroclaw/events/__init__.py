"""Typed daemon events and the bounded sink that producers publish them to."""

from ._sink import EventSink, Subscription
from ._types import (
    AgentExited,
    AgentTransition,
    Event,
    InvocationFinished,
    MemoryOperation,
    Published,
    ReloadApplied,
    RouteRefused,
    TurnFinished,
)

__all__ = [
    "AgentExited",
    "AgentTransition",
    "Event",
    "EventSink",
    "InvocationFinished",
    "MemoryOperation",
    "Published",
    "ReloadApplied",
    "RouteRefused",
    "Subscription",
    "TurnFinished",
]
