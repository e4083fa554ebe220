"""The schedule service: the scheduler's thin trio shell in the daemon.

It sleeps until the scheduler's next deadline (never longer than MAX_SLEEP_SECS, so a
wall clock stepped by NTP is noticed), ticks it, writes every mark of the answer in one
durable transaction, and only then acts: a fire's turn opens through the channel host with
the schedule's origin (an on-demand agent is started for it by the router, and idles out
after), its reply goes to `deliver_to`, and its outcome is written with the mark that ends
it. A reload, a reminder made or deleted, and the operator's commands feed it as events.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

import trio

from .._terminal import terminal_safe
from ..bus import Origin, PeerPolicy
from ..channels import (
    ChannelAnswer,
    ChannelFailure,
    ChannelHost,
    ChannelRefused,
    Outcome,
    Scheduled,
)
from ..config import HEARTBEAT_SCHEDULE, Config, delivery_problem
from ..events import (
    EventSink,
    ReloadApplied,
    ScheduleDelivered,
    ScheduleFailed,
    ScheduleFired,
    ScheduleMissed,
    ScheduleSkipped,
    Subscription,
)
from ._heartbeat import Unreadable, heartbeat_text, open_items, read_heartbeat
from ._machine import (
    Action,
    Cancelled,
    Event,
    Fire,
    FireEnded,
    Forget,
    Interrupted,
    Missed,
    Refused,
    Reloaded,
    Restored,
    Scheduler,
    Skipped,
    Tick,
)
from ._spec import Mark, RunSummary, ScheduleSpec, ScheduleView
from ._store import Batch, ScheduleStore, ScheduleStoreError
from ._triggers import Cron, Every

log = logging.getLogger("zeroclaw.schedules")

MAX_SLEEP_SECS = 60.0  # the longest sleep: a stepped wall clock is noticed within it
# The first tick waits for the daemon's READY=1 (its agents up), or this long at most.
FIRST_TICK_AFTER_SECS = 30.0
LOG_REPLY_CHARS = 2000  # of a reply delivered to `log`

# Where a run's outcome goes: a channel key and the outcome -> None once delivered, else why.
Push = Callable[[str, Scheduled], Awaitable[str | None]]


def config_specs(config: Config) -> list[ScheduleSpec]:
    """Every configured schedule and heartbeat of the enabled agents."""
    specs = []
    for alias, agent in sorted(config.agents.items()):
        if not agent.enabled:
            continue
        for name, entry in sorted(agent.schedules.items()):
            trigger = (
                Cron(entry.cron, entry.timezone)
                if entry.cron is not None
                else Every(entry.every or 1.0)
            )
            specs.append(
                ScheduleSpec(
                    alias,
                    name,
                    trigger,
                    entry.text,
                    session=entry.session,
                    tools=entry.tools,
                    deliver_to=entry.deliver_to,
                    overlap=entry.overlap,
                    catch_up=entry.catch_up,
                    jitter=entry.jitter,
                    enabled=entry.enabled,
                    timeout=entry.timeout,
                )
            )
        beat = agent.heartbeat
        if beat is not None:
            specs.append(
                ScheduleSpec(
                    alias,
                    HEARTBEAT_SCHEDULE,
                    Every(beat.every),
                    kind="heartbeat",
                    session=beat.session,
                    tools=beat.tools,
                    deliver_to=beat.deliver_to,
                    jitter=beat.jitter,
                    enabled=beat.enabled,
                    timeout=beat.timeout,
                )
            )
    return specs


def _maker(created_by: str | None) -> Origin | None:
    """The outside sender who made a reminder (None: the operator, or not known)."""
    channel, colon, sender = (created_by or "").partition(":")
    if not colon:
        return None
    try:
        return Origin.from_sender(channel, sender)
    except ValueError:  # not a channel a sender writes on
        return None


def may_remind(config: Config, agent: str, maker: Origin | None, policy: PeerPolicy | None) -> bool:
    """Whether the reminders of `agent` made by `maker` (None: the operator) may still run:
    its risk profile grants reminders and, for an outside sender, its groups still give it
    schedule_create."""
    entry = config.agents[agent]
    profile = config.risk_profiles.get(entry.risk_profile or "")
    if profile is None or profile.reminders is None:
        return False
    if maker is None or policy is None:
        return True
    names = policy.origin_grant(agent, maker).tool_names()
    return names is None or "schedule_create" in names  # the tool that made it


def _heartbeat_items(workspace: Path) -> list[str] | Unreadable:
    found = read_heartbeat(workspace)
    return found if isinstance(found, Unreadable) else open_items(found or "")


def describe(spec: ScheduleSpec) -> str:
    trigger = spec.trigger
    if isinstance(trigger, Cron):
        return f"cron {trigger.expr} in {trigger.timezone}"
    if isinstance(trigger, Every):
        return f"every {trigger.interval:g}s"
    return f"once at {trigger.at:.0f}"


def failure_code(outcome: Outcome) -> str | None:
    """None when the turn ended with a reply; else the stable code of how it did not."""
    if isinstance(outcome, ChannelAnswer):
        if outcome.cancelled:
            return "cancelled"
        return "turn_error" if outcome.error is not None else None
    if isinstance(outcome, ChannelRefused):
        return "refused"
    return outcome.code


def _detail(outcome: Outcome) -> str:
    if isinstance(outcome, ChannelAnswer):
        return outcome.error or ""
    return outcome.detail


class ScheduleService:
    """`name` and `run(task_status=)`: a service of the daemon's table (ADR 0050)."""

    name = "schedules"

    def __init__(
        self,
        store: ScheduleStore,
        *,
        config: Callable[[], Config],
        host: ChannelHost,
        push: Push,
        events: EventSink,
        workspace: Callable[[str], Path],
        clock: Callable[[], float] = time.time,
        max_sleep: float = MAX_SLEEP_SECS,
        ready: trio.Event | None = None,
    ) -> None:
        """`ready`: set once the daemon's agents are up; the first run waits for it (a
        run while an `always` agent still starts would be refused)."""
        self.store = store
        self.machine = Scheduler()
        self._config = config
        self._host = host
        self._push = push
        self._events = events
        self._workspace = workspace
        self._clock = clock
        self._max_sleep = max_sleep
        self._ready = ready
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._reminders: dict[str, ScheduleSpec] = {}
        self._lock = trio.Lock()  # one handle-and-write at a time: marks land in order
        self.last_runs: dict[str, RunSummary] = {}
        # (agent, outcome) -> runs: fired, delivered, failed codes, skipped, missed
        self.counts: Counter[tuple[str, str]] = Counter()
        self.wakes = 0  # how often the loop woke (the bench reads it)
        # Subscribed now, not when `run` starts: no reload in between is missed.
        self._reloads = events.subscribe(kinds=(ReloadApplied,))

    # --- the service --------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        loaded = await trio.to_thread.run_sync(self.store.load)
        self._reminders = {spec.key: spec for spec in loaded.reminders}
        self.last_runs = dict(loaded.runs)
        with self._reloads as reloads:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.handle(Restored(loaded.marks))
                await self.reload()
                nursery.start_soon(self._follow, reloads)
                task_status.started()
                if self._ready is not None:
                    with trio.move_on_after(FIRST_TICK_AFTER_SECS):
                        await self._ready.wait()
                await self._loop()

    async def _follow(self, reloads: Subscription) -> None:
        async for published in reloads:
            if (
                isinstance(published.event, ReloadApplied)
                and published.event.outcome != "reload_failed"
            ):
                await self.reload()

    async def _loop(self) -> None:
        while True:
            # A fresh event before the tick: a wake during it (a run ended, a reload) is
            # kept, and the tick's own answer does not wake the loop again.
            self._wake = trio.Event()
            await self.handle(Tick(self._clock()), wake=False)
            wait = min(self.machine.next_deadline() - self._clock(), self._max_sleep)
            if wait > 0:
                with trio.move_on_after(wait):
                    await self._wake.wait()
            self.wakes += 1

    def specs(self) -> list[ScheduleSpec]:
        """What should be scheduled now: the config's, and the reminders of agents that
        still exist. A reminder whose maker could not make it now (its agent disabled, its
        risk profile without `reminders`, an outside sender no longer granted
        schedule_create) is kept, not run: forgotten, it would be deleted from the store."""
        config = self._config()
        policy: PeerPolicy | None = None
        reminders = []
        for spec in self._reminders.values():
            agent = config.agents.get(spec.agent)
            if agent is None:
                continue  # its agent is gone, and so is it
            maker = _maker(spec.created_by)
            if maker is not None and policy is None:
                policy = PeerPolicy(config)
            allowed = agent.enabled and may_remind(config, spec.agent, maker, policy)
            reminders.append(spec if allowed else replace(spec, enabled=False))
        return config_specs(config) + reminders

    async def reload(self) -> None:
        await self.handle(Reloaded(tuple(self.specs()), self._clock()))

    async def handle(
        self, event: Event, runs: Sequence[tuple[str, RunSummary]] = (), *, wake: bool = True
    ) -> list[Action]:
        """Feed the scheduler one event; write what its answer marks (and `runs`) in one
        durable transaction, then act on it. Returns the answer (a command reads it).
        `wake`: the loop looks at the next deadline again (it may have moved)."""
        async with self._lock:
            actions = self.machine.handle(event)
            await self._write(actions, runs)
        self._act(actions)
        if wake:
            self._wake.set()
        return actions

    async def _write(self, actions: list[Action], runs: Sequence[tuple[str, RunSummary]]) -> None:
        marks: dict[str, Mark] = {}
        forget: list[str] = []
        for action in actions:
            mark = getattr(action, "mark", None)
            if isinstance(mark, Mark):
                marks[mark.key] = mark
            if isinstance(action, Forget):
                marks.pop(action.key, None)
                forget.append(action.key)
        batch = Batch(tuple(marks.values()), tuple(forget), tuple(runs))
        if not (batch.marks or batch.forget or batch.runs):
            return  # an idle tick: no thread, no transaction
        try:
            await trio.to_thread.run_sync(self.store.write, batch)
        except ScheduleStoreError as exc:
            # Nothing of the answer happens: no turn starts unrecorded. Runs it would have
            # fired end at once, failed; the scheduler counts on from there.
            log.error("schedules: %s", exc)
            for action in actions:
                if isinstance(action, Fire):
                    self._failed(action.spec, action.run_id, "store_failed", str(exc))
                    self.machine.handle(FireEnded(action.run_id, self._clock()))
            actions.clear()
            return
        for key, run in runs:
            self.last_runs[key] = run
        for key in forget:
            self.last_runs.pop(key, None)

    def _act(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Fire):
                self._fired(action)
            elif isinstance(action, Skipped):
                self._skipped(action.spec.key, action.reason, action.slot)
            elif isinstance(action, Cancelled):
                self._skipped(action.key, "cancelled", action.slot)
            elif isinstance(action, Missed):
                key = action.spec.key
                self.counts[(action.spec.agent, "missed")] += action.count
                log.warning(
                    "schedule %s: %d run(s) missed (%s), the latest due %s",
                    key,
                    action.count,
                    action.reason,
                    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(action.latest)),
                    extra={"schedule": key, "missed": action.count, "reason": action.reason},
                )
                self._events.publish(
                    ScheduleMissed(key, action.count, action.latest, action.reason)
                )
            elif isinstance(action, Interrupted):
                detail = (
                    "the daemon stopped while it ran; it is not run again (it may have delivered)"
                )
                self._failed_key(action.key, action.run_id, "daemon_restarted", detail, action.slot)
            elif isinstance(action, Forget):
                self._reminders.pop(action.key, None)

    def _fired(self, fire: Fire) -> None:
        spec = fire.spec
        self.counts[(spec.agent, "fired")] += 1
        log.info(
            "schedule %s: run %s%s",
            spec.key,
            fire.run_id,
            " (late: caught up)" if fire.late else "",
            extra={"schedule": spec.key, "run_id": fire.run_id},
        )
        self._events.publish(ScheduleFired(spec.key, fire.run_id, fire.slot, fire.late))
        assert self._nursery is not None
        self._nursery.start_soon(self._run, fire)

    def _skipped(self, key: str, reason: str, slot: float | None) -> None:
        self.counts[(key.partition(".")[0], "skipped")] += 1
        log.info("schedule %s: skipped (%s)", key, reason, extra={"schedule": key})
        self._events.publish(ScheduleSkipped(key, reason, slot))

    def _failed(self, spec: ScheduleSpec, run_id: str, code: str, detail: str) -> None:
        self._failed_key(spec.key, run_id, code, detail, None)

    def _failed_key(
        self, key: str, run_id: str, code: str, detail: str, slot: float | None
    ) -> None:
        self.counts[(key.partition(".")[0], "failed")] += 1
        log.warning(
            "schedule %s: run %s failed (%s): %s",
            key,
            run_id,
            code,
            terminal_safe(detail[:300], one_line=True),
            extra={"schedule": key, "run_id": run_id, "code": code},
        )
        self._events.publish(ScheduleFailed(key, run_id, code, detail[:500]))
        self.last_runs[key] = RunSummary(run_id, code, self._clock(), detail[:500], slot)

    # --- a run ----------------------------------------------------------------------------

    async def _run(self, fire: Fire) -> None:
        spec, started = fire.spec, self._clock()
        try:
            summary = await self._turn_and_delivery(fire)
        except Exception as exc:  # one run's failure must not take the service down
            log.exception("schedule %s: run %s failed in the daemon", spec.key, fire.run_id)
            self._failed(spec, fire.run_id, "internal", type(exc).__name__)
            summary = RunSummary(
                fire.run_id, "internal", self._clock(), type(exc).__name__, fire.slot
            )
        if summary.outcome == "delivered":
            self.counts[(spec.agent, "delivered")] += 1
            self._events.publish(
                ScheduleDelivered(
                    spec.key, fire.run_id, spec.deliver_to, round(self._clock() - started, 6)
                )
            )
        await self.handle(FireEnded(fire.run_id, self._clock()), runs=[(spec.key, summary)])

    async def _turn_and_delivery(self, fire: Fire) -> RunSummary:
        spec, run_id = fire.spec, fire.run_id
        text = spec.text
        if spec.kind == "heartbeat":
            # Read and parsed in a worker thread: the file is the agent's, the loop the daemon's.
            found = await trio.to_thread.run_sync(_heartbeat_items, self._workspace(spec.agent))
            if isinstance(found, Unreadable):
                self._failed(spec, run_id, "nothing_to_read", found.detail)
                return RunSummary(run_id, "nothing_to_read", self._clock(), found.detail, fire.slot)
            items = found
            if not items:
                self._skipped(spec.key, "nothing_open", fire.slot)
                return RunSummary(run_id, "nothing_open", self._clock(), "", fire.slot)
            text = heartbeat_text(items)
        outcome: Outcome = ChannelFailure("timeout", f"the turn took longer than {spec.timeout:g}s")
        # A sender's reminder is a turn that sender caused (its reply goes back to it): it
        # spends the sender's budgets too, else reminders would be a way around them.
        maker = _maker(spec.created_by) if spec.kind == "reminder" else None
        with trio.move_on_after(spec.timeout):
            outcome = await self._host.run_turn(
                spec.agent,
                Origin.schedule(spec.agent, spec.name),
                text,
                session=spec.session,
                budget_origin=maker,
            )
        code = failure_code(outcome)
        not_delivered = await self._deliver(spec, run_id, outcome)
        if code is not None:
            self._failed(spec, run_id, code, _detail(outcome))
            return RunSummary(run_id, code, self._clock(), _detail(outcome)[:500], fire.slot)
        if not_delivered is not None:
            self._failed(spec, run_id, "not_delivered", not_delivered)
            return RunSummary(run_id, "not_delivered", self._clock(), not_delivered, fire.slot)
        return RunSummary(run_id, "delivered", self._clock(), "", fire.slot)

    async def _deliver(self, spec: ScheduleSpec, run_id: str, outcome: Outcome) -> str | None:
        """The outcome to `deliver_to`: None once delivered, else why not. Only to a
        channel the agent binds now (a reload may have unbound it since)."""
        if spec.deliver_to == "log":
            if isinstance(outcome, ChannelAnswer):
                shown = terminal_safe(outcome.reply[:LOG_REPLY_CHARS])
                log.info(
                    "schedule %s: run %s replied: %s",
                    spec.key,
                    run_id,
                    shown,
                    extra={"schedule": spec.key, "run_id": run_id},
                )
            return None
        problem = delivery_problem(self._config(), spec.agent, spec.deliver_to)
        if problem is not None:
            return problem
        return await self._push(spec.deliver_to, Scheduled(spec.key, run_id, outcome))

    # --- agents' reminders (the reminder service's host) ----------------------------------

    def reminders(self) -> list[ScheduleSpec]:
        return list(self._reminders.values())

    def schedules_of(self, agent: str) -> list[ScheduleSpec]:
        return sorted((s for s in self.machine.specs() if s.agent == agent), key=lambda s: s.name)

    def next_fire(self, key: str) -> float | None:
        return self.machine.next_fire(key)

    async def next_number(self, agent: str) -> int:
        return await trio.to_thread.run_sync(self.store.next_reminder_number, agent)

    async def add_reminder(self, spec: ScheduleSpec) -> None:
        """Keep it (durably, before it is scheduled) and schedule it."""
        await trio.to_thread.run_sync(self.store.write, Batch(reminders=(spec,)))
        self._reminders[spec.key] = spec
        log.info(
            "schedule %s: reminder made by %s (%s)",
            spec.key,
            spec.created_by,
            describe(spec),
            extra={"schedule": spec.key},
        )
        await self.reload()

    async def drop_reminder(self, key: str) -> None:
        """Delete it from the store (durably, before it is unscheduled: a reminder deleted
        while its run is in progress must not come back when the daemon dies before that
        run ends) and unschedule it; the scheduler's Forget drops its mark (after the run
        in progress, if one is)."""
        await trio.to_thread.run_sync(self.store.write, Batch(dropped=(key,)))
        self._reminders.pop(key, None)
        await self.reload()

    # --- what the operator sees and asks ---------------------------------------------------

    def now(self) -> float:
        return self._clock()

    def views(self, agent: str | None = None) -> list[ScheduleView]:
        out = []
        for spec in sorted(self.machine.specs(), key=lambda s: (s.agent, s.name)):
            if agent is not None and spec.agent != agent:
                continue
            out.append(self._view(spec))
        return out

    def view(self, key: str) -> ScheduleView | None:
        spec = self.machine.spec(key)
        return None if spec is None else self._view(spec)

    def _view(self, spec: ScheduleSpec) -> ScheduleView:
        mark = self.machine.mark(spec.key) or Mark(spec.key)
        return ScheduleView(
            spec, self.machine.next_fire(spec.key), mark, self.last_runs.get(spec.key)
        )

    def per_agent(self) -> dict[str, int]:
        """How many schedules each agent has."""
        return dict(Counter(spec.agent for spec in self.machine.specs()))

    def next_fires(self) -> dict[str, tuple[str, float]]:
        """Per agent: its schedule due first, and when."""
        best: dict[str, tuple[str, float]] = {}
        for spec in self.machine.specs():
            due = self.machine.next_fire(spec.key)
            if due is None or due == math.inf:
                continue
            if spec.agent not in best or due < best[spec.agent][1]:
                best[spec.agent] = (spec.name, due)
        return best

    async def command(self, event: Event) -> Refused | list[Action]:
        """An operator's run, pause or resume: the refusal, or what it did."""
        actions = await self.handle(event)
        for action in actions:
            if isinstance(action, Refused):
                return action
        return actions
