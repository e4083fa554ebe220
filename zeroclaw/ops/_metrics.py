"""The daemon's metrics in the Prometheus format (ADR 0029), and the `/metrics` listener.

Two kinds of series, both rendered by one collector in a registry of our own (never the
library's global one):

- read when scraped, from counters the components already keep (agents by state, the
  router's outcomes, channel messages, memory commit batch sizes): nothing is added to
  their hot paths;
- counted from the daemon's events (restarts, exits by cause, memory operations, turns
  and their durations, sub-agent invocations): a subscription to the EventSink, drained
  by `Metrics.run` in the daemon's nursery. Producers publish one small struct, O(1).

Every label takes its values from a bounded set: states, causes, codes and outcomes are
fixed sets; aliases, channel keys and sub-agent ids come from the config (a sub-agent
runtime's identity loses its revision digest). The listener is hypercorn's trio worker
serving a tiny ASGI app, like the webhook channel; a port it cannot bind is logged,
shown as `zeroclaw_metrics_listener_up 0` and retried, never fatal to the daemon.
"""

from __future__ import annotations

import bisect
import logging
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec
import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector

from .._asgi import LISTENERS, answer_lifespan, bind_listener, serve_guarded
from .._http_guard import CUTS, HttpBounds, check_bearer
from .._router_stats import RouterStats
from ..events import (
    AgentExited,
    AgentTransition,
    Event,
    EventSink,
    InvocationFinished,
    MemoryOperation,
    ReloadApplied,
    Subscription,
    TurnFinished,
)

log = logging.getLogger("zeroclaw.metrics")

# The supervisor's lifecycle states: every one is always reported, 0 when no agent is in it.
PICO = 10**12  # zeroclaw.usage's cost unit per unit of the prices' currency
AGENT_STATES = ("stopped", "starting", "running", "backoff", "fatal", "stopping")
TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # the service's MAX_BATCH
EVENT_BUFFER = 4096  # events the subscription holds while the metrics task is not running
RETRY_INITIAL_SECS = 1.0  # a listener that cannot bind tries again, doubling to the max
RETRY_MAX_SECS = 60.0


def agent_label(alias: str) -> str:
    """A sub-agent runtime's identity (`sub:<id>@<digest>`) without its digest, so that a
    new revision does not start a new series; an alias as it is."""
    return alias.partition("@")[0] if alias.startswith("sub:") else alias


def _nothing() -> Mapping[Any, int]:
    return {}


@dataclass(frozen=True)
class MetricsSources:
    """What the collector reads when scraped: each returns the component's own counters."""

    agent_states: Callable[[], Mapping[str, int]] = _nothing  # state -> agents in it
    router: Callable[[], RouterStats | None] = lambda: None  # Router.stats()
    channels_delivered: Callable[[], Mapping[str, int]] = _nothing  # channel -> messages
    channels_refused: Callable[[], Mapping[tuple[str, str], int]] = _nothing  # (channel, rule)
    memory_batches: Callable[[], Mapping[int, int]] = _nothing  # batch size -> commits
    memory_growths: Callable[[], int] = lambda: 0
    # (agent, quota kind) -> writes refused `quota_exceeded`; agent -> oldest turns dropped
    memory_quota_refusals: Callable[[], Mapping[tuple[str, str], int]] = _nothing
    memory_turns_dropped: Callable[[], Mapping[str, int]] = _nothing
    # (agent, outcome) -> scheduled runs: fired, delivered, failed, skipped, missed; and
    # agent -> its schedules (configured, heartbeat, reminders) (issue 28)
    schedule_runs: Callable[[], Mapping[tuple[str, str], int]] = _nothing
    schedules: Callable[[], Mapping[str, int]] = _nothing
    # The usage service's (issue 27): (agent, provider, kind) -> tokens; (agent, provider)
    # -> cost in pico-units; (agent, limit) -> turns refused, turns ended; (agent, provider)
    # -> steps it failed in, the chain's next provider answering.
    tokens: Callable[[], Mapping[tuple[str, str, str], int]] = _nothing
    cost: Callable[[], Mapping[tuple[str, str], int]] = _nothing
    budget_refusals: Callable[[], Mapping[tuple[str, str], int]] = _nothing
    budget_stops: Callable[[], Mapping[tuple[str, str], int]] = _nothing
    provider_failovers: Callable[[], Mapping[tuple[str, str], int]] = _nothing


class _Histogram:
    """Bucket counts and a sum, rendered cumulative (the `le` buckets) when scraped."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append((_le(bound), running))
        return out


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


@dataclass(frozen=True)
class MetricsListen:
    """Where the metrics listener serves and what it asks of a scraper: `listen` off when
    None; `token`, the bearer token a scrape must send (None: the variable is unset, and
    the listener refuses to serve)."""

    listen: str | None = None
    token: bytes | None = None
    bounds: HttpBounds = field(default_factory=HttpBounds)
    token_env: str | None = None  # only to name it in an error, never its value


def metrics_listen(
    listen: str | None, token_env: str | None, bounds: HttpBounds, env: Mapping[str, str]
) -> MetricsListen:
    value = env.get(token_env, "") if token_env is not None else ""
    return MetricsListen(listen, value.encode() or None, bounds, token_env)


@dataclass
class ListenerState:
    """The `/metrics` listener as configured, and whether it serves."""

    listen: str | None = None
    serving: bool = False
    port: int | None = None
    error: str | None = None
    failures: int = 0  # failed binds in a row


@dataclass
class _Counts:
    restarts: Counter[str] = field(default_factory=Counter)
    exits: Counter[tuple[str, str]] = field(default_factory=Counter)
    memory_ops: Counter[tuple[str, str]] = field(default_factory=Counter)
    turns: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    turn_seconds: dict[str, _Histogram] = field(default_factory=dict)
    invocations: Counter[tuple[str, str, str]] = field(default_factory=Counter)


class Metrics:
    """The daemon's metrics: fed events (`observe`, or `run` on the sink's subscription),
    reading `sources` when rendered."""

    def __init__(
        self,
        sources: MetricsSources | None = None,
        events: EventSink | None = None,
        *,
        process: bool = True,
    ) -> None:
        self.sources = sources or MetricsSources()
        self.counts = _Counts()
        self.listener = ListenerState()
        self._listener_changed = trio.Event()
        # Subscribed now, not when `run` starts: no event published in between is missed.
        self._subscription: Subscription | None = (
            events.subscribe(EVENT_BUFFER) if events is not None else None
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        if process:  # the daemon's own CPU, memory and file descriptors, read from /proc
            ProcessCollector(registry=self.registry)

    # --- events ------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        c = self.counts
        if isinstance(event, AgentTransition):
            if event.from_state == "backoff" and event.to_state == "starting":
                c.restarts[agent_label(event.alias)] += 1
        elif isinstance(event, AgentExited):
            c.exits[(agent_label(event.alias), event.cause)] += 1
        elif isinstance(event, MemoryOperation):
            c.memory_ops[(event.op, "ok" if event.ok else event.code or "error")] += 1
        elif isinstance(event, TurnFinished):
            agent = agent_label(event.agent)
            c.turns[(agent, event.channel, event.outcome)] += 1
            histogram = c.turn_seconds.get(agent)
            if histogram is None:
                histogram = c.turn_seconds[agent] = _Histogram(TURN_BUCKETS)
            histogram.observe(event.duration_secs)
        elif isinstance(event, InvocationFinished):
            c.invocations[(event.agent_id, event.state, event.code)] += 1

    async def run(self) -> None:
        """Count the sink's events until cancelled (a task in the daemon's nursery)."""
        if self._subscription is None:
            return
        with self._subscription as events:
            async for published in events:
                self.observe(published.event)

    @property
    def events_lost(self) -> int:
        return self._subscription.lost if self._subscription is not None else 0

    # --- the text format ---------------------------------------------------------------

    def render(self) -> bytes:
        """Every series in the Prometheus text format (what `/metrics` answers)."""
        return generate_latest(self.registry)

    # --- the listener ------------------------------------------------------------------

    async def wait_listener(self, predicate: Callable[[ListenerState], bool]) -> ListenerState:
        """Wait until the listener's state satisfies `predicate` (it changes as it binds,
        fails, serves or moves)."""
        while not predicate(self.listener):
            await self._listener_changed.wait()
        return self.listener

    def _note_listener(self) -> None:
        self._listener_changed.set()
        self._listener_changed = trio.Event()

    async def keep_listener(
        self,
        listen_of: Callable[[], MetricsListen],
        events: EventSink,
        *,
        retry_initial: float = RETRY_INITIAL_SECS,
        retry_max: float = RETRY_MAX_SECS,
    ) -> None:
        """Serve `/metrics` as `listen_of()` says (the running config's `metrics_listen`,
        its token and limits), and move the listener when a reload changes it."""
        with events.subscribe(kinds=(ReloadApplied,)) as reloads:
            async with trio.open_nursery() as nursery:
                listen = listen_of()
                scope = self._start(nursery, listen, retry_initial, retry_max)
                async for published in reloads:
                    if isinstance(published.event, ReloadApplied) and listen_of() != listen:
                        scope.cancel()
                        listen = listen_of()
                        log.info("metrics listener: %s after a reload", listen.listen or "off")
                        scope = self._start(nursery, listen, retry_initial, retry_max)

    def _start(
        self, nursery: trio.Nursery, listen: MetricsListen, initial: float, ceiling: float
    ) -> trio.CancelScope:
        scope = trio.CancelScope()
        self.listener = ListenerState(listen.listen)
        self._note_listener()
        nursery.start_soon(self._listen, scope, self.listener, listen, initial, ceiling)
        return scope

    async def _listen(
        self,
        scope: trio.CancelScope,
        state: ListenerState,
        settings: MetricsListen,
        initial: float,
        ceiling: float,
    ) -> None:
        with scope:
            if state.listen is None:
                return
            if settings.token is None:
                # Never served without its credential: the metrics name every agent.
                state.error = f"its token variable {settings.token_env} is not set"
                log.error("metrics listener %s not served: %s", state.listen, state.error)
                self._note_listener()
                return
            while True:
                try:
                    sock = bind_listener(state.listen)
                except OSError as exc:
                    state.failures += 1
                    state.error = f"cannot bind {state.listen}: {exc.strerror or exc}"
                    delay = min(initial * 2 ** min(state.failures - 1, 32), ceiling)
                    log.error("metrics listener %s; next try in %gs", state.error, delay)
                    self._note_listener()
                    await trio.sleep(delay)
                    continue
                state.port = sock.getsockname()[1]
                try:
                    async with trio.open_nursery() as nursery:
                        await nursery.start(
                            partial(
                                serve_metrics,
                                self,
                                sock,
                                token=settings.token,
                                bounds=settings.bounds,
                            )
                        )
                        state.serving, state.failures, state.error = True, 0, None
                        self._note_listener()
                        log.info("metrics served on http://%s/metrics", state.listen)
                except Exception as exc:  # the listener's own failure, never the daemon's
                    log.exception("metrics listener on %s failed", state.listen)
                    state.failures += 1
                    state.error = f"failed: {exc}"
                    self._note_listener()
                    await trio.sleep(min(initial * 2 ** min(state.failures - 1, 32), ceiling))
                    continue
                finally:
                    state.serving = False
                    self._note_listener()
                return


async def serve_metrics(
    metrics: Metrics,
    sock: socket.socket,
    *,
    token: bytes,
    bounds: HttpBounds | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `GET /metrics` on a bound, listening socket until cancelled, to a request that
    carries `Authorization: Bearer <token>`; 401 without it, 404 elsewhere."""

    async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        extra: list[tuple[bytes, bytes]] = []
        if not check_bearer(scope["headers"], token):
            status, body, content_type = 401, b"unauthorized: send the bearer token\n", "text/plain"
            extra = [(b"www-authenticate", b'Bearer realm="zeroclaw metrics"')]
        elif scope["path"] == "/metrics" and scope["method"] in ("GET", "HEAD"):
            # Rendered here, in the daemon's trio thread: the collector reads live state
            # that only this thread changes.
            status, body, content_type = 200, metrics.render(), CONTENT_TYPE_LATEST
        else:
            status, body, content_type = 404, b"not found: try GET /metrics\n", "text/plain"
        headers = [
            *extra,
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        payload = b"" if scope["method"] == "HEAD" else body
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    await serve_guarded(
        app,
        sock,
        name="metrics",
        bounds=bounds or HttpBounds(),
        log_name="zeroclaw.metrics.http",
        task_status=task_status,
    )


def _counter(
    name: str, doc: str, labels: list[str], samples: Iterable[tuple[Sequence[str], float]]
) -> CounterMetricFamily:
    """A counter family with one sample per (label values, count), in the order given."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for values, n in samples:
        family.add_metric(list(values), n)
    return family


class _Collector:
    """Renders every zeroclaw series when the registry is scraped."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        m = self._metrics
        sections = (self._agents, self._router, self._memory, self._turns, self._usage, self._rest)
        for section in sections:
            try:
                yield from section(m)
            except Exception:  # one broken source must not take every other series away
                log.exception("metrics: %s failed", section.__name__)

    @staticmethod
    def _agents(m: Metrics) -> Iterator[Metric]:
        states = m.sources.agent_states()
        agents = GaugeMetricFamily(
            "zeroclaw_agents", "Configured agents by lifecycle state.", labels=["state"]
        )
        for state in (*AGENT_STATES, *sorted(set(states) - set(AGENT_STATES))):
            agents.add_metric([state], states.get(state, 0))
        yield agents
        yield _counter(
            "zeroclaw_agent_restarts",
            "Automatic restarts of an agent (backoff to starting).",
            ["alias"],
            (((alias,), n) for alias, n in sorted(m.counts.restarts.items())),
        )
        yield _counter(
            "zeroclaw_agent_exits",
            "Agent process exits by cause: stopped, signal, config, spawn_failed, exit_status.",
            ["alias", "cause"],
            sorted(m.counts.exits.items()),
        )

    @staticmethod
    def _router(m: Metrics) -> Iterator[Metric]:
        stats = m.sources.router()
        if stats is None:
            return
        yield _counter(
            "zeroclaw_router_messages",
            "Messages through the router by outcome: delivered, or the refusal code.",
            ["outcome"],
            (((outcome,), n) for outcome, n in stats.outcomes.items()),
        )
        refused = msgspec.structs.asdict(stats.refused_connections)
        yield _counter(
            "zeroclaw_router_rejected_connections",
            "Connections the router refused, by reason.",
            ["reason"],
            (((reason,), n) for reason, n in refused.items()),
        )
        yield GaugeMetricFamily(
            "zeroclaw_router_in_flight",
            "Messages delivered and not acknowledged yet.",
            value=stats.in_flight,
        )

    @staticmethod
    def _memory(m: Metrics) -> Iterator[Metric]:
        yield _counter(
            "zeroclaw_memory_operations",
            "Memory operations by op and outcome (ok, or the error code).",
            ["op", "outcome"],
            sorted(m.counts.memory_ops.items()),
        )
        sizes = m.sources.memory_batches()
        histogram = _Histogram(BATCH_BUCKETS)
        for size, n in sizes.items():
            histogram.counts[bisect.bisect_left(histogram.bounds, size)] += n
            histogram.sum += size * n
        yield HistogramMetricFamily(
            "zeroclaw_memory_commit_batch_size",
            "Writes per memory commit (one LMDB transaction each).",
            buckets=histogram.buckets(),
            sum_value=histogram.sum,
        )
        yield CounterMetricFamily(
            "zeroclaw_memory_map_growths",
            "Times the memory database's map was grown.",
            value=m.sources.memory_growths(),
        )
        yield _counter(
            "zeroclaw_memory_quota_refusals",
            "Memory writes refused quota_exceeded, by agent and quota (ADR 0046).",
            ["agent", "quota"],
            sorted(m.sources.memory_quota_refusals().items()),
        )
        yield _counter(
            "zeroclaw_memory_transcript_turns_dropped",
            "Oldest session turns dropped to keep transcripts within their caps, by agent.",
            ["agent"],
            sorted(((agent,), n) for agent, n in m.sources.memory_turns_dropped().items()),
        )

    @staticmethod
    def _turns(m: Metrics) -> Iterator[Metric]:
        yield _counter(
            "zeroclaw_turns",
            "Finished conversation turns by agent, channel and outcome.",
            ["agent", "channel", "outcome"],
            sorted(m.counts.turns.items()),
        )
        seconds = HistogramMetricFamily(
            "zeroclaw_turn_duration_seconds",
            "Seconds from a turn's opening to its end, by agent.",
            labels=["agent"],
        )
        for agent, histogram in sorted(m.counts.turn_seconds.items()):
            seconds.add_metric([agent], histogram.buckets(), histogram.sum)
        yield seconds

    @staticmethod
    def _usage(m: Metrics) -> Iterator[Metric]:
        yield _counter(
            "zeroclaw_tokens",
            "Tokens the agents' provider steps used, by agent, the provider that answered, and "
            "kind (input, cached_input, cache_write, output: disjoint, they add up).",
            ["agent", "provider", "kind"],
            sorted(m.sources.tokens().items()),
        )
        yield _counter(
            "zeroclaw_cost",
            "What the agents' provider steps cost at the config's prices, by agent and provider "
            "(in the prices' currency).",
            ["agent", "provider"],
            ((key, pico / PICO) for key, pico in sorted(m.sources.cost().items())),
        )
        yield _counter(
            "zeroclaw_budget_refusals",
            "Turns refused budget_exceeded before any provider call, by agent and limit.",
            ["agent", "limit"],
            sorted(m.sources.budget_refusals().items()),
        )
        yield _counter(
            "zeroclaw_budget_stops",
            "Turns a budget ended after their current step, by agent and limit.",
            ["agent", "limit"],
            sorted(m.sources.budget_stops().items()),
        )
        yield _counter(
            "zeroclaw_provider_failovers",
            "Steps a provider of a fallback chain failed (a connection error, timeout, 429 or "
            "5xx) and the next one was asked, by agent and the provider that failed.",
            ["agent", "provider"],
            sorted(m.sources.provider_failovers().items()),
        )

    @staticmethod
    def _rest(m: Metrics) -> Iterator[Metric]:
        delivered = sorted(m.sources.channels_delivered().items())
        yield _counter(
            "zeroclaw_channel_messages",
            "Inbound channel messages by outcome: delivered, or the rule that refused them.",
            ["channel", "outcome"],
            [
                *(((channel, "delivered"), n) for channel, n in delivered),
                *sorted(m.sources.channels_refused().items()),
            ],
        )
        yield _counter(
            "zeroclaw_schedule_runs",
            "Scheduled runs by agent and outcome: fired, delivered, failed, skipped, missed.",
            ["agent", "outcome"],
            sorted(m.sources.schedule_runs().items()),
        )
        scheduled = GaugeMetricFamily(
            "zeroclaw_schedules",
            "Schedules by agent: configured, heartbeats and the agent's own reminders.",
            labels=["agent"],
        )
        for agent, n in sorted(m.sources.schedules().items()):
            scheduled.add_metric([agent], n)
        yield scheduled
        yield _counter(
            "zeroclaw_subagent_invocations",
            "Sub-agent invocations by terminal state and error code ('' when none).",
            ["agent_id", "state", "code"],
            sorted(m.counts.invocations.items()),
        )
        yield CounterMetricFamily(
            "zeroclaw_metrics_events_lost",
            "Daemon events the metrics did not count because they came faster than read.",
            value=m.events_lost,
        )
        book = sorted(LISTENERS.snapshot().items())
        yield _counter(
            "zeroclaw_http_connections_cut",
            "Connections an HTTP listener closed: over its cap, descriptors low (the reserve "
            "kept for the control socket), or a client too slow (idle, headers, body).",
            ["listener", "reason"],
            [((name, cut), counts.cut[cut]) for name, counts in book for cut in CUTS],
        )
        connections = GaugeMetricFamily(
            "zeroclaw_http_connections_open",
            "Connections each HTTP listener serves now.",
            labels=["listener"],
        )
        for name, counts in book:
            connections.add_metric([name], counts.open)
        yield connections
        listener = m.listener
        if listener.listen is not None:
            up = GaugeMetricFamily(
                "zeroclaw_metrics_listener_up",
                "1 when the metrics_listen HTTP listener serves, 0 when it cannot bind.",
                labels=["listen"],
            )
            up.add_metric([listener.listen], 1 if listener.serving else 0)
            yield up
