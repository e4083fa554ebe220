"""Operating the daemon: its systemd unit, `doctor`, metrics and the event stream's readers."""

from ._event_filter import (
    EVENT_KINDS,
    KIND_NAMES,
    EventFilter,
    describe,
    event_agents,
    event_json,
    event_kind,
    event_line,
    unknown_kinds,
)

__all__: list[str] = [
    "EVENT_KINDS",
    "KIND_NAMES",
    "EventFilter",
    "describe",
    "event_agents",
    "event_json",
    "event_kind",
    "event_line",
    "unknown_kinds",
]
