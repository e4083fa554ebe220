"""The restart state machine, driven by a fake clock."""

from __future__ import annotations

import itertools
import signal

import pytest

from zeroclaw.config import RestartPolicy
from zeroclaw.supervisor._lifecycle import ExitStatus, InvalidTransition, Lifecycle, State

CRASH = ExitStatus(code=1)
KILLED = ExitStatus(signal=signal.SIGKILL)


def lifecycle(**policy: float) -> Lifecycle:
    defaults = {
        "max_restarts": 3,
        "window_secs": 60,
        "backoff_initial_secs": 1,
        "backoff_max_secs": 8,
        "stable_after_secs": 10,
    }
    return Lifecycle("a", RestartPolicy(**{**defaults, **policy}))  # type: ignore[arg-type]


def run_until_exit(lc: Lifecycle, now: float, run_for: float, status: ExitStatus = CRASH) -> float:
    """start → spawned → ready → exited after `run_for` seconds; returns the exit time."""
    if lc.state == State.BACKOFF:
        assert lc.due(now)
    lc.start(now)
    lc.spawned(now, pid=100)
    lc.ready(now)
    lc.exited(now + run_for, status)
    return now + run_for


def test_start_ready_running() -> None:
    lc = lifecycle()
    t = lc.start(0)
    assert (t.old, t.new) == (State.STOPPED, State.STARTING)
    lc.spawned(0.1, pid=42)
    t = lc.ready(0.2)
    assert (t.new, t.pid, lc.since) == (State.RUNNING, 42, 0.2)


def test_backoff_sequence_doubles_to_the_cap() -> None:
    lc = lifecycle(max_restarts=100, window_secs=10_000)
    delays = []
    now = 0.0
    for _ in range(7):
        now = run_until_exit(lc, now, run_for=0.5)
        assert lc.state == State.BACKOFF
        assert lc.next_start_at is not None
        delays.append(lc.next_start_at - now)
        now = lc.next_start_at
    assert delays == [1, 2, 4, 8, 8, 8, 8]
    assert lc.restarts == 6


def test_backoff_is_not_due_before_its_delay() -> None:
    lc = lifecycle()
    run_until_exit(lc, 0, run_for=1)
    assert not lc.due(1.99)
    assert lc.due(2.0)
    with pytest.raises(InvalidTransition):
        lc.ready(2.0)


def test_more_than_max_restarts_in_window_is_fatal() -> None:
    lc = lifecycle(max_restarts=3)
    now = 0.0
    for expected in (State.BACKOFF, State.BACKOFF, State.BACKOFF):
        now = run_until_exit(lc, now, run_for=0.1)
        assert lc.state == expected
        now = lc.next_start_at or now
    lc.start(now)
    lc.spawned(now, 1)
    t = lc.exited(now + 0.1, CRASH)
    assert t.new == State.FATAL
    assert t.failures_in_window == 4
    assert "max_restarts=3" in t.reason
    assert lc.pid is None and lc.last_exit == CRASH
    with pytest.raises(InvalidTransition):
        lc.start(now + 1000)  # no automatic way out of fatal


def test_failures_outside_the_window_are_forgotten() -> None:
    lc = lifecycle(max_restarts=2, window_secs=10, backoff_initial_secs=1, backoff_max_secs=1)
    now = 0.0
    for _ in range(20):  # one failure every 6 s: never more than 2 inside 10 s
        now = run_until_exit(lc, now, run_for=5)
        assert lc.state == State.BACKOFF, lc.failures_in_window(now)
        now += 1


def test_window_edge_counts_exactly() -> None:
    lc = lifecycle(max_restarts=1, window_secs=10, backoff_initial_secs=1, backoff_max_secs=1)
    run_until_exit(lc, 0, run_for=1)  # failure at t=1
    run_until_exit(lc, 10, run_for=1)  # failure at t=11: the first (t=1) left the window at 11
    assert lc.state == State.BACKOFF
    run_until_exit(lc, 12, run_for=1)  # t=13: failures at 11 and 13 → 2 > 1
    assert lc.state == State.FATAL


def test_stable_run_resets_backoff_and_is_not_a_failure() -> None:
    lc = lifecycle(max_restarts=100, window_secs=10_000)
    now = 0.0
    for _ in range(3):
        now = run_until_exit(lc, now, run_for=1)
        now = lc.next_start_at or now
    assert lc.backoff_delay() == 4
    before = lc.failures_in_window(now)
    now = run_until_exit(lc, now, run_for=10)  # exactly stable_after_secs: stable
    assert lc.state == State.BACKOFF
    assert lc.next_start_at == now + 1  # restart after the initial delay
    assert lc.failures_in_window(now) == before
    now = run_until_exit(lc, lc.next_start_at, run_for=1)
    assert lc.next_start_at == now + 1  # backoff starts over at the initial delay


def test_exit_before_ready_is_a_failure_even_if_slow() -> None:
    lc = lifecycle()
    lc.start(0)
    lc.spawned(0, 5)
    t = lc.exited(30, KILLED)
    assert t.new == State.BACKOFF and t.failures_in_window == 1
    assert "killed by SIGKILL" in t.exit.describe()  # type: ignore[union-attr]


def test_operator_restart_from_fatal_resets_counters() -> None:
    lc = lifecycle(max_restarts=0)
    run_until_exit(lc, 0, run_for=0.1)
    assert lc.state == State.FATAL
    t = lc.start(5, operator=True)
    assert (t.old, t.new) == (State.FATAL, State.STARTING)
    assert lc.failures_in_window(5) == 0 and lc.restarts == 0
    lc.spawned(5, 7)
    lc.ready(5)
    assert lc.state == State.RUNNING


def test_stop_while_running_goes_through_stopping() -> None:
    lc = lifecycle()
    lc.start(0)
    lc.spawned(0, 9)
    lc.ready(0)
    t = lc.stop(1)
    assert (t.old, t.new) == (State.RUNNING, State.STOPPING)
    assert lc.stop(1.5).reason == "already stopping"
    t = lc.exited(2, ExitStatus(signal=signal.SIGTERM))
    assert t.new == State.STOPPED
    assert lc.failures_in_window(2) == 0  # a requested stop is not a failure


def test_stop_from_backoff_or_fatal_is_immediate() -> None:
    for setup in ("backoff", "fatal"):
        lc = lifecycle(max_restarts=0 if setup == "fatal" else 5)
        run_until_exit(lc, 0, run_for=0.1)
        assert lc.state.value == setup
        t = lc.stop(1)
        assert t.new == State.STOPPED and lc.next_start_at is None


def test_stop_during_starting_before_spawn_is_immediate() -> None:
    lc = lifecycle()
    lc.start(0)
    assert lc.stop(0).new == State.STOPPED


@pytest.mark.parametrize("state", list(State))
def test_events_outside_their_states_are_refused(state: State) -> None:
    allowed = {
        "ready": {State.STARTING},
        "exited": {State.STARTING, State.RUNNING, State.STOPPING},
        "start": {State.STOPPED, State.BACKOFF},
        "spawned": {State.STARTING, State.STOPPING},
    }
    for event, ok_states in allowed.items():
        lc = lifecycle()
        lc.state = state
        call = {
            "ready": lambda lc=lc: lc.ready(1),
            "exited": lambda lc=lc: lc.exited(1, CRASH),
            "start": lambda lc=lc: lc.start(1),
            "spawned": lambda lc=lc: lc.spawned(1, 3),
        }[event]
        if state in ok_states:
            call()
        else:
            with pytest.raises(InvalidTransition):
                call()


@pytest.mark.parametrize(
    ("initial", "cap", "expected"),
    [(1, 60, [1, 2, 4, 8, 16, 32, 60, 60]), (0.5, 3, [0.5, 1, 2, 3, 3, 3, 3, 3]), (5, 5, [5] * 8)],
)
def test_backoff_delays(initial: float, cap: float, expected: list[float]) -> None:
    lc = lifecycle(backoff_initial_secs=initial, backoff_max_secs=cap, max_restarts=1000)
    got = []
    for n in itertools.count(1):
        lc._consecutive_failures = n
        got.append(lc.backoff_delay())
        if n == len(expected):
            break
    assert got == expected


def test_huge_failure_count_does_not_overflow() -> None:
    lc = lifecycle()
    lc._consecutive_failures = 10**6
    assert lc.backoff_delay() == 8


def test_exit_status_descriptions() -> None:
    import os

    assert ExitStatus.from_wait_status(0).describe() == "exit code 0"
    assert ExitStatus(code=3).describe() == "exit code 3"
    assert ExitStatus(signal=signal.SIGTERM).describe() == "killed by SIGTERM"
    assert ExitStatus(signal=200).describe() == "killed by signal 200"
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    assert ExitStatus.from_wait_status(status) == ExitStatus(code=7)
