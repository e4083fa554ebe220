"""LogThrottle: bounded lines per kind, and every event reported in exactly one line."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw._log_throttle import LogThrottle

INTERVAL = 10.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcde"), st.floats(0, 5, allow_nan=False)), max_size=300),
    st.integers(1, 6),
)
def test_every_event_is_counted_once_in_a_bounded_number_of_lines(
    events: list[tuple[str, float]], max_keys: int
) -> None:
    throttle = LogThrottle[str](INTERVAL, overflow_key="*", max_keys=max_keys)
    lines: dict[str, int] = {}
    reported = 0
    now = 0.0
    for key, step in events:
        now += step
        for flushed_key, count in throttle.flush(now):
            lines[flushed_key] = lines.get(flushed_key, 0) + 1
            reported += count
        count = throttle.event(key, now)
        if count:
            lines[key] = lines.get(key, 0) + 1
            reported += count
    for flushed_key, count in throttle.flush(now + INTERVAL):
        lines[flushed_key] = lines.get(flushed_key, 0) + 1
        reported += count
    assert reported == len(events)
    # Per kind (at most max_keys, plus the overflow kind): one line when an interval
    # opens, one more when it is flushed or renewed.
    per_kind = 2 * (math.floor(now / INTERVAL) + 2)
    assert sum(lines.values()) <= (min(5, max_keys) + 1) * per_kind


def test_a_burst_is_one_line_now_and_one_line_with_the_rest() -> None:
    throttle = LogThrottle[str](INTERVAL, overflow_key="*")
    assert throttle.event("zap", 0.0) == 1
    assert [throttle.event("zap", 0.001 * i) for i in range(1, 1000)] == [0] * 999
    assert throttle.flush(5.0) == []
    assert throttle.flush(10.0) == [("zap", 999)]
    assert throttle.event("zap", 11.0) == 1


def test_the_next_flush_is_the_end_of_the_first_window_holding_a_count() -> None:
    throttle = LogThrottle[str](10.0, overflow_key="other")
    assert throttle.next_flush() == math.inf
    assert throttle.event("a", 0.0) == 1  # logged at once: nothing held back
    assert throttle.next_flush() == math.inf
    assert throttle.event("b", 3.0) == 1
    assert throttle.event("b", 4.0) == 0  # held back until b's window ends
    assert throttle.next_flush() == 13.0
    assert throttle.event("a", 5.0) == 0
    assert throttle.next_flush() == 10.0
    assert throttle.flush(10.0) == [("a", 1)]
    assert throttle.next_flush() == 13.0
