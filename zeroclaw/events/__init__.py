"""Typed daemon events and the bounded sink that producers publish them to."""

from ._sink import EventSink, Subscription
from ._types import (
    AgentTransition,
    DiscoveryCompleted,
    Event,
    MemoryOperation,
    Published,
    RegistrationDecided,
    ReloadApplied,
    RouteRefused,
)

__all__ = [
    "AgentTransition",
    "DiscoveryCompleted",
    "Event",
    "EventSink",
    "MemoryOperation",
    "Published",
    "RegistrationDecided",
    "ReloadApplied",
    "RouteRefused",
    "Subscription",
]
