"""What the daemon answers, one struct per reply, beside the requests that name them.

Field names and order are the `--json` shapes the CLI has always printed: the CLI prints
these structs as they are (`msgspec.to_builtins`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..events import Published

ReloadOutcome = Literal["never", "ok", "reload_failed", "incomplete"]


class AgentStatus(msgspec.Struct, frozen=True):
    """One agent as `status`, `agents list` and `agents start|stop|restart` show it."""

    alias: str
    state: str
    pid: int | None
    restarts: int
    last_exit: str | None
    last_error: str | None
    since: float  # wall-clock seconds
    since_secs: float
    activation: str
    busy_turns: int
    next_start_in: float | None
    sandbox: str  # what confines this agent's shell commands


class ReloadStatus(msgspec.Struct, frozen=True):
    state: ReloadOutcome
    at: float | None
    errors: list[str]
    last_diff: dict[str, list[str]]


class DaemonStatus(msgspec.Struct, frozen=True):
    pid: int
    version: str
    started_at: float
    uptime_secs: float
    config: str
    state_dir: str
    runtime_dir: str
    ready: bool
    reload: ReloadStatus


class ControlStats(msgspec.Struct, frozen=True):
    """What the control socket has had to turn away."""

    connections: int
    refused_peers: int
    refused_busy: int
    reaped_idle: int
    reserved_used: int
    bad_requests: int


class StatusReply(msgspec.Struct, frozen=True, omit_defaults=True):
    daemon: DaemonStatus
    counts: dict[str, int]
    router: dict[str, Any]  # the router's counters (Router.stats)
    agents: list[AgentStatus]
    control: ControlStats | None = None


class AgentsReply(msgspec.Struct, frozen=True):
    agents: list[AgentStatus]


class ReloadReply(msgspec.Struct, frozen=True):
    reload: ReloadOutcome
    errors: list[str]
    diff: dict[str, list[str]]


class ProbeReply(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where a probe got: `outcome` is "delivered" or the code that stopped it. The route
    is absent when an alias is unknown; the round trip only when the agent answered."""

    outcome: str
    from_: str | None = msgspec.field(default=None, name="from")
    to: str | None = None
    channel: str | None = None
    rtt_ms: float | None = None
    detail: str | None = None


class ChatOpened(msgspec.Struct, frozen=True):
    agent: str


class ShutdownReply(msgspec.Struct, frozen=True):
    stopping: bool
    pid: int


class EventsReply(msgspec.Struct, frozen=True):
    events: list[Published]


# --- memory: what `memory` operations answer (the operator's CLI and the service's shape) ----


class MemoryRecord(msgspec.Struct, frozen=True):
    id: str
    agent: str
    key: str
    content: str
    category: str
    session: str | None
    created_at: float
    updated_at: float


class MemoryHit(MemoryRecord, frozen=True):
    score: float


class MemoryStored(msgspec.Struct, frozen=True):
    record: MemoryRecord


class MemoryFound(msgspec.Struct, frozen=True):
    record: MemoryRecord | None


class MemoryRecords(msgspec.Struct, frozen=True):
    records: list[MemoryRecord]


class MemoryHits(msgspec.Struct, frozen=True):
    hits: list[MemoryHit]


class NamespaceCounts(msgspec.Struct, frozen=True):
    records: int
    session_turns: int


class MemoryStats(msgspec.Struct, frozen=True):
    namespaces: dict[str, NamespaceCounts]
    commits: int
    committed_ops: int
    map_growths: int


class MemoryForgotten(msgspec.Struct, frozen=True):
    forgotten: bool


class MemoryPurged(msgspec.Struct, frozen=True):
    purged: int


MemoryReply = (
    MemoryStored
    | MemoryFound
    | MemoryRecords
    | MemoryHits
    | MemoryStats
    | MemoryForgotten
    | MemoryPurged
)
# What each operator memory operation answers (the CLI decodes the reply's data as this).
MEMORY_REPLY_TYPES: dict[str, type[MemoryReply]] = {
    "store": MemoryStored,
    "get": MemoryFound,
    "list": MemoryRecords,
    "recall": MemoryHits,
    "stats": MemoryStats,
    "export": MemoryRecords,
    "forget": MemoryForgotten,
    "purge": MemoryPurged,
}
