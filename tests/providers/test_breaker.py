"""The circuit breaker of a chain's provider, a pure state machine driven with a fake clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.providers import BreakerSettings, CircuitBreaker

SETTINGS = BreakerSettings(failures=3, open_secs=10.0)


def opened(now: float = 0.0) -> CircuitBreaker:
    breaker = CircuitBreaker("openai.main", SETTINGS)
    for _ in range(3):
        assert breaker.allows(now)
        breaker.failed(now, "HTTP 503")
    return breaker


def test_closed_it_lets_every_call_through_and_a_success_forgets_failures() -> None:
    breaker = CircuitBreaker("openai.main", SETTINGS)
    breaker.failed(0, "x")
    breaker.failed(0, "x")
    assert breaker.state == "closed" and breaker.allows(0) and breaker.allows(0)
    breaker.succeeded()
    breaker.failed(0, "x")
    breaker.failed(0, "x")
    assert breaker.state == "closed" and breaker.failures == 2


def test_consecutive_failures_open_it_for_open_secs() -> None:
    breaker = opened(100.0)
    assert breaker.state == "open"
    assert not breaker.allows(100.0) and not breaker.allows(109.99)
    health = breaker.health(104.0)
    assert (health.state, health.failures, health.retry_in_secs) == ("open", 3, 6.0)
    assert health.last_error == "HTTP 503"


def test_after_open_secs_one_call_is_the_trial_and_the_others_wait() -> None:
    breaker = opened(0.0)
    assert breaker.allows(10.0)
    assert breaker.state == "half_open"
    assert not breaker.allows(10.0) and not breaker.allows(11.0)  # the trial is out


def test_a_successful_trial_closes_it() -> None:
    breaker = opened(0.0)
    assert breaker.allows(10.0)
    breaker.succeeded()
    assert breaker.state == "closed" and breaker.failures == 0 and breaker.allows(10.0)
    assert breaker.health(10.0).retry_in_secs == 0.0


def test_a_failed_trial_opens_it_for_twice_as_long_up_to_ten_times() -> None:
    breaker = opened(0.0)
    now = 10.0
    for expected in (20.0, 40.0, 80.0, 100.0, 100.0):
        assert breaker.allows(now)
        breaker.failed(now, "timed out")
        assert breaker.state == "open"
        assert not breaker.allows(now + expected - 0.001)
        now += expected
    assert breaker.allows(now)
    breaker.succeeded()
    for _ in range(3):
        breaker.failed(now, "x")
    assert not breaker.allows(now + 9.9) and breaker.allows(now + 10.0)  # back to open_secs


def test_an_abandoned_trial_lets_the_next_call_try() -> None:
    breaker = opened(0.0)
    assert breaker.allows(10.0)
    breaker.abandoned()
    assert breaker.state == "half_open" and breaker.allows(10.5)


events = st.lists(
    st.tuples(
        st.sampled_from(["call", "ok", "fail", "abandon"]),
        st.floats(min_value=0, max_value=50, allow_nan=False),
    ),
    max_size=60,
)


@given(events)
def test_whatever_happens_it_is_in_one_state_and_skips_only_while_it_may(
    script: list[tuple[str, float]],
) -> None:
    breaker = CircuitBreaker("p", SETTINGS)
    now = 0.0
    for what, wait in script:
        now += wait
        if what == "call":
            allowed = breaker.allows(now)
            if breaker.state == "closed":
                assert allowed
            if breaker.state == "open":
                assert not allowed and now < breaker.open_until
        elif what == "ok":
            breaker.succeeded()
            assert breaker.state == "closed" and breaker.failures == 0
        elif what == "fail":
            before = breaker.state
            breaker.failed(now, "x")
            if before == "half_open":
                assert breaker.state == "open"
        else:
            breaker.abandoned()
        assert breaker.state in ("closed", "open", "half_open")
        assert breaker.open_for <= SETTINGS.open_secs * 10
        if breaker.state == "open":
            assert breaker.open_until - now <= SETTINGS.open_secs * 10
        health = breaker.health(now)
        assert health.retry_in_secs >= 0 and health.state == breaker.state
