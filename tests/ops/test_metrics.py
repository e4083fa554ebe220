"""Metrics fed events and counters, rendered and read back with prometheus_client's own
text parser; the `/metrics` listener on real sockets (a taken port, a reload moving it)."""

from __future__ import annotations

import signal
import socket

import httpx
import pytest
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import PATIENCE
from zeroclaw.bus import RefusalCode
from zeroclaw.control import RefusedConnections, RouterStats
from zeroclaw.conversations import AgentDown, TurnCancelled, TurnOverflow, TurnRefused
from zeroclaw.conversations._service import turn_outcome
from zeroclaw.events import (
    AgentExited,
    AgentTransition,
    EventSink,
    InvocationFinished,
    MemoryOperation,
    ReloadApplied,
    TurnFinished,
)
from zeroclaw.ops import Metrics, MetricsListen, MetricsSources
from zeroclaw.ops._metrics import AGENT_STATES, agent_label
from zeroclaw.supervisor._lifecycle import (
    EX_CONFIG,
    SPAWN_FAILED,
    ExitStatus,
    State,
    Transition,
    exit_cause,
)
from zeroclaw.turns import TurnDone

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a text exposition, by name and labels."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(parsed: Samples, name: str, **labels: str) -> float | None:
    return parsed.get((name, frozenset(labels.items())))


def scrape(metrics: Metrics) -> Samples:
    return samples(metrics.render().decode())


def test_events_become_counters_and_a_turn_histogram() -> None:
    metrics = Metrics(process=False)
    for event in (
        AgentTransition("alpha", "running", "backoff", "run of 0.1s was a failure"),
        AgentExited("alpha", "signal", "killed by SIGKILL"),
        AgentTransition("alpha", "backoff", "starting", "start"),
        AgentTransition("alpha", "starting", "running", "agent is ready"),
        AgentTransition("beta", "stopped", "starting", "operator start"),  # not a restart
        MemoryOperation("alpha", "store"),
        MemoryOperation("alpha", "store"),
        MemoryOperation("operator", "get", ok=False, code="unknown_agent"),
        TurnFinished("alpha", "cli.local", "ok", 0.3),
        TurnFinished("alpha", "cli.local", "refused", 0.001),
        TurnFinished("sub:summarizer@0123456789ab", "subagent", "ok", 2.0),
        InvocationFinished("summarizer", "succeeded"),
        InvocationFinished("summarizer", "failed", "subagent_timed_out"),
    ):
        metrics.observe(event)
    parsed = scrape(metrics)
    assert value(parsed, "zeroclaw_agent_restarts_total", alias="alpha") == 1
    assert value(parsed, "zeroclaw_agent_restarts_total", alias="beta") is None
    assert value(parsed, "zeroclaw_agent_exits_total", alias="alpha", cause="signal") == 1
    assert value(parsed, "zeroclaw_memory_operations_total", op="store", outcome="ok") == 2
    assert value(parsed, "zeroclaw_memory_operations_total", op="get", outcome="unknown_agent") == 1
    turns = "zeroclaw_turns_total"
    assert value(parsed, turns, agent="alpha", channel="cli.local", outcome="ok") == 1
    assert value(parsed, turns, agent="alpha", channel="cli.local", outcome="refused") == 1
    # A runtime's revision digest is not a label: a new revision is not a new series.
    assert value(parsed, turns, agent="sub:summarizer", channel="subagent", outcome="ok") == 1
    seconds = "zeroclaw_turn_duration_seconds"
    assert value(parsed, f"{seconds}_count", agent="alpha") == 2
    assert value(parsed, f"{seconds}_sum", agent="alpha") == pytest.approx(0.301)
    assert value(parsed, f"{seconds}_bucket", agent="alpha", le="0.05") == 1
    assert value(parsed, f"{seconds}_bucket", agent="alpha", le="0.25") == 1
    assert value(parsed, f"{seconds}_bucket", agent="alpha", le="0.5") == 2
    assert value(parsed, f"{seconds}_bucket", agent="alpha", le="+Inf") == 2
    invocations = "zeroclaw_subagent_invocations_total"
    assert value(parsed, invocations, agent_id="summarizer", state="succeeded", code="") == 1
    assert (
        value(parsed, invocations, agent_id="summarizer", state="failed", code="subagent_timed_out")
        == 1
    )


def test_scraped_sources_are_read_at_each_render() -> None:
    states: dict[str, int] = {"running": 2}
    router = RouterStats(
        endpoint="ipc:///tmp/bus",
        server_public_key="k",
        connected=[],
        in_flight=3,
        open_questions=0,
        parked=0,
        outcomes={"delivered": 5, "not_peers": 2},
        refused_connections=RefusedConnections(zap_denied=1, handshake_failed=0),
        other={},
        at=0.0,
    )
    batches: dict[int, int] = {1: 3, 5: 1}
    metrics = Metrics(
        MetricsSources(
            agent_states=lambda: states,
            router=lambda: router,
            channels_delivered=lambda: {"webhook.ops": 4},
            channels_refused=lambda: {("webhook.ops", "sender_not_accepted"): 2},
            memory_batches=lambda: batches,
            memory_growths=lambda: 1,
        ),
        process=False,
    )
    parsed = scrape(metrics)
    # Every lifecycle state is a series, 0 when no agent is in it.
    assert {s: value(parsed, "zeroclaw_agents", state=s) for s in AGENT_STATES} == {
        "stopped": 0,
        "starting": 0,
        "running": 2,
        "backoff": 0,
        "fatal": 0,
        "stopping": 0,
    }
    assert value(parsed, "zeroclaw_router_messages_total", outcome="not_peers") == 2
    assert value(parsed, "zeroclaw_router_messages_total", outcome="delivered") == 5
    assert value(parsed, "zeroclaw_router_rejected_connections_total", reason="zap_denied") == 1
    assert value(parsed, "zeroclaw_router_in_flight") == 3
    channel = "zeroclaw_channel_messages_total"
    assert value(parsed, channel, channel="webhook.ops", outcome="delivered") == 4
    assert value(parsed, channel, channel="webhook.ops", outcome="sender_not_accepted") == 2
    batch = "zeroclaw_memory_commit_batch_size"
    assert value(parsed, f"{batch}_bucket", le="1.0") == 3
    assert value(parsed, f"{batch}_bucket", le="4.0") == 3
    assert value(parsed, f"{batch}_bucket", le="8.0") == 4
    assert value(parsed, f"{batch}_count") == 4
    assert value(parsed, f"{batch}_sum") == 8
    assert value(parsed, "zeroclaw_memory_map_growths_total") == 1
    states["running"], states["fatal"] = 1, 1
    router.outcomes["not_peers"] = 7
    parsed = scrape(metrics)
    assert value(parsed, "zeroclaw_agents", state="fatal") == 1
    assert value(parsed, "zeroclaw_router_messages_total", outcome="not_peers") == 7


def test_a_broken_source_loses_only_its_own_series() -> None:
    def broken() -> RouterStats:
        raise RuntimeError("router gone")

    metrics = Metrics(MetricsSources(router=broken, agent_states=lambda: {"running": 1}))
    parsed = scrape(metrics)
    assert value(parsed, "zeroclaw_agents", state="running") == 1
    assert not any(name.startswith("zeroclaw_router") for name, _ in parsed)
    assert any(name.startswith("process_") for name, _ in parsed)  # the daemon's own


def test_own_registry_not_the_global_one() -> None:
    from prometheus_client import REGISTRY

    metrics = Metrics(process=False)
    assert metrics.registry is not REGISTRY
    assert REGISTRY.get_sample_value("zeroclaw_metrics_events_lost_total") is None


async def test_run_counts_what_the_sink_publishes_and_what_it_lost() -> None:
    sink = EventSink()
    metrics = Metrics(events=sink, process=False)
    # Published before the task runs: held by the subscription made at construction.
    sink.publish(AgentExited("alpha", "stopped", "exit code 0"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(metrics.run)
        await trio.testing.wait_all_tasks_blocked()
        sink.publish(AgentExited("alpha", "exit_status", "exit code 1"))
        await trio.testing.wait_all_tasks_blocked()
        parsed = scrape(metrics)
        exits = "zeroclaw_agent_exits_total"
        assert value(parsed, exits, alias="alpha", cause="stopped") == 1
        assert value(parsed, exits, alias="alpha", cause="exit_status") == 1
        nursery.cancel_scope.cancel()
    flooded = Metrics(events=sink, process=False)
    for _ in range(5000):  # more than the subscription holds, while nobody reads
        sink.publish(MemoryOperation("alpha", "get"))
    assert value(scrape(flooded), "zeroclaw_metrics_events_lost_total") == 5000 - 4096


@pytest.mark.parametrize(
    ("old", "new", "exit", "cause"),
    [
        (State.STOPPING, State.STOPPED, ExitStatus(code=0), "stopped"),
        (State.STOPPING, State.STOPPED, ExitStatus(signal=signal.SIGKILL), "stopped"),
        (State.RUNNING, State.BACKOFF, ExitStatus(signal=signal.SIGKILL), "signal"),
        (State.RUNNING, State.BACKOFF, ExitStatus(code=1), "exit_status"),
        (State.RUNNING, State.BACKOFF, ExitStatus(code=0), "exit_status"),
        (State.STARTING, State.FATAL, ExitStatus(code=EX_CONFIG), "config"),
        (State.STARTING, State.BACKOFF, SPAWN_FAILED, "spawn_failed"),
    ],
)
def test_exit_cause_is_a_small_fixed_set(
    old: State, new: State, exit: ExitStatus, cause: str
) -> None:
    assert exit_cause(Transition("a", old, new, "why", exit=exit)) == cause


def test_a_transition_without_an_exit_has_no_cause() -> None:
    assert exit_cause(Transition("a", State.STARTING, State.RUNNING, "ready")) is None


def test_turn_outcomes() -> None:
    refused: RefusalCode = "not_peers"
    assert turn_outcome(TurnDone("hi")) == "ok"
    assert turn_outcome(TurnDone("", error="provider down")) == "error"
    assert turn_outcome(TurnDone("", cancelled=True)) == "cancelled"
    assert turn_outcome(TurnRefused(refused, "no")) == "refused"
    assert turn_outcome(AgentDown()) == "agent_down"
    assert turn_outcome(TurnOverflow(10)) == "overflow"
    assert turn_outcome(TurnCancelled()) == "cancelled"


def test_agent_label_drops_a_runtimes_digest_only() -> None:
    assert agent_label("sub:summarizer@0123456789ab") == "sub:summarizer"
    assert agent_label("alpha") == "alpha"


# --- the listener ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


TOKEN = b"scrape-token-for-tests"
AUTH = {"authorization": f"Bearer {TOKEN.decode()}"}


def on(listen: str | None) -> MetricsListen:
    """The listener's settings for `listen`, with the test's token."""
    return MetricsListen(listen, TOKEN)


async def wait_serving(metrics: Metrics) -> None:
    await metrics.wait_listener(lambda state: state.serving)


async def test_listener_serves_metrics_and_404_elsewhere() -> None:
    sink = EventSink()
    metrics = Metrics(MetricsSources(agent_states=lambda: {"running": 1}), sink)
    port = free_port()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(metrics.keep_listener, lambda: on(f"127.0.0.1:{port}"), sink)
        with trio.fail_after(PATIENCE):
            await wait_serving(metrics)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=AUTH) as http:
            response = await http.get("/metrics")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain; version=")
            parsed = samples(response.text)
            assert value(parsed, "zeroclaw_agents", state="running") == 1
            assert value(parsed, "zeroclaw_metrics_listener_up", listen=f"127.0.0.1:{port}") == 1
            assert (await http.get("/")).status_code == 404
            assert (await http.post("/metrics")).status_code == 404
            assert (await http.get("/metrics/x")).status_code == 404
        nursery.cancel_scope.cancel()


async def test_a_taken_port_is_reported_and_retried_not_fatal() -> None:
    sink = EventSink()
    metrics = Metrics(events=sink, process=False)
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    listen = f"127.0.0.1:{holder.getsockname()[1]}"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: metrics.keep_listener(
                lambda: on(listen), sink, retry_initial=0.05, retry_max=0.1
            )
        )
        with trio.fail_after(PATIENCE):
            await metrics.wait_listener(lambda state: state.failures > 0)
        assert metrics.listener.error is not None and "cannot bind" in metrics.listener.error
        assert value(scrape(metrics), "zeroclaw_metrics_listener_up", listen=listen) == 0
        holder.close()  # the port comes free: the next try takes it
        with trio.fail_after(PATIENCE):
            await wait_serving(metrics)
        assert value(scrape(metrics), "zeroclaw_metrics_listener_up", listen=listen) == 1
        nursery.cancel_scope.cancel()


async def test_a_reload_that_changes_metrics_listen_moves_the_listener() -> None:
    sink = EventSink()
    metrics = Metrics(events=sink, process=False)
    first, second = free_port(), free_port()
    current: list[str | None] = [f"127.0.0.1:{first}"]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(metrics.keep_listener, lambda: on(current[0]), sink)
        with trio.fail_after(PATIENCE):
            await wait_serving(metrics)
        sink.publish(ReloadApplied("ok"))  # nothing changed: the listener stays
        await trio.testing.wait_all_tasks_blocked()
        assert metrics.listener.port == first and metrics.listener.serving
        current[0] = f"127.0.0.1:{second}"
        sink.publish(ReloadApplied("ok"))
        with trio.fail_after(PATIENCE):
            await metrics.wait_listener(lambda state: state.port == second and state.serving)
        async with httpx.AsyncClient(headers=AUTH) as http:
            assert (await http.get(f"http://127.0.0.1:{second}/metrics")).status_code == 200
            with pytest.raises(httpx.ConnectError):
                await http.get(f"http://127.0.0.1:{first}/metrics")
        current[0] = None  # unset: no listener, and no listener series
        sink.publish(ReloadApplied("ok"))
        with trio.fail_after(PATIENCE):
            await metrics.wait_listener(lambda state: state.listen is None)
        assert not any(n == "zeroclaw_metrics_listener_up" for n, _ in scrape(metrics))
        nursery.cancel_scope.cancel()


async def test_a_scrape_without_the_bearer_token_gets_401_and_no_metrics() -> None:
    sink = EventSink()
    metrics = Metrics(MetricsSources(agent_states=lambda: {"running": 1}), sink, process=False)
    port = free_port()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(metrics.keep_listener, lambda: on(f"127.0.0.1:{port}"), sink)
        with trio.fail_after(PATIENCE):
            await wait_serving(metrics)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for headers in (
                {},
                {"authorization": "Bearer wrong"},
                {"authorization": f"Basic {TOKEN.decode()}"},
                {"authorization": f"Bearer {TOKEN.decode()}x"},
            ):
                refused = await http.get("/metrics", headers=headers)
                assert refused.status_code == 401, headers
                assert "zeroclaw_agents" not in refused.text
                assert refused.headers["www-authenticate"].startswith("Bearer")
            # Not even the shape of the listener leaks: 401 before 404.
            assert (await http.get("/nowhere")).status_code == 401
            ok = await http.get("/metrics", headers={"authorization": f"bearer {TOKEN.decode()}"})
            assert ok.status_code == 200 and "zeroclaw_agents" in ok.text
        nursery.cancel_scope.cancel()


async def test_a_metrics_listener_whose_token_variable_is_unset_is_not_served() -> None:
    sink = EventSink()
    metrics = Metrics(events=sink, process=False)
    port = free_port()
    settings = MetricsListen(f"127.0.0.1:{port}", None, token_env="ZC_METRICS_TOKEN")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(metrics.keep_listener, lambda: settings, sink)
        with trio.fail_after(PATIENCE):
            state = await metrics.wait_listener(lambda s: s.error is not None)
        assert "ZC_METRICS_TOKEN" in (state.error or "") and not state.serving
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient() as http:
                await http.get(f"http://127.0.0.1:{port}/metrics")
        nursery.cancel_scope.cancel()
