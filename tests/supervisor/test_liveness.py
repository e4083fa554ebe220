"""The runners' liveness pings (ADR 0069): every agent is pinged on one grid of instants,
so an idle daemon with many agents wakes once per interval for all of them."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.supervisor._runner import (
    LIVENESS_INTERVAL_SECS,
    LIVENESS_TIMEOUT_SECS,
    next_ping,
)

NOW = st.floats(min_value=0, max_value=1e7, allow_nan=False)


@given(now=NOW, later=st.floats(min_value=0, max_value=LIVENESS_INTERVAL_SECS * 0.999))
def test_runners_started_at_any_time_ping_at_the_same_instants(now: float, later: float) -> None:
    """Two runners asking within one interval of each other (a ping task started at any
    moment) get the same instant unless a grid point lies between them."""
    first = next_ping(now, LIVENESS_INTERVAL_SECS)
    second = next_ping(now + later, LIVENESS_INTERVAL_SECS)
    assert first == second or second == first + LIVENESS_INTERVAL_SECS
    assert math.isclose(first / LIVENESS_INTERVAL_SECS, round(first / LIVENESS_INTERVAL_SECS))


@given(now=NOW)
def test_the_next_ping_is_after_now_and_at_most_an_interval_away(now: float) -> None:
    at = next_ping(now, LIVENESS_INTERVAL_SECS)
    assert now < at <= now + LIVENESS_INTERVAL_SECS


def test_a_hung_agent_misses_several_pings_before_it_is_killed() -> None:
    """A ping may come up to an interval late (the grid), so the timeout spans several."""
    assert LIVENESS_TIMEOUT_SECS >= 3 * LIVENESS_INTERVAL_SECS
