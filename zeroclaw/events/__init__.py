"""Typed daemon events and the bounded sink that producers publish them to.

The sink (trio) loads on first use: the CLI decodes events without it (ADR 0035)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._types import (
    AgentExited,
    AgentTransition,
    ApprovalRequested,
    ApprovalResolved,
    BudgetExceeded,
    DiscoveryCompleted,
    DiscoveryFailed,
    DiscoveryHealthChecked,
    DiscoveryItemFound,
    DiscoveryItemInvalid,
    DiscoveryStarted,
    Event,
    InvocationFinished,
    McpSchemaChanged,
    McpServerChanged,
    McpToolTrusted,
    MemoryOperation,
    ProviderBreakerChanged,
    Published,
    RegistrationDecided,
    ReloadApplied,
    RouteRefused,
    ScheduleDelivered,
    ScheduleFailed,
    ScheduleFired,
    ScheduleMissed,
    ScheduleSkipped,
    TurnFinished,
    TurnSpent,
)

if TYPE_CHECKING:
    from ._sink import EventSink, Subscription

_load = lazy_attributes(__name__, {"EventSink": "._sink", "Subscription": "._sink"})


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "AgentExited",
    "AgentTransition",
    "ApprovalRequested",
    "ApprovalResolved",
    "BudgetExceeded",
    "DiscoveryCompleted",
    "DiscoveryFailed",
    "DiscoveryHealthChecked",
    "DiscoveryItemFound",
    "DiscoveryItemInvalid",
    "DiscoveryStarted",
    "Event",
    "EventSink",
    "InvocationFinished",
    "McpSchemaChanged",
    "McpServerChanged",
    "McpToolTrusted",
    "MemoryOperation",
    "ProviderBreakerChanged",
    "Published",
    "RegistrationDecided",
    "ReloadApplied",
    "RouteRefused",
    "ScheduleDelivered",
    "ScheduleFailed",
    "ScheduleFired",
    "ScheduleMissed",
    "ScheduleSkipped",
    "Subscription",
    "TurnFinished",
    "TurnSpent",
]
