"""The router's counters as `status` and the metrics read them. Core, so that the control
protocol (which the CLI loads without the bus and its zmq) carries them as they are."""

from __future__ import annotations

import msgspec


class RefusedConnections(msgspec.Struct, frozen=True):
    """Connections the router turned away, by reason."""

    zap_denied: int = 0  # a curve key the router does not know
    handshake_failed: int = 0


class RouterCoreStats(msgspec.Struct, frozen=True):
    """The sans-IO core's counters (RouterCore.stats)."""

    connected: list[str]  # aliases, sorted
    in_flight: int  # delivered, not acknowledged yet
    open_questions: int
    outcomes: dict[str, int]  # "delivered" and every refusal code -> messages
    refused_connections: RefusedConnections
    other: dict[str, int]  # any other counter the core keeps


class RouterStats(msgspec.Struct, frozen=True):
    """The router's status (Router.stats): the core's counters and its endpoint's."""

    endpoint: str
    server_public_key: str
    connected: list[str]
    in_flight: int
    open_questions: int
    parked: int  # frames waiting for a slow agent's socket
    outcomes: dict[str, int]
    refused_connections: RefusedConnections
    other: dict[str, int]
    at: float  # wall-clock seconds
