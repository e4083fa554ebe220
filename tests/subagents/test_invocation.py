"""The invocation state machine and restart recovery, as pure code: every pair of states,
and properties over any sequence of events and any set of unfinished invocations."""

from __future__ import annotations

from typing import get_args

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.subagents import (
    RESTART_INTERRUPT,
    IllegalTransition,
    advance,
    recovery_plan,
    retry_of,
)
from zeroclaw.subagents._invocation import check_event
from zeroclaw.turns import TERMINAL_STATES, Invocation, InvocationState, StateEntered, TextDelta

STATES: tuple[InvocationState, ...] = get_args(InvocationState)
ALLOWED = {
    ("accepted", "running"),
    ("accepted", "failed"),
    ("accepted", "cancelled"),
    ("accepted", "interrupted"),
    ("accepted", "timed_out"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "timed_out"),
    ("running", "cancelled"),
    ("running", "interrupted"),
}


def invocation(**overrides: object) -> Invocation:
    fields: dict[str, object] = {
        "id": "inv-1",
        "agent_id": "summarizer",
        "digest": "d" * 64,
        "caller": "alpha",
        "source": "agent:alpha",
        "task": "sum it up",
        "input": {"text": "long"},
        "parent_run_id": "run-7",
        "idempotency_key": "k1",
        "created_at": 100.0,
        "updated_at": 100.0,
    }
    fields.update(overrides)
    return Invocation(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", STATES)
@pytest.mark.parametrize("target", STATES)
def test_every_pair_of_states_is_allowed_exactly_when_the_machine_says(
    source: InvocationState, target: InvocationState
) -> None:
    inv = invocation(state=source)
    entered = StateEntered(target)
    if (source, target) in ALLOWED:
        after = advance(inv, entered, 200.0)
        assert after.state == target
        assert after.updated_at == 200.0
    else:
        with pytest.raises(IllegalTransition) as caught:
            advance(inv, entered, 200.0)
        assert (caught.value.invocation_id, caught.value.state) == ("inv-1", source)


def test_advance_takes_the_error_from_the_body_and_the_results_from_the_caller() -> None:
    running = invocation(state="running")
    failed = advance(
        running,
        StateEntered("failed", "subagent_output_invalid", "3 is not a string"),
        201.0,
        output={"title": 3},
        reply="here you go",
        pointer="/title",
    )
    assert failed.error_code == "subagent_output_invalid"
    assert failed.error_detail == "3 is not a string"
    assert failed.error_pointer == "/title"
    assert failed.output == {"title": 3}
    assert failed.reply == "here you go"
    assert running.state == "running"  # records are immutable: a new one is returned


def test_success_cannot_carry_an_error_code() -> None:
    with pytest.raises(IllegalTransition):
        advance(invocation(state="running"), StateEntered("succeeded", "daemon_restarted"), 1.0)


def test_an_ended_invocation_takes_no_more_events_of_any_kind() -> None:
    check_event(invocation(state="running"), TextDelta("more"))
    with pytest.raises(IllegalTransition, match="TextDelta"):
        check_event(invocation(state="timed_out"), TextDelta("late"))


def test_a_retry_is_the_same_request_on_the_same_revision_under_the_same_key() -> None:
    old = advance(invocation(state="running"), RESTART_INTERRUPT, 150.0)
    new = retry_of(old, "inv-2", 160.0)
    same = ("agent_id", "digest", "caller", "source", "task", "input")
    assert all(getattr(new, f) == getattr(old, f) for f in same)
    assert (new.parent_run_id, new.idempotency_key) == ("run-7", "k1")
    assert (new.id, new.attempt, new.retry_of, new.state) == ("inv-2", 2, "inv-1", "accepted")
    assert (new.created_at, new.last_seq, new.error_code) == (160.0, 0, None)


def test_recovery_interrupts_every_unfinished_one_and_retries_only_first_retryable_attempts() -> (
    None
):
    a = invocation(id="a", state="accepted", agent_id="reader")
    b = invocation(id="b", state="running", agent_id="writer")
    c = invocation(id="c", state="running", agent_id="reader", attempt=2, retry_of="x")
    done = invocation(id="d", state="succeeded", agent_id="reader")
    plan = recovery_plan([a, b, c, done], lambda inv: inv.agent_id == "reader")
    assert [(r.invocation.id, r.retry) for r in plan] == [("a", True), ("b", False), ("c", False)]
    assert {r.entered for r in plan} == {RESTART_INTERRUPT}
    assert RESTART_INTERRUPT.error_code == "daemon_restarted"


# --- properties ---------------------------------------------------------------------------

bodies = st.builds(StateEntered, st.sampled_from(STATES))


@given(st.lists(bodies, max_size=12))
def test_no_sequence_of_events_leaves_a_terminal_state(events: list[StateEntered]) -> None:
    inv = invocation()
    ended: str | None = None
    for entered in events:
        try:
            inv = advance(inv, entered, 1.0)
        except IllegalTransition:
            continue
        if ended is not None:
            pytest.fail(f"left {ended} for {inv.state}")
        if inv.state in TERMINAL_STATES:
            ended = inv.state
    if ended is not None:
        assert inv.state == ended


records = st.builds(
    lambda i, state, attempt, retryable: invocation(
        id=f"i{i}",
        state=state,
        attempt=attempt,
        retry_of=None if attempt == 1 else f"p{i}",
        agent_id="r" if retryable else "w",
    ),
    st.integers(0, 10_000),
    st.sampled_from(STATES),
    st.integers(1, 3),
    st.booleans(),
)


@given(st.lists(records, max_size=20, unique_by=lambda inv: inv.id))
def test_recovery_interrupts_all_unfinished_and_never_retries_a_retry(
    given_records: list[Invocation],
) -> None:
    plan = recovery_plan(given_records, lambda inv: inv.agent_id == "r")
    unfinished = [inv.id for inv in given_records if inv.state in ("accepted", "running")]
    assert [r.invocation.id for r in plan] == unfinished
    for step in plan:
        assert advance(step.invocation, step.entered, 2.0).state == "interrupted"
        if step.retry:
            assert step.invocation.attempt == 1 and step.invocation.agent_id == "r"
            again = retry_of(advance(step.invocation, step.entered, 2.0), "n", 3.0)
            # The retry itself, left unfinished by a second crash, is never re-run.
            (second,) = recovery_plan([again], lambda inv: True)
            assert not second.retry
        else:
            assert step.invocation.attempt >= 2 or step.invocation.agent_id == "w"
    assert len({r.invocation.id for r in plan if r.retry}) == sum(r.retry for r in plan)


def test_records_round_trip_through_msgpack_after_advancing() -> None:
    inv = advance(invocation(state="running"), StateEntered("succeeded"), 3.0, output=[1, "a"])
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(inv), type=Invocation) == inv
