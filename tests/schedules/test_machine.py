"""The scheduler on a fake clock: a simulated daemon feeds it ticks at its own deadlines,
ends its runs after drawn durations, writes its marks to a dict (the store) and is killed
at drawn moments (before or after a batch of marks reached the store), restarted, reloaded,
paused and resumed. Whatever happens: no slot runs twice, no slot passes without a word,
and with the daemon up and the runs short every slot runs, across the DST changes of real
zones."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zeroclaw.schedules import (
    GRACE_SECS,
    Action,
    Cancelled,
    Cron,
    Ended,
    Every,
    Fire,
    FireEnded,
    Forget,
    Interrupted,
    Mark,
    Missed,
    Once,
    Pause,
    Queued,
    Refused,
    Reloaded,
    Restored,
    Resume,
    Running,
    RunNow,
    Scheduler,
    ScheduleSpec,
    Settled,
    Skipped,
    Tick,
    Trigger,
    next_slot,
    previous_slot,
)

T0 = 1_772_899_200.0  # 2026-03-07T16:00Z, 15 hours before New York's spring change
# Starts six hours before a change of clocks: New York forward and back, London forward,
# Lord Howe (half an hour) back and forward.
STARTS = (
    1_772_931_600.0 - 6 * 3600,  # 2026-03-08T07:00Z
    1_793_512_800.0 - 6 * 3600,  # 2026-11-01T06:00Z
    1_774_746_000.0 - 6 * 3600,  # 2026-03-29T01:00Z
    1_775_314_800.0 - 6 * 3600,  # 2026-04-04T15:00Z
    1_791_043_200.0 - 6 * 3600,  # 2026-10-03T16:00Z
)
ZONES = ("America/New_York", "Europe/London", "Australia/Lord_Howe", "UTC")
CRONS = ("*/5 * * * *", "0,30 * * * *", "*/15 1-3 * * *", "0 2 * * *", "30 1 * * *")


def slots_in(trigger: Trigger, after: float, upto: float) -> list[float]:
    out, t = [], after
    while (slot := next_slot(trigger, t)) is not None and slot <= upto:
        out.append(slot)
        t = slot
    return out


def missed_slots(trigger: Trigger, action: Missed) -> list[float]:
    out = [action.latest]
    while len(out) < action.count:
        before = previous_slot(trigger, out[-1] - 1e-6)
        assert before is not None
        out.append(before)
    return out


@dataclass
class Daemon:
    """The shell, simulated: what it wrote, what it ran, what it was told."""

    specs: dict[str, ScheduleSpec]
    now: float = T0
    store: dict[str, Mark] = field(default_factory=dict)
    machine: Scheduler = field(default_factory=Scheduler)
    runs: dict[str, float] = field(default_factory=dict)  # run id -> when it ends
    fired: list[tuple[str, float | None]] = field(default_factory=list)
    settled: dict[str, set[float]] = field(default_factory=dict)  # not run, but said
    batches: list[list[Action]] = field(default_factory=list)
    up: bool = True
    counting: dict[str, float] = field(default_factory=dict)  # since when, durably

    def start(self) -> None:
        self.machine = Scheduler()
        self.apply(self.machine.handle(Restored(tuple(self.store.values()))))
        self.apply(self.machine.handle(Reloaded(tuple(self.specs.values()), self.now)))
        self.up = True

    def apply(self, actions: list[Action], *, lost: bool = False) -> None:
        """One batch: its marks written at once (or lost with a kill), then its effects."""
        if lost:
            return
        # What the world was before this batch: a kill may yet take it back.
        self.before = (
            dict(self.store),
            len(self.fired),
            {k: set(v) for k, v in self.settled.items()},
            dict(self.runs),
            dict(self.counting),
        )
        for action in actions:
            mark = getattr(action, "mark", None)
            if isinstance(mark, Mark):
                self.store[mark.key] = mark
            if isinstance(action, Forget):
                self.store.pop(action.key, None)
            if isinstance(action, Settled) and action.mark.last_slot is not None:
                self.counting.setdefault(action.mark.key, action.mark.last_slot)
        self.batches.append(actions)
        for action in actions:
            if isinstance(action, Fire):
                self.fired.append((action.spec.key, action.slot))
                self.runs[action.run_id] = self.now + self.duration(action)
            elif isinstance(action, Skipped | Cancelled):
                self.settled.setdefault(action.mark.key, set()).add(action.slot)
            elif isinstance(action, Missed):
                said = missed_slots(action.spec.trigger, action)
                self.settled.setdefault(action.spec.key, set()).update(said)
            elif isinstance(action, Interrupted) and action.slot is not None:
                self.settled.setdefault(action.key, set()).add(action.slot)

    durations: list[float] = field(default_factory=lambda: [5.0])

    def duration(self, action: Fire) -> float:
        self.durations.append(self.durations.pop(0))
        return self.durations[-1]

    def step(self, until: float) -> bool:
        """Advance to the next thing that happens before `until`: a run ending or a
        deadline. False when nothing does."""
        ends = min(self.runs.values(), default=float("inf"))
        deadline = self.machine.next_deadline()
        nxt = min(ends, deadline)
        if nxt > until:
            self.now = until
            return False
        self.now = max(self.now, nxt)
        for run_id, end in sorted(self.runs.items(), key=lambda kv: kv[1]):
            if end <= self.now:
                del self.runs[run_id]
                self.apply(self.machine.handle(FireEnded(run_id, self.now)))
        self.apply(self.machine.handle(Tick(self.now)))
        return True

    def run_until(self, until: float) -> None:
        while self.step(until):
            pass

    before: (
        tuple[dict[str, Mark], int, dict[str, set[float]], dict[str, float], dict[str, float]]
        | None
    ) = None

    def lose_last_batch(self) -> None:
        """The kill came before the last batch's marks reached the store: nothing of it
        happened (the shell writes the marks before it acts on them)."""
        if self.before is not None:
            store, fired, settled, runs, counting = self.before
            self.store, self.settled, self.runs, self.counting = store, settled, runs, counting
            del self.fired[fired:]

    def kill(self, downtime: float) -> None:
        self.runs.clear()  # its turns die with it
        self.now += downtime
        self.start()


def every(key: str, interval: float, **kw: object) -> ScheduleSpec:
    agent, name = key.split(".")
    return ScheduleSpec(agent, name, Every(interval), text="t", **kw)  # type: ignore[arg-type]


def cron(key: str, expr: str, zone: str, **kw: object) -> ScheduleSpec:
    agent, name = key.split(".")
    return ScheduleSpec(agent, name, Cron(expr, zone), text="t", **kw)  # type: ignore[arg-type]


triggers = st.one_of(
    st.sampled_from([60.0, 90.0, 300.0, 900.0, 3600.0]).map(Every),
    st.tuples(st.sampled_from(CRONS), st.sampled_from(ZONES)).map(lambda p: Cron(*p)),
)
specs = st.builds(
    lambda i, trigger, overlap, catch_up, jitter: ScheduleSpec(
        "a", f"s{i}", trigger, "t", overlap=overlap, catch_up=catch_up, jitter=jitter
    ),
    st.integers(0, 3),
    triggers,
    st.sampled_from(["skip", "queue"]),
    st.sampled_from(["none", "latest"]),
    st.sampled_from([0.0, 0.0, 10.0, 45.0]),
)
spec_sets = st.lists(specs, min_size=1, max_size=3, unique_by=lambda s: s.key)


def fired_slots(daemon: Daemon) -> list[tuple[str, float]]:
    return [(k, s) for k, s in daemon.fired if s is not None]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=spec_sets, start=st.sampled_from(STARTS))
def test_up_and_quick_every_slot_runs_once_across_dst(
    specs: list[ScheduleSpec], start: float
) -> None:
    daemon = Daemon({s.key: s for s in specs}, now=start, durations=[1.0])
    daemon.start()
    horizon = start + 14 * 3600
    daemon.run_until(horizon)
    for spec in specs:
        expected = slots_in(spec.trigger, start, horizon - GRACE_SECS - spec.jitter)
        got = sorted(s for k, s in fired_slots(daemon) if k == spec.key)
        assert got[: len(expected)] == expected
        assert not daemon.settled.get(spec.key), "nothing skipped or missed"
    assert len(fired_slots(daemon)) == len(set(fired_slots(daemon)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=spec_sets,
    durations=st.lists(st.sampled_from([1.0, 30.0, 100.0, 700.0, 4000.0]), min_size=1),
    plan=st.lists(
        st.tuples(
            st.floats(60, 3 * 3600),  # running time before the kill
            st.floats(0, 5 * 3600),  # downtime
            st.booleans(),  # the last batch was lost with it
        ),
        max_size=5,
    ),
)
def test_kills_restarts_and_overlaps_never_run_a_slot_twice_nor_lose_one(
    specs: list[ScheduleSpec],
    durations: list[float],
    plan: list[tuple[float, float, bool]],
) -> None:
    daemon = Daemon({s.key: s for s in specs}, durations=list(durations))
    daemon.start()
    for running, downtime, lose_last in plan:
        daemon.run_until(daemon.now + running)
        if lose_last:
            daemon.lose_last_batch()
        daemon.kill(downtime)
    horizon = daemon.now + 3 * 3600
    daemon.run_until(horizon)

    fired = fired_slots(daemon)
    assert len(fired) == len(set(fired)), "a slot ran twice"
    for spec in specs:
        ran = {s for k, s in fired if k == spec.key}
        said = daemon.settled.get(spec.key, set())
        # Every slot from the start to well before the end was run or spoken of; a slot
        # still queued or not yet due at the end is the only exception.
        limit = horizon - GRACE_SECS - spec.jitter - 5000
        # It counts from the moment that reached the store (a kill before it: the restart).
        for slot in slots_in(spec.trigger, daemon.counting[spec.key], limit):
            assert slot in ran or slot in said, f"{spec.key}: slot {slot} passed unsaid"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=spec_sets, downtime=st.floats(120, 6 * 3600), up=st.floats(60, 7200))
def test_catch_up_latest_runs_the_latest_missed_slot_once(
    specs: list[ScheduleSpec], downtime: float, up: float
) -> None:
    specs = [replace(s, catch_up="latest", overlap="skip") for s in specs]
    daemon = Daemon({s.key: s for s in specs}, durations=[1.0])
    daemon.start()
    daemon.run_until(T0 + up)
    before = len(daemon.batches)
    daemon.kill(downtime)
    restart = daemon.now
    daemon.step(restart)  # the first tick after the restart
    first = [a for batch in daemon.batches[before:] for a in batch]
    for spec in specs:
        mark = daemon.store[spec.key]
        passed = slots_in(spec.trigger, T0 + up, restart - GRACE_SECS - spec.jitter)
        if passed:
            runs = [a for a in first if isinstance(a, Fire) and a.spec.key == spec.key]
            assert runs, f"{spec.key}: nothing caught up after {len(passed)} slots passed"
            assert runs[0].slot is not None and runs[0].slot >= passed[-1]
        assert mark.running is None or mark.running.slot is not None
    assert len(fired_slots(daemon)) == len(set(fired_slots(daemon)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=spec_sets,
    changes=st.lists(
        st.tuples(st.floats(30, 7200), st.integers(0, 5), specs), min_size=1, max_size=6
    ),
    durations=st.lists(st.sampled_from([1.0, 200.0, 4000.0]), min_size=1),
)
def test_reloads_pauses_and_runs_now_never_run_a_slot_twice(
    specs: list[ScheduleSpec],
    changes: list[tuple[float, int, ScheduleSpec]],
    durations: list[float],
) -> None:
    daemon = Daemon({s.key: s for s in specs}, durations=list(durations))
    daemon.start()
    for wait, what, spec in changes:
        daemon.run_until(daemon.now + wait)
        m = daemon.machine
        if what == 0:  # add or change one
            daemon.specs[spec.key] = spec
        elif what == 1 and daemon.specs:  # remove one
            daemon.specs.pop(sorted(daemon.specs)[0])
        elif what == 2:
            daemon.apply(m.handle(Pause(spec.key)))
        elif what == 3:
            daemon.apply(m.handle(Resume(spec.key, daemon.now)))
        elif what == 4:
            daemon.apply(m.handle(RunNow(spec.key, daemon.now)))
        else:
            daemon.kill(wait)
            continue
        daemon.apply(m.handle(Reloaded(tuple(daemon.specs.values()), daemon.now)))
    daemon.run_until(daemon.now + 4 * 3600)
    fired = fired_slots(daemon)
    assert len(fired) == len(set(fired)), "a slot ran twice"
    for key in daemon.store:
        assert key in daemon.specs or any(k == key for k in daemon.machine.running().values()), (
            f"{key}: a mark kept for a schedule that is gone"
        )


# --------------------------------------------------------------------------- examples


def test_a_new_schedule_counts_from_now_and_says_so() -> None:
    machine = Scheduler()
    actions = machine.handle(Reloaded((every("a.s", 60),), T0 + 30))
    assert actions == [Settled(Mark("a.s", T0 + 30))]
    assert machine.next_deadline() == T0 + 60


def test_a_fire_is_recorded_in_its_mark_before_anything_else() -> None:
    machine = Scheduler()
    machine.handle(Reloaded((every("a.s", 60),), T0))
    (fire,) = machine.handle(Tick(T0 + 60))
    assert isinstance(fire, Fire) and fire.slot == T0 + 60 and not fire.late
    assert fire.mark.running is not None and fire.mark.running.run_id == fire.run_id
    assert fire.mark.last_slot == T0 + 60
    assert fire.run_id == "a.s@2026-03-07T16:01:00Z"
    (ended,) = machine.handle(FireEnded(fire.run_id, T0 + 61))
    assert ended == Ended("a.s", fire.run_id, Mark("a.s", T0 + 60))


def test_overlap_skip_and_queue() -> None:
    machine = Scheduler()
    machine.handle(Reloaded((every("a.skip", 60), every("a.queue", 60, overlap="queue")), T0))
    fires = machine.handle(Tick(T0 + 60))
    assert [type(a) for a in fires] == [Fire, Fire]
    second = machine.handle(Tick(T0 + 120))
    assert isinstance(second[0], Skipped) and second[0].reason == "overlap"
    assert isinstance(second[1], Queued) and second[1].mark.queued == T0 + 120
    third = machine.handle(Tick(T0 + 180))
    assert [a.reason for a in third if isinstance(a, Skipped)] == ["overlap", "queue_full"]
    queue_run = next(a for a in fires if a.spec.name == "queue")
    after = machine.handle(FireEnded(queue_run.run_id, T0 + 190))
    assert isinstance(after[1], Fire) and after[1].slot == T0 + 120


def test_a_restart_reports_the_run_it_interrupted_and_does_not_repeat_it() -> None:
    machine = Scheduler()
    machine.handle(Reloaded((every("a.s", 60),), T0))
    (fire,) = machine.handle(Tick(T0 + 60))
    after = Scheduler()
    (interrupted,) = after.handle(Restored((fire.mark,)))
    assert interrupted == Interrupted("a.s", fire.run_id, T0 + 60, Mark("a.s", T0 + 60))
    assert after.handle(Reloaded((every("a.s", 60),), T0 + 70)) == []
    assert after.next_deadline() == T0 + 120


def test_catch_up_none_misses_what_passed_while_down() -> None:
    after = Scheduler()
    after.handle(Restored((Mark("a.s", T0 + 60),)))
    after.handle(Reloaded((every("a.s", 600),), T0 + 3100))
    (missed,) = after.handle(Tick(T0 + 3100))
    assert isinstance(missed, Missed) and missed.count == 5 and missed.reason == "down"
    assert missed.latest == T0 + 3000


def test_catch_up_latest_fires_the_latest_late() -> None:
    after = Scheduler()
    after.handle(Restored((Mark("a.s", T0 + 60),)))
    after.handle(Reloaded((every("a.s", 600, catch_up="latest"),), T0 + 3100))
    missed, fire = after.handle(Tick(T0 + 3100))
    assert isinstance(missed, Missed) and missed.count == 4
    assert isinstance(fire, Fire) and fire.late and fire.slot == T0 + 3000


def test_removing_a_schedule_cancels_its_queued_run_and_forgets_it_after_the_run() -> None:
    machine = Scheduler()
    spec = every("a.q", 60, overlap="queue")
    machine.handle(Reloaded((spec,), T0))
    (fire,) = machine.handle(Tick(T0 + 60))
    machine.handle(Tick(T0 + 120))
    (cancelled,) = machine.handle(Reloaded((), T0 + 130))
    assert isinstance(cancelled, Cancelled) and cancelled.reason == "removed"
    assert machine.handle(FireEnded(fire.run_id, T0 + 140))[-1] == Forget("a.q", None)
    assert machine.next_deadline() == float("inf")


def test_a_changed_trigger_takes_effect_at_its_next_slot() -> None:
    machine = Scheduler()
    machine.handle(Reloaded((every("a.s", 3600),), T0))
    machine.handle(Reloaded((every("a.s", 60),), T0 + 10))
    assert machine.next_deadline() == next_slot(Every(60), T0 + 10)


def test_pause_resume_and_run_now() -> None:
    machine = Scheduler()
    machine.handle(Reloaded((every("a.s", 60),), T0))
    (settled,) = machine.handle(Pause("a.s"))
    assert isinstance(settled, Settled) and settled.mark.paused
    assert machine.next_deadline() == float("inf")
    assert machine.handle(Tick(T0 + 600)) == []
    machine.handle(Resume("a.s", T0 + 610))
    assert machine.next_deadline() == T0 + 660
    (fire,) = machine.handle(RunNow("a.s", T0 + 611))
    assert isinstance(fire, Fire) and fire.slot is None
    assert machine.handle(RunNow("a.s", T0 + 612)) == [Refused("a.s", "schedule_running")]
    assert machine.handle(RunNow("a.nope", T0)) == [Refused("a.nope", "unknown_schedule")]


def test_a_one_shot_reminder_is_forgotten_after_its_run() -> None:
    machine = Scheduler()
    spec = ScheduleSpec("a", "reminder-1", Once(T0 + 100), "t", kind="reminder")
    machine.handle(Reloaded((spec,), T0))
    (fire,) = machine.handle(Tick(T0 + 100))
    assert machine.handle(FireEnded(fire.run_id, T0 + 101))[-1] == Forget("a.reminder-1", spec)


def test_a_one_shot_reminder_missed_while_down_is_forgotten() -> None:
    machine = Scheduler()
    spec = ScheduleSpec("a", "reminder-1", Once(T0 + 100), "t", kind="reminder")
    machine.handle(Restored((Mark("a.reminder-1", T0),)))
    machine.handle(Reloaded((spec,), T0 + 1000))
    missed, forget = machine.handle(Tick(T0 + 1000))
    assert isinstance(missed, Missed) and isinstance(forget, Forget)


def test_a_one_shot_reminder_whose_run_a_kill_cut_is_reported_and_forgotten() -> None:
    machine = Scheduler()
    spec = ScheduleSpec("a", "reminder-1", Once(T0 + 100), "t", kind="reminder")
    cut = Mark("a.reminder-1", T0 + 100, running=Running("r", T0 + 100, T0 + 100))
    (interrupted,) = machine.handle(Restored((cut,)))
    assert isinstance(interrupted, Interrupted)
    assert machine.handle(Reloaded((spec,), T0 + 200)) == [Forget("a.reminder-1", spec)]
    assert machine.specs() == []


def test_a_reminder_first_seen_after_its_time_still_runs_once() -> None:
    """A reminder 'in 1s' reaches the scheduler after its write to the store (a synced
    LMDB write, a thread hop): on a busy machine that can be after its time. It counts
    from when it was made, so it runs (late within the grace: on time), not never."""
    machine = Scheduler()
    spec = ScheduleSpec("a", "reminder-1", Once(T0 + 1), "t", kind="reminder", created_at=T0)
    machine.handle(Reloaded((spec,), T0 + 3))
    (fire,) = machine.handle(Tick(T0 + 3))
    assert isinstance(fire, Fire) and fire.slot == T0 + 1 and not fire.late


@pytest.mark.parametrize("late", [30.0, 61.0])
def test_a_late_tick_within_grace_is_on_time(late: float) -> None:
    machine = Scheduler()
    machine.handle(Reloaded((every("a.s", 3600),), T0))
    actions = machine.handle(Tick(next_slot(Every(3600), T0) + late))  # type: ignore[operator]
    assert isinstance(actions[0], Fire if late <= GRACE_SECS else Missed)
