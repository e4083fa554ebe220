"""Typed daemon events and the bounded sink that producers publish them to."""

from ._sink import EventSink, Subscription
from ._types import (
    AgentExited,
    AgentTransition,
    DiscoveryCompleted,
    Event,
    InvocationFinished,
    MemoryOperation,
    Published,
    RegistrationDecided,
    ReloadApplied,
    RouteRefused,
    TurnFinished,
)

__all__ = [
    "AgentExited",
    "AgentTransition",
    "DiscoveryCompleted",
    "Event",
    "EventSink",
    "InvocationFinished",
    "MemoryOperation",
    "Published",
    "RegistrationDecided",
    "ReloadApplied",
    "RouteRefused",
    "Subscription",
    "TurnFinished",
]
