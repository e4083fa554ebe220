"""What the daemon answers, one struct per reply, beside the requests that name them.

Field names and order are the `--json` shapes the CLI has always printed: the CLI prints
these structs as they are (`msgspec.to_builtins`).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .._router_stats import RouterStats
from ..events import Published
from ..policy import Gap
from ..turns import (
    MEMORY_OPERATIONS,
    Invocation,
    InvocationEvent,
    InvocationState,
    McpBinding,
    MemoryReply,
    MemorySummary,
    Policy,
    StepUsage,
    ToolCallRecord,
    TurnStop,
)

ReloadOutcome = Literal["never", "ok", "reload_failed", "incomplete"]


class AgentStatus(msgspec.Struct, frozen=True):
    """One agent as `status`, `agents list` and `agents start|stop|restart` show it."""

    alias: str
    state: str
    pid: int | None
    restarts: int
    last_exit: str | None
    last_error: str | None
    since: float | None  # wall-clock seconds of the last change; None: never started
    since_secs: float | None
    activation: str
    busy_turns: int
    next_start_in: float | None
    sandbox: str  # what confines this agent's shell commands
    # What the agent itself reported after starting: True when its Landlock ruleset is in
    # force, False when it runs unconfined, None when it is not running or has not said yet.
    sandbox_in_force: bool | None = None
    # What the agent process runs without on this kernel (ADR 0043): "signal_scope",
    # "abstract_unix_socket_scope" (Landlock ABI < 6), "tcp_rules" (ABI < 4); all three
    # when Landlock is not applied at all.
    without: list[Gap] = msgspec.field(default_factory=list)


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


class ChannelStatus(msgspec.Struct, frozen=True):
    """One channel adapter (a webhook listener may serve several channel keys)."""

    keys: list[str]
    state: str  # starting | serving | failed | stopped
    failures: int  # failed starts in a row
    last_error: str | None
    since: float  # wall clock of the last change
    retry_at: float | None  # wall clock of the next start, when failed
    delivered: int = 0  # messages it passed to an agent
    refused: dict[str, int] = msgspec.field(default_factory=dict)  # by the rule that decided


class DiscoveryStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """The daemon's last discovery scan (issue 15). `degraded` lists required items that
    are not registered: while it is not empty the daemon is degraded."""

    scanned_at: float | None = None  # wall-clock; None: no scan yet
    registered_adapters: int = 0
    degraded: list[str] = msgspec.field(default_factory=list)


class ApprovalInfo(msgspec.Struct, frozen=True):
    """One approval waiting in the operator's queue (ADR 0042)."""

    id: str
    agent: str
    channel: str  # the origin's channel key
    sender: str  # the outside sender on it
    what: str
    expires_in_secs: float  # no answer by then is a denial


class ApprovalsReply(msgspec.Struct, frozen=True):
    approvals: list[ApprovalInfo]


class ApprovalDecision(msgspec.Struct, frozen=True):
    """The operator's answer, as the queue took it."""

    id: str
    approved: bool


class McpStatus(msgspec.Struct, frozen=True):
    """The MCP servers' pins in `zeroclaw status` (issue 26); `zeroclaw mcp` has the rest."""

    servers: int
    pinned: int
    withheld: int
    store_problem: str = ""


class NextFire(msgspec.Struct, frozen=True):
    """An agent's schedule due first, in `zeroclaw status` (issue 28)."""

    agent: str
    schedule: str
    at: float  # wall clock


class ScheduleRunInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """How a schedule's last run ended: `delivered`, or the failure's code."""

    run_id: str
    outcome: str
    ended_at: float
    detail: str = ""
    slot: float | None = None


class ScheduleInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """One schedule (`zeroclaw schedules list|show`): configured, a heartbeat, or an agent's
    own reminder."""

    agent: str
    name: str
    kind: str  # config | heartbeat | reminder
    trigger: str  # "cron 0 8 * * 1-5 in Europe/Berlin", "every 900s", "once at 1767254400"
    deliver_to: str
    enabled: bool
    paused: bool
    next_fire: float | None = None
    running: str | None = None  # the run in progress
    queued: float | None = None  # a slot waiting for it
    last_run: ScheduleRunInfo | None = None
    # `show` only
    text: str | None = None
    session: str | None = None
    tools: list[str] | None = None
    overlap: str | None = None
    catch_up: str | None = None
    jitter_secs: float | None = None
    timeout_secs: float | None = None
    created_by: str | None = None


class SchedulesReply(msgspec.Struct, frozen=True):
    schedules: list[ScheduleInfo]


class ScheduleRunReply(msgspec.Struct, frozen=True):
    """`schedules run`: the run started (its outcome comes as events)."""

    schedule: str
    run_id: str


class ProviderStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """One provider of an agent's fallback chain and its circuit breaker (ADR 0058), as
    the agent last reported it; `closed` until it reports otherwise."""

    agent: str
    provider: str
    state: Literal["closed", "open", "half_open"]
    failures: int = 0
    retry_in_secs: float = 0.0
    last_error: str = ""
    reported_secs_ago: float | None = None  # None: the agent has not reported yet


class BudgetStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """One budget and what it has spent (ADR 0057): today's (UTC) tokens and cost, and the
    turns of the last hour. A limit left out is no limit."""

    agent: str
    scope: str  # "agent", an origin ("webhook.ops:ci-bot"), or a channel's senders ("webhook.ops")
    tokens: int = 0
    cost: str = "0.000000"
    turns_last_hour: int = 0
    tokens_per_day: int | None = None
    cost_per_day: str | None = None
    turns_per_hour: int | None = None


class UsageRow(msgspec.Struct, frozen=True, omit_defaults=True):
    """What one agent spent on one UTC day, for one origin, session and provider (a turn's
    start has no provider: `provider` ""). `cost` has six decimals; `cost_pico` is exact."""

    day: str
    agent: str
    origin: str
    session: str
    provider: str
    turns: int = 0
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    cost: str = "0.000000"
    cost_pico: int = 0
    estimated_steps: int = 0


class UsageReply(msgspec.Struct, frozen=True):
    rows: list[UsageRow]
    since: str  # the first UTC day counted


class StatusReply(msgspec.Struct, frozen=True, omit_defaults=True):
    daemon: DaemonStatus
    counts: dict[str, int]
    router: RouterStats
    agents: list[AgentStatus]
    control: ControlStats | None = None
    # Sub-agent revision runtimes (issue 12): started on demand, not counted as agents.
    runtimes: list[AgentStatus] = msgspec.field(default_factory=list)
    # Channel adapters (issue 13): webhook listeners and serial devices.
    channels: list[ChannelStatus] = msgspec.field(default_factory=list)
    discovery: DiscoveryStatus | None = None
    # Approvals waiting for the operator (ADR 0042), oldest first.
    approvals: list[ApprovalInfo] = msgspec.field(default_factory=list)
    # MCP servers' pinned tools (issue 26); None while no server is configured.
    mcp: McpStatus | None = None
    # Each agent's next scheduled run (issue 28), by agent.
    schedules: list[NextFire] = msgspec.field(default_factory=list)
    # Fallback chains' providers and their breakers; budgets and what they spent (issue 27).
    providers: list[ProviderStatus] = msgspec.field(default_factory=list)
    budgets: list[BudgetStatus] = msgspec.field(default_factory=list)


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


class ChatResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """A Chat's last reply: the finished turn as `zeroclaw chat --json` prints it (reply
    and tool_calls always, the rest only when they say something)."""

    reply: str
    tool_calls: tuple[ToolCallRecord, ...]
    error: str | None = None
    cancelled: bool = False
    sandbox_in_force: bool | None = None  # only a turn run in-process (no daemon) says
    # Each provider step: who answered, what it used (issue 27); why a budget ended it.
    usage: tuple[StepUsage, ...] = ()
    stopped: TurnStop | None = None


class ShutdownReply(msgspec.Struct, frozen=True):
    stopping: bool
    pid: int


class EventsReply(msgspec.Struct, frozen=True):
    events: list[Published]


# --- memory: what `memory` operations answer (the operator's CLI and the service's shape) ----


# The structs are the memory service's wire (zeroclaw.turns), one definition for the
# agents' bus and the operator's socket.
# What each operator memory operation answers (the CLI decodes the reply's data as this).
MEMORY_REPLY_TYPES: dict[str, type[MemoryReply]] = {
    name: op.answer for name, op in MEMORY_OPERATIONS.items()
}


# --- sessions: what `sessions list|show` answer ----------------------------------------------

# Whose a session is: an origin kind (bus.OriginKind; mirrored, as the CLI does not load
# the bus), or "unknown" for a key that is no origin's (written before origins had keys).
SessionOwnerKindName = Literal[
    "operator", "channel", "peer", "subagent", "schedule", "api", "unknown"
]


class SessionInfo(msgspec.Struct, frozen=True):
    """One stored session of one agent, with the origin its key belongs to."""

    agent: str
    session: str  # the stored key, as `sessions show` takes it
    kind: SessionOwnerKindName
    who: str  # "operator", "webhook.ops:ci-bot", "peer:beta"
    name: str  # its name inside that origin
    turns: int
    last_at: float


class SessionsReply(msgspec.Struct, frozen=True):
    sessions: list[SessionInfo]


class TranscriptTurn(msgspec.Struct, frozen=True):
    role: str
    content: str  # model or outside text: the CLI escapes it for the terminal
    at: float


class SessionReply(msgspec.Struct, frozen=True):
    session: SessionInfo
    turns: list[TranscriptTurn]
    # What compactions kept of the turns they dropped, and which (ADR 0059).
    summary: MemorySummary | None = None


# --- sub-agents: what `subagents`, `dispatch` and `invocations` answer ----------------------
# The invocation records and their timeline are the daemon's own structs (zeroclaw.turns,
# neutral: no bus, no sub-agent store), carried as they are. Every reply carries
# `schema_version` (the subagents records' SCHEMA_VERSION).


class SubagentSummary(msgspec.Struct, frozen=True):
    """One loaded sub-agent as `subagents list` shows it: never its prompt or skills."""

    id: str
    description: str
    digest: str
    effects: str
    allowedCallers: list[str]  # the manifest's spelling
    maxConcurrency: int


class RefusedBundle(msgspec.Struct, frozen=True):
    """A bundle directory of the last scan that did not load, and why."""

    path: str
    problems: list[str]


class SubagentsReply(msgspec.Struct, frozen=True):
    schema_version: int
    subagents: list[SubagentSummary]
    refused: list[RefusedBundle]


class SubagentDetail(msgspec.Struct, frozen=True):
    """`subagents show`: the manifest, the current revision and its runtime; the skills by
    name only (neither SYSTEM.md nor a skill's text crosses the socket)."""

    schema_version: int
    id: str
    description: str
    model_provider: str
    mode: str
    digest: str
    snapshot: str
    identity: str  # the bus identity of this revision's runtime process
    policy: Policy
    effects: str
    retry_on_restart: bool
    mcp: list[McpBinding]
    skills: list[str]
    input_schema: dict[str, object] | None
    output_schema: dict[str, object] | None


class RevisionInfo(msgspec.Struct, frozen=True):
    agent_id: str
    digest: str
    snapshot: str
    first_seen: float
    description: str
    current: bool  # the revision a new dispatch runs


class RevisionsReply(msgspec.Struct, frozen=True):
    schema_version: int
    agent_id: str
    revisions: list[RevisionInfo]  # oldest first


class InvocationReply(msgspec.Struct, frozen=True):
    schema_version: int
    invocation: Invocation


class InvocationsReply(msgspec.Struct, frozen=True):
    schema_version: int
    invocations: list[Invocation]  # newest first


class DispatchRefusal(msgspec.Struct, frozen=True):
    """Why the daemon refused a dispatch before anything ran."""

    code: str
    detail: str
    pointer: str | None  # a JSON pointer into the input, for schema failures


class DispatchReply(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a dispatch came to: the finished invocation, or the refusal (the reply's
    `error` is then the refusal's code)."""

    schema_version: int
    invocation: Invocation | None = None
    refusal: DispatchRefusal | None = None


class InvocationEventsReply(msgspec.Struct, frozen=True):
    """Events of an invocation's timeline (every attempt, each in sequence order). With
    `--follow` they stream, several replies for one request; `state` is the invocation's
    state when this reply was sent (its terminal state in the last one)."""

    schema_version: int
    invocation_id: str
    events: list[InvocationEvent]
    state: InvocationState


class MetricsReply(msgspec.Struct, frozen=True):
    """The daemon's metrics in the Prometheus text format, exactly as /metrics serves them."""

    text: str


# --- MCP servers and their pinned tools (`zeroclaw mcp`, issue 26) -------------------------


class McpServerLive(msgspec.Struct, frozen=True):
    """How one agent's copy of a server is doing, as that agent last reported it."""

    agent: str
    status: str  # a turns.McpServerStatus
    detail: str = ""
    restarts: int = 0
    pid: int | None = None
    reported_at: float = 0.0  # wall-clock seconds


class McpServerInfo(msgspec.Struct, frozen=True):
    """A configured server: how it is reached, its allowlist, who uses it, its state."""

    name: str
    transport: Literal["stdio", "http"]
    target: str  # the command line, or the URL
    tools: tuple[str, ...]  # the config's allowlist
    agents: tuple[str, ...]  # the agents whose `mcp` names it
    live: tuple[McpServerLive, ...] = ()
    pinned: int = 0  # tools pinned, over every agent
    withheld: int = 0  # of those, the ones whose schema changed


class McpToolPin(msgspec.Struct, frozen=True):
    """One tool of one server as one agent saw it, and whether it is offered."""

    agent: str
    server: str
    tool: str
    state: Literal["trusted", "withheld"]
    digest: str  # the latest listing's
    trusted_digest: str
    first_digest: str
    read_only: bool
    trusted_read_only: bool
    allowed: bool  # in the server's `tools` allowlist
    first_seen: float
    description: str = ""
    changed_at: float | None = None
    trusted_at: float | None = None


class McpListReply(msgspec.Struct, frozen=True):
    servers: tuple[McpServerInfo, ...]
    store_problem: str = ""  # the pin store is unreadable: every tool is withheld


class McpServerDetail(msgspec.Struct, frozen=True):
    server: McpServerInfo
    tools: tuple[McpToolPin, ...]
    store_problem: str = ""


class McpToolsReply(msgspec.Struct, frozen=True):
    tools: tuple[McpToolPin, ...]
    store_problem: str = ""


class McpTrustReply(msgspec.Struct, frozen=True):
    """`trusted`: withheld tools the operator's trust made offered; `already`: the others
    the selector named, which were offered already; `stale`: those whose latest schema is
    not the digest given (not trusted)."""

    trusted: tuple[McpToolPin, ...]
    already: tuple[McpToolPin, ...]
    stale: tuple[McpToolPin, ...] = ()
