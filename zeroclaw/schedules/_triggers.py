"""When a schedule fires: its slots, as instants (unix seconds). Pure.

Three kinds of trigger:

  Cron   five cron fields read in a timezone (croniter expands the fields; this module
         only turns the wall times they match into instants)
  Every  an interval from an anchor: anchor + k * interval (the config's are anchored on
         the unix epoch, so a restart finds the same slots; a reminder's on its creation)
  Once   one instant (an agent-made reminder "in 20m")

DST, the way cron users expect it: a matched wall time is fired at the earliest instant
whose local time is at or after it (`wall_instant`). So a wall time that occurs twice
(the hour repeated when clocks go back) fires once, at its first occurrence, and a wall
time the clocks skip (the hour lost when they go forward) fires once, at the first valid
instant after the gap; several skipped matches land on that one instant and fire once.
Instants never go backwards as wall times go forward, which is what makes "the next
slot after t" well defined across every transition.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from croniter import croniter

# No zone shifts its clocks by more than this at once; a search around a wall time looks
# this far on each side.
MAX_SHIFT = timedelta(hours=4)
# Matches looked at for one answer before giving up (a per-minute cron through a
# repeated hour needs ~60; an expression that never matches raises much earlier).
MAX_STEPS = 10_000


class TriggerError(ValueError):
    """A trigger that cannot be computed (a cron expression that never matches)."""


@dataclass(frozen=True, slots=True)
class Cron:
    expr: str  # five fields, as croniter reads them
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class Every:
    interval: float  # seconds, > 0
    anchor: float = 0.0  # a slot: anchor + k * interval


@dataclass(frozen=True, slots=True)
class Once:
    at: float


Trigger = Cron | Every | Once


def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def wall_instant(wall: datetime, zone: ZoneInfo) -> float:
    """The earliest instant whose local time in `zone` is at or after the naive `wall`:
    the instant itself for an ordinary wall time, its first occurrence for a repeated one,
    and the end of the gap for a skipped one."""
    found = [
        utc
        for utc in (wall.replace(tzinfo=zone, fold=f).astimezone(UTC) for f in (0, 1))
        if utc.astimezone(zone).replace(tzinfo=None) == wall
    ]
    if found:  # it exists (twice, in a repeated hour: the first occurrence is the earlier)
        return min(found).timestamp()
    a = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    b = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    # A gap: the transition lies between the two readings. Find the first whole second
    # whose local time is at or after `wall` (transitions fall on whole seconds).
    low, high = int(min(a, b).timestamp()), int(max(a, b).timestamp()) + 1
    while low < high:
        mid = (low + high) // 2
        if datetime.fromtimestamp(mid, zone).replace(tzinfo=None) >= wall:
            high = mid
        else:
            low = mid + 1
    return float(low)


def _wall(at: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(at, zone).replace(tzinfo=None)


def _matches(expr: str, start: datetime) -> croniter:
    from croniter import croniter  # only a daemon with a cron schedule loads it

    return croniter(expr, start)


def _step(it: croniter, backwards: bool) -> datetime:
    from croniter import CroniterBadDateError

    try:
        return it.get_prev(datetime) if backwards else it.get_next(datetime)
    except CroniterBadDateError:
        raise TriggerError("the cron expression matches no date") from None


def next_slot(trigger: Trigger, after: float) -> float | None:
    """The first slot strictly after `after`; None when there is none (a past Once)."""
    if isinstance(trigger, Once):
        return trigger.at if trigger.at > after else None
    if isinstance(trigger, Every):
        k = (after - trigger.anchor) // trigger.interval + 1
        slot = trigger.anchor + k * trigger.interval
        while slot <= after:  # float rounding
            k += 1
            slot = trigger.anchor + k * trigger.interval
        return slot
    zone = _zone(trigger.timezone)
    # Matches at or before wall(after) map at or before `after` (instants never go back as
    # wall times go forward), so the search starts right after it.
    it = _matches(trigger.expr, _wall(after, zone))
    for _ in range(MAX_STEPS):
        slot = wall_instant(_step(it, False), zone)
        if slot > after:
            return slot
    raise TriggerError(f"no slot of {trigger.expr!r} found after {after}")


def previous_slot(trigger: Trigger, at: float) -> float | None:
    """The last slot at or before `at`; None when there is none."""
    if isinstance(trigger, Once):
        return trigger.at if trigger.at <= at else None
    if isinstance(trigger, Every):
        k = (at - trigger.anchor) // trigger.interval
        slot = trigger.anchor + k * trigger.interval
        while slot > at:
            k -= 1
            slot = trigger.anchor + k * trigger.interval
        return slot
    zone = _zone(trigger.timezone)
    # A wall time up to MAX_SHIFT after wall(at) may still map at or before `at` (the
    # first occurrence of a repeated hour while `at` is in its second): start beyond.
    it = _matches(trigger.expr, _wall(at, zone) + MAX_SHIFT)
    for _ in range(MAX_STEPS):
        slot = wall_instant(_step(it, True), zone)
        if slot <= at:
            return slot
    raise TriggerError(f"no slot of {trigger.expr!r} found before {at}")


def count_slots(trigger: Trigger, after: float, upto: float, cap: int = 1000) -> int:
    """How many slots lie in (after, upto], at most `cap` (counting a cron's is a walk)."""
    if upto <= after:
        return 0
    if isinstance(trigger, Every):
        first = next_slot(trigger, after)
        assert first is not None
        return min(cap, max(0, int((upto - first) // trigger.interval) + 1)) if first <= upto else 0
    count, t = 0, after
    while count < cap:
        slot = next_slot(trigger, t)
        if slot is None or slot > upto:
            break
        count, t = count + 1, slot
    return count


def jitter_of(key: str, slot: float, jitter: float) -> float:
    """A slot's delay in [0, jitter): the same for the same schedule and slot, so a restart
    fires a slot at the same moment as before, and spread over schedules."""
    if jitter <= 0:
        return 0.0
    digest = hashlib.blake2b(f"{key}@{slot!r}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") / 2**64) * jitter
