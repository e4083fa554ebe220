"""Typed daemon events and the bounded sink that producers publish them to."""

from ._sink import EventSink, Subscription
from ._types import (
    AgentTransition,
    Event,
    MemoryOperation,
    Published,
    ReloadApplied,
    RouteRefused,
)

__all__ = [
    "AgentTransition",
    "Event",
    "EventSink",
    "MemoryOperation",
    "Published",
    "ReloadApplied",
    "RouteRefused",
    "Subscription",
]
