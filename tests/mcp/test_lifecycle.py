"""The pure lifecycle of one MCP server: every state against every event."""

from __future__ import annotations

import itertools

import pytest

from zeroclaw.mcp import Lifecycle, LifecycleError
from zeroclaw.mcp._lifecycle import Event, Exited, Ready, Report, Sleep, Spawn, Start, Stop, Woke

EVENTS: tuple[Event, ...] = (Start(), Ready(7), Exited("died"), Woke(), Stop())


def in_state(state: str, **kwargs: float) -> Lifecycle:
    life = Lifecycle("time", **kwargs)  # type: ignore[arg-type]
    path = {
        "idle": [],
        "starting": [Start()],
        "ready": [Start(), Ready(7)],
        "restarting": [Start(), Exited("died")],
        "failed": [Start(), *[Exited("died"), Woke()] * 4, Exited("died")],
        "stopped": [Stop()],
    }[state]
    for event in path:
        life.handle(event)
    assert life.state == state
    return life


def statuses(actions: tuple[object, ...]) -> list[str]:
    return [a.state.status for a in actions if isinstance(a, Report)]


# What each (state, event) leads to; absent pairs are LifecycleError.
EXPECTED = {
    ("idle", "Start"): "starting",
    ("starting", "Ready"): "ready",
    ("starting", "Exited"): "restarting",
    ("ready", "Exited"): "restarting",
    ("restarting", "Woke"): "starting",
}


@pytest.mark.parametrize(
    ("state", "event"),
    list(itertools.product(["idle", "starting", "ready", "restarting", "failed"], EVENTS)),
)
def test_every_state_answers_every_event_or_says_it_is_a_bug(state: str, event: Event) -> None:
    life = in_state(state)
    name = type(event).__name__
    if isinstance(event, Stop):
        assert statuses(life.handle(event)) == ["stopped"]
        assert life.state == "stopped"
    elif (state, name) in EXPECTED:
        actions = life.handle(event)
        assert life.state == EXPECTED[(state, name)]
        assert statuses(actions) == [EXPECTED[(state, name)]]
    else:
        with pytest.raises(LifecycleError):
            life.handle(event)


@pytest.mark.parametrize("event", EVENTS)
def test_stopped_absorbs_every_event(event: Event) -> None:
    life = in_state("stopped")
    assert life.handle(event) == ()
    assert life.state == "stopped"


def test_a_start_spawns_and_reports_starting() -> None:
    life = Lifecycle("time")
    actions = life.handle(Start())
    assert Spawn(1) in actions and statuses(actions) == ["starting"]


def test_ready_reports_the_pid_and_resets_the_failure_count() -> None:
    life = in_state("restarting")
    life.handle(Woke())
    actions = life.handle(Ready(42))
    report = next(a for a in actions if isinstance(a, Report))
    assert (report.state.status, report.state.pid, report.state.restarts) == ("ready", 42, 1)
    assert life.failures == 0


def test_the_backoff_doubles_and_is_bounded() -> None:
    life = Lifecycle("time", base_secs=1.0, max_secs=5.0, max_attempts=100)
    life.handle(Start())
    sleeps = []
    for _ in range(6):
        actions = life.handle(Exited("died"))
        sleeps += [a.secs for a in actions if isinstance(a, Sleep)]
        spawn = life.handle(Woke())
        assert any(isinstance(a, Spawn) for a in spawn)
    assert sleeps == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_a_server_that_never_gets_ready_fails_for_good_after_max_attempts() -> None:
    life = Lifecycle("time", max_attempts=3)
    life.handle(Start())
    life.handle(Exited("no such program"))
    life.handle(Woke())
    life.handle(Exited("no such program"))
    life.handle(Woke())
    actions = life.handle(Exited("no such program"))
    assert life.state == "failed"
    report = actions[0]
    assert isinstance(report, Report)
    assert (report.state.status, report.state.detail, report.state.restarts) == (
        "failed",
        "no such program",
        2,
    )
    assert not any(isinstance(a, Spawn | Sleep) for a in actions)


def test_a_server_that_was_ready_gets_its_attempts_back() -> None:
    life = Lifecycle("time", max_attempts=2)
    life.handle(Start())
    for _ in range(5):  # ready, dies, restarts: never "failed"
        life.handle(Ready(1))
        life.handle(Exited("died"))
        assert life.state == "restarting"
        life.handle(Woke())
