"""The scheduler: a pure state machine that owns every schedule's state (h11's shape).

The daemon's trio shell feeds it events and carries out the actions it answers; it never
reads a clock, a file or a socket itself, so the tests drive it on a fake clock.

Events in (`Scheduler.handle`):
  Restored(marks)        at start: what the store kept (before any Reloaded)
  Reloaded(specs, now)   the schedules that exist now (start, reload, a reminder made)
  Tick(now)              time has come (the shell wakes at `next_deadline()`)
  FireEnded(run_id, now) a run's turn ended (whatever its outcome)
  RunNow(key, now)       the operator's `schedules run`
  Pause(key), Resume(key, now)

Actions out, in order; each that changes what must survive a restart carries the new
`Mark`, which the shell writes before acting on the next (a fire is on disk before its
turn starts):
  Fire          start the run's turn (`late`: past its time, fired by catch_up)
  Skipped       a slot not run (overlap, queue_full)
  Queued        a slot that runs when the current run ends (overlap = "queue")
  Missed        slots that passed unrun (the daemon was down, or slow), counted
  Interrupted   a run the last daemon started and never saw end (not run again)
  Cancelled     a queued run dropped (its schedule removed, disabled or paused)
  Ended         a run ended: its mark without it
  Settled       a mark to keep (a schedule starts counting, is paused or resumed)
  Forget        the schedule is gone: drop its mark (and a reminder's record)
  Refused       an operator request that cannot be done now (the reason)

Slots (`_triggers`) are instants; a slot is due at slot + its jitter. When several slots
are due at once, only the latest is considered and the others are missed together
(`coalesced`); the latest runs when it is at most GRACE_SECS late, else only with
`catch_up = "latest"`. So no slot ever runs twice and none passes without a word.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ._spec import Mark, Running, ScheduleSpec
from ._triggers import Once, Trigger, count_slots, jitter_of, next_slot, previous_slot

GRACE_SECS = 60.0  # a slot run this late is on time; later, it is missed (or caught up)

SkipReason = Literal["overlap", "queue_full"]
MissReason = Literal["down", "coalesced", "late"]
CancelReason = Literal["removed", "disabled", "paused"]
RefuseReason = Literal["unknown_schedule", "schedule_running", "schedule_paused"]

# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Restored:
    marks: tuple[Mark, ...]


@dataclass(frozen=True, slots=True)
class Reloaded:
    specs: tuple[ScheduleSpec, ...]
    now: float


@dataclass(frozen=True, slots=True)
class Tick:
    now: float


@dataclass(frozen=True, slots=True)
class FireEnded:
    run_id: str
    now: float


@dataclass(frozen=True, slots=True)
class RunNow:
    key: str
    now: float


@dataclass(frozen=True, slots=True)
class Pause:
    key: str


@dataclass(frozen=True, slots=True)
class Resume:
    key: str
    now: float


Event = Restored | Reloaded | Tick | FireEnded | RunNow | Pause | Resume

# --------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Fire:
    spec: ScheduleSpec
    run_id: str
    slot: float | None  # None: the operator's run
    late: bool
    mark: Mark


@dataclass(frozen=True, slots=True)
class Skipped:
    spec: ScheduleSpec
    slot: float
    reason: SkipReason
    mark: Mark


@dataclass(frozen=True, slots=True)
class Queued:
    spec: ScheduleSpec
    slot: float
    mark: Mark


@dataclass(frozen=True, slots=True)
class Missed:
    spec: ScheduleSpec
    count: int  # at least this many (counting a cron's slots is capped)
    latest: float
    reason: MissReason
    mark: Mark


@dataclass(frozen=True, slots=True)
class Interrupted:
    key: str
    run_id: str
    slot: float | None
    mark: Mark


@dataclass(frozen=True, slots=True)
class Cancelled:
    key: str
    slot: float
    reason: CancelReason
    mark: Mark


@dataclass(frozen=True, slots=True)
class Ended:
    key: str
    run_id: str
    mark: Mark


@dataclass(frozen=True, slots=True)
class Settled:
    mark: Mark


@dataclass(frozen=True, slots=True)
class Forget:
    key: str
    spec: ScheduleSpec | None  # the last spec known (None: only its mark was)


@dataclass(frozen=True, slots=True)
class Refused:
    key: str
    reason: RefuseReason


Action = (
    Fire | Skipped | Queued | Missed | Interrupted | Cancelled | Ended | Settled | Forget | Refused
)


def run_id_of(key: str, slot: float | None, now: float) -> str:
    """A run's id: the schedule and its slot (the same after a restart, so a receiver may
    drop a repeat), or the moment of an operator's run."""
    if slot is None:
        return f"{key}@run-{int(now * 1000)}"
    when = datetime.fromtimestamp(slot, UTC)
    return f"{key}@{when.strftime('%Y-%m-%dT%H:%M:%S')}Z"


@dataclass
class _Entry:
    key: str
    spec: ScheduleSpec | None = None  # None: known from the store only, or removed
    last_slot: float | None = None
    next_slot: float | None = None
    paused: bool = False
    running: Running | None = None
    queued: float | None = None
    restored: bool = False  # from the store, its first due slots not looked at yet

    def mark(self) -> Mark:
        return Mark(self.key, self.last_slot, self.paused, self.running, self.queued)

    @property
    def active(self) -> bool:
        return self.spec is not None and self.spec.enabled and not self.paused


class Scheduler:
    def __init__(
        self,
        *,
        grace: float = GRACE_SECS,
        run_id: Callable[[str, float | None, float], str] = run_id_of,
    ) -> None:
        self.grace = grace
        self._run_id = run_id
        self._entries: dict[str, _Entry] = {}
        self._runs: dict[str, str] = {}  # run id -> key

    # --- reading ----------------------------------------------------------------------

    def specs(self) -> list[ScheduleSpec]:
        return [e.spec for e in self._entries.values() if e.spec is not None]

    def spec(self, key: str) -> ScheduleSpec | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.spec

    def mark(self, key: str) -> Mark | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.mark()

    def next_fire(self, key: str) -> float | None:
        """When the schedule's next slot is due (None: paused, disabled, or no more)."""
        entry = self._entries.get(key)
        if entry is None or not entry.active or entry.next_slot is None:
            return None
        assert entry.spec is not None
        return entry.next_slot + jitter_of(key, entry.next_slot, entry.spec.jitter)

    def next_deadline(self) -> float:
        """The earliest moment a Tick has something to do (inf: nothing is scheduled)."""
        due = (self.next_fire(key) for key in self._entries)
        return min((t for t in due if t is not None), default=math.inf)

    def running(self) -> dict[str, str]:
        """Run id -> schedule key, for every run in progress."""
        return dict(self._runs)

    # --- events -----------------------------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        if isinstance(event, Restored):
            return self._restored(event.marks)
        if isinstance(event, Reloaded):
            return self._reloaded(event.specs, event.now)
        if isinstance(event, Tick):
            return self._tick(event.now)
        if isinstance(event, FireEnded):
            return self._fire_ended(event.run_id, event.now)
        if isinstance(event, RunNow):
            return self._run_now(event.key, event.now)
        if isinstance(event, Pause):
            return self._pause(event.key)
        return self._resume(event.key, event.now)

    def _restored(self, marks: Iterable[Mark]) -> list[Action]:
        actions: list[Action] = []
        for mark in marks:
            entry = self._entries[mark.key] = _Entry(
                mark.key, None, mark.last_slot, None, mark.paused, None, mark.queued, True
            )
            if mark.running is not None:
                # Started by the last daemon, never seen to end: it may have delivered, so
                # it is reported, never run again.
                run = mark.running
                actions.append(Interrupted(mark.key, run.run_id, run.slot, entry.mark()))
        return actions

    def _reloaded(self, specs: Iterable[ScheduleSpec], now: float) -> list[Action]:
        actions: list[Action] = []
        wanted = {spec.key: spec for spec in specs}
        for key, gone in list(self._entries.items()):
            if key not in wanted:
                actions += self._remove(gone)
        for key, spec in wanted.items():
            entry = self._entries.setdefault(key, _Entry(key))
            old, entry.spec = entry.spec, spec
            if old is None:
                if entry.queued is not None:
                    entry.next_slot = entry.queued  # a queued run the last daemon left
                    entry.queued = None
                elif entry.last_slot is not None:
                    entry.next_slot = next_slot(spec.trigger, entry.last_slot)
                else:  # new: it counts from now (and says so, so a restart does too);
                    # a reminder from when it was made (the store's write and a thread hop
                    # came in between: a busy machine must not put a one-shot past its time)
                    since = min(now, spec.created_at or now)
                    entry.last_slot = since
                    entry.next_slot = next_slot(spec.trigger, since)
                    actions.append(Settled(entry.mark()))
                if entry.next_slot is None:
                    # A one-shot whose slot was settled (its run cut by the daemon's death,
                    # reported Interrupted): it ran, so it is gone, not kept and never due.
                    actions += self._exhausted(entry)
                    continue
            elif old.trigger != spec.trigger or (spec.enabled and not old.enabled):
                # Takes effect at its next slot: none of the new trigger's past slots run,
                # nor what passed while it was disabled.
                entry.next_slot = next_slot(spec.trigger, now)
                if spec.enabled and not old.enabled:
                    entry.last_slot = now
                    actions.append(Settled(entry.mark()))
            if not spec.enabled and entry.queued is not None:
                actions += self._cancel(entry, "disabled")
        return actions

    def _remove(self, entry: _Entry) -> list[Action]:
        actions: list[Action] = []
        if entry.queued is not None:
            actions += self._cancel(entry, "removed")
        spec, entry.spec = entry.spec, None
        if entry.running is None:
            del self._entries[entry.key]
            actions.append(Forget(entry.key, spec))
        return actions  # a running one is forgotten when it ends

    def _cancel(self, entry: _Entry, reason: CancelReason) -> list[Action]:
        assert entry.queued is not None
        slot, entry.queued = entry.queued, None
        # What it settles: the slot is not run, and not caught up after a restart either.
        entry.last_slot = max(entry.last_slot or slot, slot)
        return [Cancelled(entry.key, slot, reason, entry.mark())]

    def _tick(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for key, entry in list(self._entries.items()):
            due = self.next_fire(key)
            if due is not None and due <= now:
                actions += self._due(entry, now)
        return actions

    def _due(self, entry: _Entry, now: float) -> list[Action]:
        spec = entry.spec
        first = entry.next_slot
        assert spec is not None
        assert first is not None
        trigger = spec.trigger
        latest = self._latest_due(entry.key, spec, first, now)
        earlier = _between(trigger, first, latest) - 1
        late = now - (latest + jitter_of(entry.key, latest, spec.jitter)) > self.grace
        reason: MissReason = "down" if entry.restored else "late" if late else "coalesced"
        entry.restored = False
        entry.next_slot = next_slot(trigger, latest)
        actions: list[Action] = []
        if late and spec.catch_up == "none":
            entry.last_slot = latest
            actions.append(Missed(spec, earlier + 1, latest, reason, entry.mark()))
            return actions + self._exhausted(entry)
        if earlier > 0:
            entry.last_slot = _slot_before(trigger, latest, first)
            actions.append(Missed(spec, earlier, entry.last_slot, reason, entry.mark()))
        return actions + self._decide(entry, latest, now, late)

    def _latest_due(self, key: str, spec: ScheduleSpec, first: float, now: float) -> float:
        """The latest slot (at or after `first`) whose due moment has come."""
        latest = previous_slot(spec.trigger, now)
        while latest is not None and latest > first:
            if latest + jitter_of(key, latest, spec.jitter) <= now:
                return latest
            latest = previous_slot(spec.trigger, latest - 1e-6)
        return first

    def _decide(self, entry: _Entry, slot: float, now: float, late: bool) -> list[Action]:
        spec = entry.spec
        assert spec is not None
        entry.last_slot = slot
        if entry.running is None:
            return [self._fire(entry, slot, now, late)]
        if spec.overlap == "queue" and entry.queued is None:
            entry.queued = slot
            return [Queued(spec, slot, entry.mark())]
        reason: SkipReason = "overlap" if spec.overlap == "skip" else "queue_full"
        return [Skipped(spec, slot, reason, entry.mark())]

    def _fire(self, entry: _Entry, slot: float | None, now: float, late: bool) -> Fire:
        assert entry.spec is not None
        run_id = self._run_id(entry.key, slot, now)
        entry.running = Running(run_id, slot, now)
        self._runs[run_id] = entry.key
        return Fire(entry.spec, run_id, slot, late, entry.mark())

    def _exhausted(self, entry: _Entry) -> list[Action]:
        """A one-shot schedule whose slot passed (and no run holds it) is gone."""
        if entry.next_slot is None and entry.running is None and entry.queued is None:
            spec = entry.spec
            del self._entries[entry.key]
            return [Forget(entry.key, spec)]
        return []

    def _fire_ended(self, run_id: str, now: float) -> list[Action]:
        key = self._runs.pop(run_id, None)
        found = None if key is None else self._entries.get(key)
        if found is None or found.running is None or found.running.run_id != run_id:
            return []
        entry = found
        entry.running = None
        actions: list[Action] = [Ended(entry.key, run_id, entry.mark())]
        if entry.spec is None:  # removed while it ran
            del self._entries[entry.key]
            return [*actions, Forget(entry.key, None)]
        if entry.queued is not None:
            slot, entry.queued = entry.queued, None
            entry.last_slot = slot
            late = now - slot > self.grace
            return [*actions, self._fire(entry, slot, now, late)]
        if isinstance(entry.spec.trigger, Once):
            return actions + self._exhausted(entry)
        return actions

    def _run_now(self, key: str, now: float) -> list[Action]:
        entry = self._entries.get(key)
        if entry is None or entry.spec is None:
            return [Refused(key, "unknown_schedule")]
        if entry.running is not None:
            return [Refused(key, "schedule_running")]
        return [self._fire(entry, None, now, False)]

    def _pause(self, key: str) -> list[Action]:
        entry = self._entries.get(key)
        if entry is None or entry.spec is None:
            return [Refused(key, "unknown_schedule")]
        entry.paused = True
        actions: list[Action] = []
        if entry.queued is not None:
            actions += self._cancel(entry, "paused")
        return [*actions, Settled(entry.mark())]

    def _resume(self, key: str, now: float) -> list[Action]:
        entry = self._entries.get(key)
        if entry is None or entry.spec is None:
            return [Refused(key, "unknown_schedule")]
        if entry.paused:
            # What passed while paused is not missed, and is never caught up: it counts
            # again from now.
            entry.paused = False
            entry.last_slot = max(entry.last_slot or now, now)
            entry.next_slot = next_slot(entry.spec.trigger, now)
        return [Settled(entry.mark())]


def _between(trigger: Trigger, first: float, last: float) -> int:
    """Slots in [first, last] (first is a slot)."""
    return 1 + count_slots(trigger, first, last)


def _slot_before(trigger: Trigger, slot: float, floor: float) -> float:
    """The slot before `slot`, not before `floor`."""
    before = previous_slot(trigger, slot - 1e-6)
    return floor if before is None or before < floor else before
