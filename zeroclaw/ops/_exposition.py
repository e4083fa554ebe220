"""The daemon's metrics as Prometheus series: one collector in a registry of our own (never
the library's global one), reading the components' counters and the event counts when
scraped. Loaded at the first scrape, not with the daemon (ADR 0067)."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Iterator, Sequence

import msgspec
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector

from .._http_guard import CUTS
from .._listeners import LISTENERS
from ._metrics import AGENT_STATES, BATCH_BUCKETS, PICO, Metrics, _Histogram

log = logging.getLogger("zeroclaw.metrics")


def metrics_registry(metrics: Metrics, *, process: bool) -> CollectorRegistry:
    """A registry of our own that renders `metrics` (and, with `process`, this process's
    CPU, memory and descriptors, read from /proc)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(metrics))
    if process:
        ProcessCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


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
