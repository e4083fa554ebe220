"""The Lifecycle's event layer: commands, process reports and deadlines in, actions out.

Every timer is the machine's own deadline, so each scenario runs on a fake clock: the test
asks `next_deadline()`, jumps the clock there, and feeds `on_deadline(now)`, exactly as the
runner does with its inbox.
"""

from __future__ import annotations

import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.config import RestartPolicy
from zeroclaw.supervisor._lifecycle import (
    EX_CONFIG,
    Action,
    ExitStatus,
    Lifecycle,
    Removed,
    SignalGroup,
    StartProcess,
    State,
    Timers,
    Transition,
)

CRASH = ExitStatus(code=1)
TERMED = ExitStatus(signal=signal.SIGTERM)


def machine(idle: float | None = None, grace: float = 2.0, start_timeout: float = 5.0) -> Lifecycle:
    policy = RestartPolicy(
        max_restarts=3,
        window_secs=60,
        backoff_initial_secs=1,
        backoff_max_secs=8,
        stable_after_secs=10,
    )
    return Lifecycle("a", policy, Timers(grace, start_timeout, idle))


def kinds(actions: list[Action]) -> list[str]:
    out = []
    for action in actions:
        if isinstance(action, Transition):
            out.append(f"{action.old}->{action.new}")
        elif isinstance(action, SignalGroup):
            out.append(signal.Signals(action.signum).name)
        else:
            out.append(type(action).__name__)
    return out


def running(lc: Lifecycle, now: float = 0.0, pid: int = 100) -> None:
    assert StartProcess() in lc.command(now, "start")
    lc.process_spawned(now, pid)
    lc.process_ready(now, pid)
    assert lc.state == State.RUNNING


def test_start_command_asks_for_a_process_and_ready_runs_it() -> None:
    lc = machine()
    assert kinds(lc.command(0, "start")) == ["stopped->starting", "StartProcess"]
    assert lc.process_spawned(0.1, 7) == []
    assert lc.next_deadline() == pytest.approx(5.1)  # the start timeout
    assert kinds(lc.process_ready(0.2, 7)) == ["starting->running"]
    assert lc.next_deadline() == float("inf")  # an always agent: nothing to wait for


def test_a_start_that_never_gets_ready_is_killed_at_its_deadline() -> None:
    lc = machine()
    lc.command(0, "start")
    lc.process_spawned(0, 7)
    assert lc.on_deadline(4.9) == []  # early wake-ups change nothing
    assert kinds(lc.on_deadline(lc.next_deadline())) == ["SIGKILL"]
    assert kinds(lc.process_exited(5.1, 7, ExitStatus(signal=signal.SIGKILL))) == [
        "starting->backoff"
    ]


def test_stop_terms_then_kills_after_grace() -> None:
    lc = machine(grace=2)
    running(lc)
    assert kinds(lc.command(1, "stop")) == ["running->stopping", "SIGTERM"]
    assert lc.next_deadline() == 3
    assert lc.on_deadline(2.5) == []
    assert kinds(lc.on_deadline(3)) == ["SIGKILL"]
    assert lc.next_deadline() == float("inf")  # killed once; now the exit report decides
    assert kinds(lc.process_exited(3.1, 100, ExitStatus(signal=9))) == ["stopping->stopped"]


def test_restart_while_stopping_starts_again_once_stopped() -> None:
    lc = machine()
    running(lc)
    lc.command(1, "stop")
    assert lc.command(1.5, "restart") == []  # already on its way down
    actions = lc.process_exited(2, 100, TERMED)
    assert kinds(actions) == ["stopping->stopped", "stopped->starting", "StartProcess"]
    assert lc.restart_after_stop is False


def test_stop_after_restart_cancels_the_restart() -> None:
    lc = machine()
    running(lc)
    lc.command(1, "restart")
    lc.command(1.2, "stop")
    assert kinds(lc.process_exited(2, 100, TERMED)) == ["stopping->stopped"]


def test_remove_during_backoff_is_removed_at_once_and_never_restarts() -> None:
    lc = machine()
    running(lc)
    lc.process_exited(1, 100, CRASH)
    assert lc.state == State.BACKOFF
    assert kinds(lc.command(1.5, "remove")) == ["backoff->stopped", "Removed"]
    assert lc.next_deadline() == float("inf")
    assert lc.on_deadline(100) == []


def test_remove_while_running_is_removed_when_it_has_stopped() -> None:
    lc = machine()
    running(lc)
    assert Removed() not in lc.command(1, "remove")
    assert kinds(lc.process_exited(2, 100, TERMED)) == ["stopping->stopped", "Removed"]


def test_backoff_deadline_starts_again() -> None:
    lc = machine()
    running(lc)
    lc.process_exited(1, 100, CRASH)
    assert lc.next_deadline() == 2
    assert lc.on_deadline(1.99) == []
    assert kinds(lc.on_deadline(2)) == ["backoff->starting", "StartProcess"]


def test_an_idle_on_demand_agent_is_stopped_after_idle_stop_secs() -> None:
    lc = machine(idle=2)
    running(lc)
    assert lc.next_deadline() == 2
    assert kinds(lc.on_deadline(2)) == ["running->stopping", "SIGTERM"]


def test_traffic_pushes_the_idle_deadline_and_it_is_rechecked() -> None:
    lc = machine(idle=2)
    running(lc)
    lc.activity(1.5)  # a message went through the router
    assert lc.on_deadline(2) == []  # the old deadline passed, but the agent was not idle
    assert lc.next_deadline() == 3.5
    assert kinds(lc.on_deadline(3.5)) == ["running->stopping", "SIGTERM"]


def test_a_busy_agent_is_never_idle_stopped_mid_turn() -> None:
    """Defect: an on-demand agent was stopped idle_stop_secs after it started, mid-turn."""
    lc = machine(idle=2)
    running(lc)
    lc.activity(0.5, busy_turns=1)  # a 5 s turn starts
    assert lc.next_deadline() == float("inf")
    assert lc.on_deadline(2) == [] and lc.on_deadline(4) == []
    lc.activity(5.5, busy_turns=0)  # the turn finished
    assert lc.next_deadline() == 7.5
    assert lc.on_deadline(7) == []
    assert kinds(lc.on_deadline(7.5)) == ["running->stopping", "SIGTERM"]


def test_a_config_error_at_start_is_fatal_at_once_with_its_reason() -> None:
    """Defect: exit 78 (a provider key variable unset) went through 30 s of backoff."""
    lc = machine()
    lc.command(0, "start")
    lc.process_spawned(0, 7)
    actions = lc.process_exited(0.1, 7, ExitStatus(code=EX_CONFIG), "OPENAI_API_KEY is not set")
    assert kinds(actions) == ["starting->fatal"]
    assert lc.state == State.FATAL and lc.next_deadline() == float("inf")
    assert lc.last_error == "OPENAI_API_KEY is not set"
    assert "OPENAI_API_KEY is not set" in actions[0].reason  # type: ignore[union-attr]
    assert lc.command(1, "start") == []  # only an operator (or a reload) leaves fatal
    assert StartProcess() in lc.command(1, "start", operator=True)


def test_a_spawn_failure_is_judged_like_an_exit() -> None:
    lc = machine()
    lc.command(0, "start")
    actions = lc.spawn_failed(0.1, "fork failed")
    assert kinds(actions) == ["starting->backoff"]
    assert lc.last_error == "fork failed"


def test_reports_about_an_earlier_process_change_nothing() -> None:
    lc = machine()
    running(lc, pid=100)
    assert lc.process_exited(1, 99, CRASH) == []
    assert lc.process_ready(1, 99) == []
    assert lc.process_hung(1, 99) == []
    assert kinds(lc.process_hung(1, 100)) == ["SIGKILL"]
    assert lc.state == State.RUNNING


EVENTS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["start", "stop", "restart", "remove"]), st.booleans()),
        st.tuples(st.just("spawned"), st.just(False)),
        st.tuples(st.just("ready"), st.just(False)),
        st.tuples(st.sampled_from(["exit0", "crash", "config"]), st.just(False)),
        st.tuples(st.just("hung"), st.just(False)),
        st.tuples(st.just("busy"), st.booleans()),
        st.tuples(st.just("deadline"), st.just(False)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events=EVENTS, steps=st.lists(st.floats(0, 30), min_size=40, max_size=40))
def test_any_event_sequence_keeps_the_machine_consistent(
    events: list[tuple[str, bool]], steps: list[float]
) -> None:
    """Whatever arrives in whatever order: no exception, a live process only where one can
    be, a deadline for every timed state, and removal is final."""
    lc = machine(idle=2)
    now, pid, removed = 0.0, 0, False
    for (kind, flag), step in zip(events, steps, strict=False):
        now += step
        actions: list[Action] = []
        if kind in ("start", "stop", "restart", "remove"):
            if removed:
                continue
            actions = lc.command(now, kind, operator=flag)  # type: ignore[arg-type]
        elif kind == "spawned":
            if lc.state in (State.STARTING, State.STOPPING) and lc.pid is None:
                pid += 1
                actions = lc.process_spawned(now, pid)
        elif kind == "ready":
            actions = lc.process_ready(now, pid)
        elif kind in ("exit0", "crash", "config"):
            if lc.pid is not None:
                code = {"exit0": 0, "crash": 1, "config": EX_CONFIG}[kind]
                actions = lc.process_exited(now, lc.pid, ExitStatus(code=code))
        elif kind == "hung":
            actions = lc.process_hung(now, pid)
        elif kind == "busy":
            lc.activity(now, busy_turns=1 if flag else 0)
        else:
            now = max(now, min(lc.next_deadline(), now + 60))
            actions = lc.on_deadline(now)
        removed = removed or Removed() in actions
        if lc.state in (State.RUNNING,):
            assert lc.pid is not None
        if lc.state in (State.STOPPED, State.BACKOFF, State.FATAL):
            assert lc.pid is None
        if lc.state == State.BACKOFF:
            assert lc.next_deadline() == lc.next_start_at
        if lc.state == State.STOPPING and lc.kill_at is not None:
            assert lc.next_deadline() == lc.kill_at
        if removed:
            assert lc.state == State.STOPPED and StartProcess() not in actions
