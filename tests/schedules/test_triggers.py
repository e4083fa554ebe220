"""Slots of cron, interval and one-shot triggers, against an oracle that knows nothing of
zoneinfo's folds: a cron's matched wall time fires at the earliest instant whose local time
is at or after it (found by walking the clock minute by minute), across the DST changes of
real zones."""

from __future__ import annotations

import bisect
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.config import check_cron
from zeroclaw.schedules import (
    Cron,
    Every,
    Once,
    TriggerError,
    count_slots,
    jitter_of,
    next_slot,
    previous_slot,
    wall_instant,
)

# Zones with every kind of change: an hour forward and back (New York, London), half an
# hour (Lord Howe), "negative" DST in winter (Dublin), changes at midnight (Santiago,
# Havana: the skipped hour is midnight), none at all (Kolkata, UTC).
ZONES = (
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Europe/Dublin",
    "America/Santiago",
    "America/Havana",
    "Asia/Kolkata",
    "UTC",
)
MINUTE = 60


@cache
def transitions(zone: str) -> tuple[float, ...]:
    """The instants of 2026 and 2027 where the zone's offset changes (to the minute)."""
    tz = ZoneInfo(zone)
    out = []
    t = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(2028, 1, 1, tzinfo=UTC).timestamp())
    last = datetime.fromtimestamp(t, tz).utcoffset()
    while t < end:
        offset = datetime.fromtimestamp(t + 3600, tz).utcoffset()
        if offset != last:
            low, high = t, t + 3600
            while high - low > MINUTE:
                mid = (low + high) // 2 // MINUTE * MINUTE
                if datetime.fromtimestamp(mid, tz).utcoffset() == last:
                    low = mid
                else:
                    high = mid
            out.append(float(high))
            last = offset
        t += 3600
    return tuple(out) or (datetime(2026, 6, 1, tzinfo=UTC).timestamp(),)


def _values(field: str, low: int, high: int) -> set[int]:
    out: set[int] = set()
    for part in field.split(","):
        base, _, step = part.partition("/")
        if base == "*":
            start, stop = low, high
        elif "-" in base:
            a, b = base.split("-")
            start, stop = int(a), int(b)
        else:
            start = stop = int(base)
        out.update(range(start, stop + 1, int(step) if step else 1))
    return out


def matches(expr: str, wall: datetime) -> bool:
    """Cron's own reading of the five fields this test generates (not croniter's code): a
    restricted day of month and day of week match either (cron's OR)."""
    minute, hour, dom, month, dow = expr.split()
    if wall.minute not in _values(minute, 0, 59) or wall.hour not in _values(hour, 0, 23):
        return False
    if wall.month not in _values(month, 1, 12):
        return False
    day_ok = wall.day in _values(dom, 1, 31)
    week_ok = (wall.weekday() + 1) % 7 in _values(dow, 0, 6)
    if dom != "*" and dow != "*":
        return day_ok or week_ok
    return day_ok and week_ok


def oracle(expr: str, zone: str, start: float, end: float) -> list[float]:
    """Slots in (start, end], the slow way: every UTC minute of the window and a few hours
    around it, the running maximum of its wall time, and each matching wall time fired at
    the first minute whose running maximum reaches it."""
    tz = ZoneInfo(zone)
    lo, hi = int(start // MINUTE * MINUTE) - 5 * 3600, int(end) + 5 * 3600
    instants = list(range(lo, hi, MINUTE))
    highest: list[datetime] = []
    for t in instants:
        wall = datetime.fromtimestamp(t, tz).replace(tzinfo=None)
        highest.append(wall if not highest or wall > highest[-1] else highest[-1])
    slots = set()
    wall = highest[0]
    while wall <= highest[-1]:
        if matches(expr, wall):
            i = bisect.bisect_left(highest, wall)
            if i < len(instants):
                slots.add(float(instants[i]))
        wall += timedelta(minutes=1)
    return sorted(s for s in slots if start < s <= end)


def walk(trigger: Cron | Every, start: float, end: float) -> list[float]:
    out, t = [], start
    while (slot := next_slot(trigger, t)) is not None and slot <= end:
        assert slot > t
        out.append(slot)
        t = slot
    return out


field = st.one_of(
    st.just("*"),
    st.integers(1, 4).map(lambda k: f"*/{k * 5}"),
    st.integers(0, 59).map(str),
    st.tuples(st.integers(0, 29), st.integers(30, 59)).map(lambda p: f"{p[0]}-{p[1]}/15"),
)
hours = st.one_of(
    st.just("*"),
    st.integers(0, 23).map(str),
    st.sampled_from(["0,1,2,3", "1-3", "*/2", "2", "0", "23"]),
)
crons = st.tuples(
    field,
    hours,
    st.sampled_from(["*", "*", "1-15"]),
    st.just("*"),
    st.sampled_from(["*", "*", "0,6", "1-5"]),
).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(
    expr=crons,
    zone=st.sampled_from(ZONES),
    which=st.integers(0, 3),
    before_hours=st.integers(0, 30),
)
def test_cron_slots_are_the_oracles_across_dst_changes(
    expr: str, zone: str, which: int, before_hours: int
) -> None:
    changes = transitions(zone)
    start = changes[which % len(changes)] - before_hours * 3600 + 17.5
    end = start + 36 * 3600
    assert walk(Cron(expr, zone), start, end) == oracle(expr, zone, start, end)


@settings(max_examples=30, deadline=None)
@given(
    expr=crons,
    zone=st.sampled_from(ZONES),
    which=st.integers(0, 3),
    offset=st.integers(-20 * 3600, 20 * 3600),
)
def test_previous_slot_is_the_last_slot_at_or_before(
    expr: str, zone: str, which: int, offset: int
) -> None:
    changes = transitions(zone)
    at = changes[which % len(changes)] + offset
    slots = oracle(expr, zone, at - 86400, at)
    got = previous_slot(Cron(expr, zone), at)
    assert got == (slots[-1] if slots else got)
    if got is not None:
        assert got <= at
        assert next_slot(Cron(expr, zone), got - 1e-3) == got


def test_a_skipped_wall_time_fires_once_at_the_end_of_the_gap() -> None:
    ny = "America/New_York"
    before = datetime(2026, 3, 8, 6, 0, tzinfo=UTC).timestamp()  # 01:00 EST
    slot = next_slot(Cron("30 2 * * *", ny), before)
    assert slot == datetime(2026, 3, 8, 7, 0, tzinfo=UTC).timestamp()  # 03:00 EDT
    # every skipped match lands there, and that is one slot
    slots = walk(Cron("*/10 2-3 * * *", ny), before, before + 3 * 3600)
    assert slots[0] == datetime(2026, 3, 8, 7, 0, tzinfo=UTC).timestamp()
    assert len(slots) == len(set(slots)) == 6  # 03:00 .. 03:50 (02:xx folded into 03:00)


def test_a_repeated_wall_time_fires_once_at_its_first_occurrence() -> None:
    ny = "America/New_York"
    before = datetime(2026, 11, 1, 4, 0, tzinfo=UTC).timestamp()  # 00:00 EDT
    slots = walk(Cron("30 1 * * *", ny), before, before + 6 * 3600)
    assert slots == [datetime(2026, 11, 1, 5, 30, tzinfo=UTC).timestamp()]  # 01:30 EDT


def test_wall_instant_of_ordinary_repeated_and_skipped_times() -> None:
    tz = ZoneInfo("Europe/London")
    assert (
        wall_instant(datetime(2026, 7, 1, 12, 0), tz)
        == datetime(2026, 7, 1, 11, 0, tzinfo=UTC).timestamp()
    )
    assert (
        wall_instant(datetime(2026, 10, 25, 1, 30), tz)
        == datetime(2026, 10, 25, 0, 30, tzinfo=UTC).timestamp()
    )
    assert (
        wall_instant(datetime(2026, 3, 29, 1, 30), tz)
        == datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp()
    )


@given(
    interval=st.floats(1, 86400 * 2),
    anchor=st.floats(0, 1e9),
    after=st.floats(0, 2e9),
)
def test_every_slots_are_anchor_plus_multiples(
    interval: float, anchor: float, after: float
) -> None:
    trigger = Every(interval, anchor)
    slot = next_slot(trigger, after)
    assert slot is not None and slot > after
    assert slot - interval <= after * (1 + 1e-12) + 1e-6
    before = previous_slot(trigger, after)
    assert before is not None and before <= after < before + interval * (1 + 1e-9) + 1e-6


@given(interval=st.integers(1, 3600), span=st.integers(0, 100_000), after=st.integers(0, 10**9))
def test_count_slots_counts_the_walk(interval: int, span: int, after: int) -> None:
    trigger = Every(float(interval), 0.0)
    expected = len(walk(trigger, after, after + span)) if span // interval < 500 else None
    if expected is not None:
        assert count_slots(trigger, after, after + span) == expected


def test_once_has_one_slot() -> None:
    assert next_slot(Once(100.0), 50.0) == 100.0
    assert next_slot(Once(100.0), 100.0) is None
    assert previous_slot(Once(100.0), 99.0) is None
    assert previous_slot(Once(100.0), 100.0) == 100.0


@given(key=st.text(max_size=20), slot=st.floats(0, 2e9), jitter=st.floats(0, 3600))
def test_jitter_is_stable_and_bounded(key: str, slot: float, jitter: float) -> None:
    first = jitter_of(key, slot, jitter)
    assert first == jitter_of(key, slot, jitter)
    assert 0 <= first <= jitter
    if jitter == 0:
        assert first == 0


@pytest.mark.parametrize(
    ("expr", "zone", "problem"),
    [
        ("0 8 * * 1-5", "Europe/Berlin", None),
        ("0 8 * *", "UTC", "five fields"),
        ("0 0 8 * * 1-5", "UTC", "five fields"),
        ("61 * * * *", "UTC", "not a valid"),
        ("H * * * *", "UTC", "not a valid"),
        ("0 0 31 2 *", "UTC", "matches no date"),
        ("0 8 * * 1", "Mars/Olympus", "unknown timezone"),
        ("0 8 * * 1", "../../etc/passwd", "unknown timezone"),
        ("0 8 * * thu", "UTC", None),
        # Fields split on any whitespace: a line break or another control character in one
        # (a sender's reminder) would reach the daemon's text log and forge lines there.
        ("0\n8 * * *", "UTC", "spaces"),
        ("0 8 * * *\n2026-12-06 WARNING forged", "UTC", "spaces"),
        ("0\x1c8 * * *", "UTC", "spaces"),
        ("0\t8 * * *", "UTC", "spaces"),
        # Every slot of a cron parses it again: a 20 KB list ('0,0,0,...') held the daemon's
        # loop for seconds at each reminder made, run or counted.
        (",".join(["0"] * 10_000) + " 0 * * *", "UTC", "at most"),
    ],
)
def test_check_cron(expr: str, zone: str, problem: str | None) -> None:
    found = check_cron(expr, zone)
    assert (found is None) == (problem is None), found
    if problem is not None:
        assert problem in str(found)


def test_a_cron_that_never_matches_raises() -> None:
    with pytest.raises(TriggerError):
        next_slot(Cron("0 0 30 2 *", "UTC"), 0.0)
