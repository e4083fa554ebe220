"""What the daemon tells the world about itself: typed events, one struct per kind.

Producers (supervisor, router, services) publish these to the daemon's EventSink; readers
(the operations issue's `events --follow` and metrics) consume them without touching any
producer again. Every event is a msgspec struct in one tagged union on `kind`, so it
crosses a process boundary (the control socket) as it is.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class _Event(msgspec.Struct, frozen=True, tag_field="kind", omit_defaults=True):
    pass


class AgentTransition(_Event, tag="agent.transition", frozen=True):
    """An agent's lifecycle state changed (starting, running, backoff, fatal, ...)."""

    alias: str
    from_state: str
    to_state: str
    reason: str = ""


class RouteRefused(_Event, tag="route.refused", frozen=True):
    """The router refused a message (or an injected conversation) with a stable code."""

    sender: str
    to: str
    code: str
    detail: str = ""
    channel: str = ""


class ReloadApplied(_Event, tag="reload", frozen=True):
    """A reload finished: applied (`ok`), refused (`reload_failed`, running config kept) or
    applied with agents that did not stop by its deadline (`incomplete`)."""

    outcome: Literal["ok", "reload_failed", "incomplete"]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


class MemoryOperation(_Event, tag="memory", frozen=True):
    """One memory operation through the daemon, by kind; `code` is set when it failed."""

    agent: str
    op: str
    ok: bool = True
    code: str = ""


class DiscoveryCompleted(_Event, tag="discovery.completed", frozen=True):
    """A discovery scan finished and the adapter registry was swapped (ADR 0034)."""

    found: int
    registered: int
    rejected: int
    display_only: int
    shadowed: int
    from_cache: bool = False
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    kept_last_good: tuple[str, ...] = ()
    degraded: tuple[str, ...] = ()  # required items that are not registered
    timed_out: tuple[str, ...] = ()  # sources cut off by the global timeout


class DiscoveryStarted(_Event, tag="discovery.started", frozen=True):
    """A discovery run began (the cache may still answer it: see its `completed`)."""

    refresh: bool = False


class DiscoveryFailed(_Event, tag="discovery.failed", frozen=True):
    """A discovery run failed as a whole; the registry it had stays."""

    detail: str


class DiscoveryItemFound(_Event, tag="discovery.found", frozen=True):
    """An item a scan found, when it is new or its facts changed since the last scan."""

    key: str
    source: str  # the source kind: project_manifest, config, path, user_dir, ...
    capabilities: tuple[str, ...] = ()


class DiscoveryItemInvalid(_Event, tag="discovery.invalid", frozen=True):
    """A found item with errors (a broken manifest, a refused path), when new or changed;
    `kinds` are its diagnostics' DiscoveryErrorKind, `message` the first, redacted."""

    key: str
    source: str
    kinds: tuple[str, ...]
    message: str = ""


class DiscoveryHealthChecked(_Event, tag="discovery.health_checked", frozen=True):
    """An item's probe (`--version`, an MCP metadata probe, a model server) gave a health
    other than the last scan's. `tools_hash`: a probed MCP server's tool-schema hash."""

    key: str
    status: str
    version: str = ""
    message: str = ""
    tools_hash: str = ""


class RegistrationDecided(_Event, tag="discovery.decided", frozen=True):
    """One item's registration decision, when it is new or changed since the last scan."""

    key: str
    action: str
    reason: str
    target: str
    shadowed_by: str = ""


class AgentExited(_Event, tag="agent.exited", frozen=True):
    """An agent's process ended. `cause` is a small fixed set (metrics label it by cause):
    `stopped` (asked to stop), `signal` (killed by one it was not asked to take),
    `config` (exit 78: cannot start as configured), `spawn_failed`, or `exit_status`
    (it exited by itself); `exit` says how, for people."""

    alias: str
    cause: Literal["stopped", "signal", "config", "spawn_failed", "exit_status"]
    exit: str = ""


class TurnFinished(_Event, tag="turn.finished", frozen=True):
    """A conversation turn ended, however: `outcome` is `ok`, `error` (the provider's),
    `cancelled`, `refused`, `agent_down`, `overflow` or `abandoned` (its channel left
    before the end); `duration_secs` from its opening to its end."""

    agent: str
    channel: str
    outcome: str
    duration_secs: float


class InvocationFinished(_Event, tag="invocation.finished", frozen=True):
    """A sub-agent invocation reached its terminal state; `code` is its error code."""

    agent_id: str
    state: str
    code: str = ""


class ApprovalRequested(_Event, tag="approval.requested", frozen=True):
    """A supervised action in a turn an outside sender started waits in the operator's
    queue (`zeroclaw approvals approve|deny ID`); no answer by `timeout_secs` is a denial."""

    id: str
    agent: str
    channel: str
    external_sender: str  # not `sender`: that field names an agent in other kinds
    what: str
    timeout_secs: float


class ApprovalResolved(_Event, tag="approval.resolved", frozen=True):
    """An operator-queued approval was decided: `approved`, `denied`, `timed_out` or
    `abandoned` (its turn ended first); all but `approved` deny the action."""

    id: str
    agent: str
    channel: str
    outcome: Literal["approved", "denied", "timed_out", "abandoned"]


class McpSchemaChanged(_Event, tag="mcp.schema_changed", frozen=True):
    """An MCP tool an agent was offered listed a different schema (its digest, or its
    read-only annotation): withheld from the model until `zeroclaw mcp trust`."""

    agent: str
    server: str
    tool: str
    trusted_digest: str
    digest: str
    trusted_read_only: bool = False
    read_only: bool = False


class McpToolTrusted(_Event, tag="mcp.trusted", frozen=True):
    """The operator trusted the latest schema of an MCP tool: offered again."""

    agent: str
    server: str
    tool: str
    digest: str


class McpServerChanged(_Event, tag="mcp.server", frozen=True):
    """An agent reported a new status of one of its MCP servers."""

    agent: str
    server: str
    status: str
    detail: str = ""
    restarts: int = 0


class ScheduleFired(_Event, tag="schedule.fired", frozen=True):
    """A schedule's run started, recorded before its turn (issue 28): `slot` is the time it
    was due (None: the operator's `schedules run`), `late` when it runs by `catch_up`."""

    schedule: str  # "<agent>.<name>"
    run_id: str
    slot: float | None = None
    late: bool = False


class ScheduleDelivered(_Event, tag="schedule.delivered", frozen=True):
    """A run's reply reached its `deliver_to` (a channel, or `log`)."""

    schedule: str
    run_id: str
    deliver_to: str
    duration_secs: float = 0.0


class ScheduleFailed(_Event, tag="schedule.failed", frozen=True):
    """A run did not end with its reply delivered. `code`: `turn_error` (the provider),
    `timeout`, `refused`, `unavailable`, `budget_exceeded`, `cancelled`, `too_large`,
    `not_delivered`, `daemon_restarted` (the last daemon died while it ran: it is not run
    again), `store_failed`, `nothing_to_read` (a heartbeat file that cannot be read)."""

    schedule: str
    run_id: str
    code: str
    detail: str = ""


class ScheduleSkipped(_Event, tag="schedule.skipped", frozen=True):
    """A slot not run: `overlap` (its last run still ran), `queue_full`, `cancelled` (a
    queued run of a schedule removed, disabled or paused), `nothing_open` (a heartbeat
    whose HEARTBEAT.md has no open item)."""

    schedule: str
    reason: str
    slot: float | None = None


class ScheduleMissed(_Event, tag="schedule.missed", frozen=True):
    """Slots that passed unrun: `down` (the daemon was not running), `late` (more than a
    minute late), `coalesced` (several due at once: only the latest runs). `count` is at
    least that many, `latest` the last of them."""

    schedule: str
    count: int
    latest: float
    reason: str


class TurnSpent(_Event, tag="usage.turn", frozen=True):
    """What a turn's provider steps used, as its agent reported them (ADR 0057): tokens by
    kind, the cost at the config's prices (six decimals), who answered, who failed before.
    `origin` is the daemon's word (`operator`, `webhook.ops:ci-bot`, `peer:beta`), never
    the agent's; `unknown` for a turn the daemon did not open to that agent."""

    agent: str
    origin: str
    session: str
    steps: int
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    cost: str = "0.000000"
    providers: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    estimated: bool = False  # some step's server reported no usage: counted, 4 chars a token
    stopped: bool = False  # a budget ended it after this step


class BudgetExceeded(_Event, tag="budget.exceeded", frozen=True):
    """A budget refused a turn before any provider call (`at` = "start"), or ended a turn
    after its current step (`at` = "step"). `scope` says whose budget: the agent's, one
    outside origin's, or a channel's senders' together."""

    agent: str
    origin: str
    limit: Literal["tokens_per_day", "cost_per_day", "turns_per_hour"]
    scope: str
    detail: str
    at: Literal["start", "step"]


class ProviderBreakerChanged(_Event, tag="provider.breaker", frozen=True):
    """A provider of an agent's fallback chain changed state (`closed`, `open`: skipped
    for a while, `half_open`: one call tries it), as the agent reported it."""

    agent: str
    provider: str
    state: Literal["closed", "open", "half_open"]
    failures: int = 0
    last_error: str = ""


Event = (
    AgentTransition
    | RouteRefused
    | ReloadApplied
    | MemoryOperation
    | DiscoveryStarted
    | DiscoveryFailed
    | DiscoveryItemFound
    | DiscoveryItemInvalid
    | DiscoveryHealthChecked
    | DiscoveryCompleted
    | RegistrationDecided
    | AgentExited
    | TurnFinished
    | InvocationFinished
    | ApprovalRequested
    | ApprovalResolved
    | McpSchemaChanged
    | McpToolTrusted
    | McpServerChanged
    | ScheduleFired
    | ScheduleDelivered
    | ScheduleFailed
    | ScheduleSkipped
    | ScheduleMissed
    | TurnSpent
    | BudgetExceeded
    | ProviderBreakerChanged
)


class Published(msgspec.Struct, frozen=True):
    """An event as the sink keeps it: numbered in publication order, stamped on arrival."""

    seq: int
    at: float  # wall-clock seconds
    event: Event
