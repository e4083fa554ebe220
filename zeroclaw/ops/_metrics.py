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
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

from .._http_guard import HttpBounds
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
        self._process = process  # the daemon's own CPU, memory and descriptors, from /proc
        self._registry: CollectorRegistry | None = None

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

    @property
    def registry(self) -> CollectorRegistry:
        """The Prometheus registry these metrics render through, made at the first scrape:
        the Prometheus client loads only when something asks (ADR 0067)."""
        if self._registry is None:
            from ._exposition import metrics_registry

            self._registry = metrics_registry(self, process=self._process)
        return self._registry

    def render(self) -> bytes:
        """Every series in the Prometheus text format (what `/metrics` answers)."""
        from ._exposition import render

        return render(self.registry)

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
            # The HTTP server loads only for a configured listener (ADR 0067).
            from .._asgi import bind_listener
            from ._metrics_http import serve_metrics

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
