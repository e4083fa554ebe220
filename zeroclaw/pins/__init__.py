"""The daemon's pinned MCP tool schemas (issue 26, ADR 0053): a service.

The pin book (`_book`, pure) records each tool's schema the first time an agent reports
it; the store (`_store`) keeps it in `<state_dir>/mcp/pins.json`; the service (`_service`)
answers the agents' `MCP_PIN` and `MCP_STATE` and the operator's `zeroclaw mcp` commands
(`_control`). The service, its commands and the validate check load on first use (trio,
the control socket, the config models); the book and the store are light (msgspec), for
`doctor` and `config validate`.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._book import (
    MAX_SERVERS_PER_AGENT,
    MAX_TOOLS_PER_SERVER,
    BadListing,
    Observation,
    Pin,
    PinBook,
    PinKey,
    PinLimit,
    SchemaChange,
    ToolSeen,
    TrustOutcome,
)
from ._store import PinStore, PinStoreCorrupt, pins_path

if TYPE_CHECKING:
    from ._control import register_pin_commands
    from ._service import PinService, PinsUnavailable, UnknownServer
    from ._validate import readonly_pin_issues

_load = lazy_attributes(
    __name__,
    {
        "PinService": "._service",
        "PinsUnavailable": "._service",
        "UnknownServer": "._service",
        "register_pin_commands": "._control",
        "readonly_pin_issues": "._validate",
    },
)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "MAX_SERVERS_PER_AGENT",
    "MAX_TOOLS_PER_SERVER",
    "BadListing",
    "Observation",
    "Pin",
    "PinBook",
    "PinKey",
    "PinLimit",
    "PinService",
    "PinStore",
    "PinStoreCorrupt",
    "PinsUnavailable",
    "SchemaChange",
    "ToolSeen",
    "TrustOutcome",
    "UnknownServer",
    "pins_path",
    "readonly_pin_issues",
    "register_pin_commands",
]
