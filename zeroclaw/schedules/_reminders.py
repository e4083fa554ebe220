"""Agents' own reminders (issue 28): the daemon's side of `schedule_create`, `schedule_list`
and `schedule_delete`.

`admit_reminder` is the decision, pure: the agent's risk profile must grant `reminders`;
the turn the request names must be one the daemon opened on that agent, for the operator
or an outside sender (never a peer's question nor a schedule's own run: a schedule does
not make schedules); within the agent's bounds (how many it holds, how often one may run);
delivered to `log`, or to a channel the agent binds, and an outside sender's only to the
channel it wrote on; and under a supervised profile, only with the yes the daemon saw
given to that turn's question (ADR 0052). `ReminderService` is the bus service around it.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec
import trio

from .._ops import OpTable
from ..bus import Origin, Request, Response, answer, refusal, serve_op
from ..config import Config, ReminderToolName, check_cron, delivery_problem, parse_duration
from ..turns import (
    MAX_REMINDER_TEXT,
    SCHEDULE_CREATE,
    SCHEDULE_DELETE,
    SCHEDULE_LIST,
    SCHEDULE_OPERATIONS,
    SCHEDULE_SERVICE,
    ApprovalLedger,
    ReminderCreate,
    ReminderDelete,
    ReminderDeleted,
    ReminderInfo,
    ReminderList,
    ReminderListCall,
    ReminderMade,
    reminder_approval_question,
)
from ._service import describe
from ._spec import REMINDER_PREFIX, ScheduleSpec
from ._triggers import Cron, Every, Once, Trigger, next_slot

log = logging.getLogger("zeroclaw.schedules")

MAX_DELAY_SECS = 366 * 86_400
CRON_SPACING_LOOKAHEAD = 64  # slots of a reminder's cron checked against min_interval
# The origins whose turns may make reminders: the operator and an outside sender.
MAKERS = frozenset({"operator", "channel"})


@dataclass(frozen=True)
class Refusal:
    code: str  # a ReminderRefusalCode, approval_denied or bad_arguments
    detail: str


@dataclass(frozen=True)
class Admitted:
    """What the reminder will be: its trigger and where it delivers."""

    trigger: Trigger
    deliver_to: str


def admit_reminder(
    config: Config,
    agent: str,
    origin: Origin | None,
    call: ReminderCreate,
    *,
    now: float,
    held: Sequence[str],
    approved: Callable[[str], bool],
    granted: Collection[str] | None,
) -> Admitted | Refusal:
    """May `agent`, in a turn of `origin`, make this reminder? `held`: who made each
    reminder it holds (`Origin.who`). `approved(question)` takes the daemon's record of a
    yes to that question. `granted`: the tools the daemon grants that turn (None: all)."""
    refused = may_use(config, agent, origin, granted, "schedule_create")
    if refused is not None:
        return refused
    assert origin is not None
    entry = config.agents[agent]
    profile = config.risk_profiles[entry.risk_profile or ""]
    grant = profile.reminders
    assert grant is not None
    if not call.text.strip() or len(call.text) > MAX_REMINDER_TEXT:
        return Refusal("bad_arguments", f"a reminder's text is 1 to {MAX_REMINDER_TEXT} characters")
    if len(held) >= grant.max_per_agent:
        return Refusal(
            "reminder_limit",
            f"agent {agent} holds {len(held)} reminders, its limit; delete one first",
        )
    if origin.kind == "channel":
        here = sum(1 for who in held if who.partition(":")[0] == origin.channel)
        if here >= grant.max_per_channel:
            return Refusal(
                "reminder_limit",
                f"the senders of {origin.channel} hold {here} of agent {agent}'s reminders, "
                "their limit; delete one first",
            )
    trigger = _trigger(call, now, grant.min_interval)
    if isinstance(trigger, Refusal):
        return trigger
    target = call.deliver_to
    if target is None:  # where the message came from, if a reply can go out there
        own = origin.channel
        target = (
            own
            if origin.kind == "channel" and delivery_problem(config, agent, own) is None
            else "log"
        )
    elif target != "log":
        problem = delivery_problem(config, agent, target)
        if problem is not None:
            return Refusal("reminder_not_deliverable", problem)
        if origin.kind == "channel" and target != origin.channel:
            return Refusal(
                "reminder_not_deliverable",
                f"a reminder made on {origin.channel} delivers there or to 'log', not {target}",
            )
    asks = profile.level == "supervised" and profile.require_approval_for_medium_risk
    if asks and not approved(reminder_approval_question(call)):
        return Refusal("approval_denied", "nobody approved this reminder in this turn")
    return Admitted(trigger, target)


def may_use(
    config: Config,
    agent: str,
    origin: Origin | None,
    granted: Collection[str] | None,
    tool: ReminderToolName,
) -> Refusal | None:
    """The gate of every reminder request: the profile's grant, a turn that may make one,
    and that turn granted the tool by the daemon (an agent's word that it may is never
    read: ADR 0052)."""
    entry = config.agents.get(agent)
    profile = None if entry is None else config.risk_profiles.get(entry.risk_profile or "")
    if profile is None or profile.reminders is None:
        return Refusal(
            "reminder_not_allowed", f"agent {agent}'s risk profile does not grant reminders"
        )
    if origin is None or origin.kind not in MAKERS:
        return Refusal(
            "reminder_not_allowed",
            "reminders are made in the operator's or an outside sender's turn, not in a "
            "peer's question nor a schedule's run",
        )
    if granted is not None and tool not in granted:
        return Refusal("reminder_not_allowed", f"this turn is not granted {tool}")
    return None


def _trigger(call: ReminderCreate, now: float, floor: float) -> Trigger | Refusal:
    given = [x for x in (call.after, call.every, call.cron) if x is not None]
    if len(given) != 1:
        return Refusal("bad_arguments", "give one of after, every or cron")
    if call.cron is not None:
        problem = check_cron(call.cron, call.timezone)
        if problem is not None:
            return Refusal("bad_arguments", problem)
        trigger: Trigger = Cron(call.cron, call.timezone)
        slots = [now]
        for _ in range(CRON_SPACING_LOOKAHEAD):
            slot = next_slot(trigger, slots[-1])
            if slot is None:
                break
            slots.append(slot)
        # the first gap is from now: only the gaps between its slots count
        spacing = min((b - a for a, b in itertools.pairwise(slots[1:])), default=floor)
        if spacing < floor:
            return _too_frequent(spacing, floor)
        return trigger
    raw = call.after if call.after is not None else call.every
    assert raw is not None
    try:
        secs = parse_duration(raw)
    except ValueError as exc:
        return Refusal("bad_arguments", str(exc))
    if not isinstance(secs, float) or not 1 <= secs <= MAX_DELAY_SECS:
        return Refusal("bad_arguments", f"a duration from 1s to {MAX_DELAY_SECS // 86400} days")
    if call.after is not None:
        return Once(now + secs)
    if secs < floor:
        return _too_frequent(secs, floor)
    return Every(secs, now)


def _too_frequent(secs: float, floor: float) -> Refusal:
    return Refusal(
        "reminder_too_frequent",
        f"runs {secs:g}s apart; this agent's reminders run at most every {floor:g}s",
    )


def reminder_info(spec: ScheduleSpec, next_fire: float | None) -> ReminderInfo:
    """A schedule as an agent's schedule_list shows it."""
    return ReminderInfo(
        spec.name,
        describe(spec),
        spec.deliver_to,
        spec.kind,
        next_fire,
        spec.text,
        spec.created_by or "",
    )


class ReminderService:
    """The `schedule` bus service. `turn_of(turn_id)`: the agent and origin of a turn the
    daemon opened (None: not one). `make` writes a new reminder and schedules it; `drop`
    deletes one; `listing(agent)` the agent's schedules with their next times."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        turn_of: Callable[[str], tuple[str, Origin] | None],
        grant: Callable[[str, Origin], Collection[str] | None],
        approvals: ApprovalLedger,
        schedules: ReminderHost,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._turn_of = turn_of
        self._grant = grant
        self._approvals = approvals
        self._schedules = schedules
        self._clock = clock
        self.refused: dict[str, int] = {}
        # One create at a time, from the count of what is held to the reminder kept: else
        # requests sent at once all count the same few held and all pass the limit.
        self._creating = trio.Lock()

    def _origin(self, agent: str, turn: str | None) -> Origin | None:
        found = None if turn is None else self._turn_of(turn)
        if found is None or found[0] != agent:
            return None  # not a turn of this agent's the daemon opened
        return found[1]

    def _granted(self, agent: str, origin: Origin | None) -> Collection[str] | None:
        return () if origin is None else self._grant(agent, origin)

    async def serve(self, alias: str, request: Request) -> Response:
        """`SCHEDULE_SERVICE` requests; `alias` is the router's identity of the agent."""
        return await serve_op(
            _TABLE, (self, alias, request), request, log=log, service="schedule", sender=alias
        )

    async def _answer(self, request: Request, made: Awaitable[msgspec.Struct]) -> Response:
        try:
            return answer(request, await made)
        except _Refused as exc:
            code = exc.refusal.code
            self.refused[code] = self.refused.get(code, 0) + 1
            return refusal(request, code, exc.refusal.detail)

    async def create(self, agent: str, call: ReminderCreate) -> ReminderMade:
        async with self._creating:
            return await self._create(agent, call)

    async def _create(self, agent: str, call: ReminderCreate) -> ReminderMade:
        origin = self._origin(agent, call.turn)
        now = self._clock()
        held = [s.created_by or "" for s in self._schedules.reminders() if s.agent == agent]
        decided = admit_reminder(
            self._config(),
            agent,
            origin,
            call,
            now=now,
            held=held,
            approved=lambda what: self._approvals.take(agent, call.turn, what),
            granted=self._granted(agent, origin),
        )
        if isinstance(decided, Refusal):
            raise _Refused(decided)
        assert origin is not None
        number = await self._schedules.next_number(agent)
        spec = ScheduleSpec(
            agent,
            f"{REMINDER_PREFIX}{number}",
            decided.trigger,
            call.text,
            kind="reminder",
            deliver_to=decided.deliver_to,
            created_by=origin.who,
            created_at=now,
        )
        await self._schedules.add_reminder(spec)
        return ReminderMade(reminder_info(spec, self._schedules.next_fire(spec.key)))

    async def listing(self, agent: str, call: ReminderListCall) -> ReminderList:
        origin = self._origin(agent, call.turn)
        granted = self._granted(agent, origin)
        refused = may_use(self._config(), agent, origin, granted, "schedule_list")
        if refused is not None:
            raise _Refused(refused)
        assert origin is not None
        shown = []
        for spec in self._schedules.schedules_of(agent):
            mine = spec.kind == "reminder" and spec.created_by == origin.who
            if not (mine or origin.is_operator):
                continue  # another origin's reminder, the operator's schedules: not a sender's
            shown.append(reminder_info(spec, self._schedules.next_fire(spec.key)))
        return ReminderList(tuple(shown))

    async def delete(self, agent: str, call: ReminderDelete) -> ReminderDeleted:
        origin = self._origin(agent, call.turn)
        granted = self._granted(agent, origin)
        refused = may_use(self._config(), agent, origin, granted, "schedule_delete")
        if refused is not None:
            raise _Refused(refused)
        assert origin is not None
        key = f"{agent}.{call.name}"
        spec = next((s for s in self._schedules.reminders() if s.key == key), None)
        if spec is None or not (origin.is_operator or spec.created_by == origin.who):
            raise _Refused(
                Refusal("unknown_reminder", f"no reminder {call.name[:64]!r} of yours to delete")
            )
        await self._schedules.drop_reminder(key)
        return ReminderDeleted(call.name)


class ReminderHost(Protocol):
    """What the reminder service needs of the schedule service (which is it)."""

    def reminders(self) -> list[ScheduleSpec]: ...

    def schedules_of(self, agent: str) -> list[ScheduleSpec]: ...

    def next_fire(self, key: str) -> float | None: ...

    async def next_number(self, agent: str) -> int: ...

    async def add_reminder(self, spec: ScheduleSpec) -> None: ...

    async def drop_reminder(self, key: str) -> None: ...


class _Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.detail)
        self.refusal = refusal


_Ctx = tuple[ReminderService, str, Request]  # the service, the agent, the request

_TABLE: OpTable[_Ctx, Awaitable[Response]] = (
    OpTable[_Ctx, Awaitable[Response]](SCHEDULE_SERVICE)
    .on(SCHEDULE_CREATE, lambda c, call: c[0]._answer(c[2], c[0].create(c[1], call)))
    .on(SCHEDULE_LIST, lambda c, call: c[0]._answer(c[2], c[0].listing(c[1], call)))
    .on(SCHEDULE_DELETE, lambda c, call: c[0]._answer(c[2], c[0].delete(c[1], call)))
    .require(SCHEDULE_OPERATIONS)
)
