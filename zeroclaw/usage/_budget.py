"""Budgets: which scopes a turn spends from, what each may spend, and whether a turn may
start or go on. Pure (ADR 0057): the day and the time are given, nothing is read.

A turn of agent A from origin O spends from up to three scopes:

    agent    A as a whole, every origin together     [agents.A.budget]
    origin   O on A (an outside origin on its own)    budget.origins '<ch>:<who>', '<ch>:*', '*'
    channel  every sender of O's channel together     budget.origins '<ch>'

The operator's (and a sub-agent dispatch's) turns spend from the agent scope only. Each
scope is charged every step whether it has a budget or not, so a budget added by a reload
knows the day's spend. `BudgetBook.admit` refuses a turn when any of its scopes has spent
its tokens or cost of the day (a UTC day), or started `turns_per_hour` turns in the last
hour; otherwise the turn counts as started in each scope with a turn limit.
`BudgetBook.exhausted` says whether a running turn must end after its current step.

A turn's spend is known only when its first step is reported, so turns admitted together
would all see the spend of none of them (a flood posted at once, a slow model holding the
first: each admitted against the same spend). So an admitted turn holds, in each of its
budgeted scopes, the least it will spend (`hold`: its message, estimated) until its first
step is charged or it ends (`release`); a turn is refused when the spend and what the
others hold reach a daily limit. One turn alone is admitted as before.

The book is bounded: beyond `max_scopes` scopes the least recently charged outside origin
is forgotten (never an agent or a channel), so outside senders that rotate names cannot grow
the daemon's memory; a sender forgotten so starts its day anew, which is why a channel's
senders together (`'<ch>'`) is the budget that holds against a flood.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from ..bus import SUBAGENT_ORIGIN_CHANNEL, Origin
from ..config import AgentConfig, BudgetKey, BudgetLimits, parse_budget_key
from ..turns import BudgetLimit
from ._prices import saturated, shown, units

HOUR = 3600.0
MAX_SCOPES = 10_000
T = TypeVar("T")

ScopeKind = Literal["agent", "origin", "channel"]


@dataclass(frozen=True, slots=True)
class Scope:
    agent: str
    kind: ScopeKind = "agent"
    who: str = ""  # origin: "webhook.ops:ci-bot", "peer:beta"; channel: "webhook.ops", "peer"

    def describe(self) -> str:
        if self.kind == "agent":
            return f"agent {self.agent}"
        if self.kind == "origin":
            return f"{self.who} on agent {self.agent}"
        return f"every sender of {self.who} together on agent {self.agent}"


@dataclass(frozen=True, slots=True)
class Limits:
    tokens_per_day: int | None = None
    cost_per_day: int | None = None  # pico-units
    turns_per_hour: int | None = None

    @classmethod
    def of(cls, config: BudgetLimits) -> Limits:
        cost = config.cost_per_day
        return cls(
            config.tokens_per_day,
            None if cost is None else units(cost),
            config.turns_per_hour,
        )

    def __bool__(self) -> bool:
        return (self.tokens_per_day, self.cost_per_day, self.turns_per_hour) != (None,) * 3


@dataclass(frozen=True, slots=True)
class Budgeted:
    scope: Scope
    limits: Limits


@dataclass(frozen=True, slots=True)
class OverBudget:
    scope: Scope
    limit: BudgetLimit
    spent: int
    allowed: int
    in_flight: bool = False  # `spent` counts what turns running now hold

    @property
    def detail(self) -> str:
        if self.limit == "cost_per_day":
            amount = f"{shown(self.spent)} of {shown(self.allowed)}"
        else:
            amount = f"{self.spent} of {self.allowed}"
        running = ", the turns running now included" if self.in_flight else ""
        return f"{self.limit} of {self.scope.describe()} spent ({amount}{running})"

    def told_to(self, origin: Origin | None, *, peer: bool = False) -> str:
        """`detail` as `origin`, whose turn it is in the end, is told it. An outside sender
        learns which limit is spent and whose, in its own terms: not the agent's name,
        another sender's key or the amounts (what the operator spends). None: an origin
        the daemon does not know, told as little. `peer`: the refused turn is a peer's
        question, told to the asking agent on that origin's behalf (its model may pass the
        words on): the limit is the peer's. The `budget.exceeded` event has it all."""
        if origin is not None and not origin.is_outside:
            return self.detail
        if peer:
            whose = "the peer's"
        else:
            whose = {"origin": "your", "channel": "this channel's", "agent": "the agent's"}[
                self.scope.kind
            ]
        return f"{whose} {self.limit} budget is spent; try again later"


@dataclass(slots=True)
class Spent:
    tokens: int = 0
    cost: int = 0


def scopes_of(agent: str, who: str) -> tuple[Scope, ...]:
    """The scopes a turn of `agent` from the origin `who` (`Origin.who`: `operator`,
    `webhook.ops:ci-bot`, `peer:beta`, `subagent:alpha`) spends from."""
    channel, colon, _ = who.partition(":")
    if colon and channel != SUBAGENT_ORIGIN_CHANNEL:  # an outside sender, or a peer
        return (Scope(agent), Scope(agent, "origin", who), Scope(agent, "channel", channel))
    return (Scope(agent),)


class Budgets:
    """Every agent's budgets, from the running config, looked up per turn."""

    def __init__(self, agents: Mapping[str, AgentConfig]) -> None:
        self._own = {alias: Limits.of(agent.budget) for alias, agent in agents.items()}
        self._origins: dict[str, dict[BudgetKey, Limits]] = {}
        for alias, agent in agents.items():
            keyed: dict[BudgetKey, Limits] = {}
            for key, limits in agent.budget.origins.items():
                parsed = parse_budget_key(key)
                if isinstance(parsed, BudgetKey):  # the config rules refused the others
                    keyed[parsed] = Limits.of(limits)
            self._origins[alias] = keyed

    def of(self, agent: str, origin: Origin) -> tuple[Budgeted, ...]:
        """The budgets a turn of `agent` from `origin` must keep (scopes without one left
        out)."""
        found: list[Budgeted] = []
        own = self._own.get(agent)
        if own:
            found.append(Budgeted(Scope(agent), own))
        keyed = self._origins.get(agent)
        if keyed and origin.kind in ("channel", "peer", "api") and origin.sender is not None:
            channel, sender = origin.channel, origin.sender
            each = (
                keyed.get(BudgetKey("one", channel, sender))
                or keyed.get(BudgetKey("each", channel))
                or keyed.get(BudgetKey("each", "*"))
            )
            if each:
                found.append(Budgeted(Scope(agent, "origin", origin.who), each))
            together = keyed.get(BudgetKey("together", channel))
            if together:
                found.append(Budgeted(Scope(agent, "channel", channel), together))
        return tuple(found)


class BudgetBook:
    """Today's spend of every scope and the turns each budgeted scope started in the last
    hour."""

    def __init__(self, max_scopes: int = MAX_SCOPES) -> None:
        self.max_scopes = max_scopes
        self.day = ""
        self._spent: OrderedDict[Scope, Spent] = OrderedDict()
        self._turns: OrderedDict[Scope, deque[float]] = OrderedDict()
        # What the turns admitted today and not yet charged hold, by budgeted scope.
        self._held: dict[Scope, Spent] = {}

    def _roll(self, day: str) -> None:
        if day != self.day:  # a new UTC day: every daily limit starts again
            self.day = day
            self._spent.clear()
            self._held.clear()

    def spent(self, scope: Scope, day: str) -> Spent:
        self._roll(day)
        found = self._spent.get(scope)
        return Spent(found.tokens, found.cost) if found is not None else Spent()

    def turns(self, scope: Scope, now: float) -> int:
        """Turns the scope started in the hour up to `now` (counted only while it has a
        turn limit)."""
        window = self._turns.get(scope)
        return 0 if window is None else sum(1 for t in window if t > now - HOUR)

    def admit(
        self, budgets: Sequence[Budgeted], *, now: float, day: str, hold: Spent | None = None
    ) -> OverBudget | None:
        """Why a turn may not start now, or None: it counts as started, and holds `hold`
        in each of its budgeted scopes until `release`."""
        over = self.exhausted(budgets, day, held=True)
        if over is not None:
            return over
        for budgeted in budgets:
            limit = budgeted.limits.turns_per_hour
            if limit is not None:
                started = self.turns(budgeted.scope, now)
                if started >= limit:
                    return OverBudget(budgeted.scope, "turns_per_hour", started, limit)
        for budgeted in budgets:
            limit = budgeted.limits.turns_per_hour
            if limit is not None:
                self._started(budgeted.scope, limit, now)
        if hold is not None and (hold.tokens or hold.cost):
            for budgeted in budgets:
                held = self._held.setdefault(budgeted.scope, Spent())
                held.tokens = saturated(held.tokens + hold.tokens)
                held.cost = saturated(held.cost + hold.cost)
        return None

    def release(self, scopes: Iterable[Scope], hold: Spent, day: str) -> None:
        """A turn's hold ends: its first step was charged, or it ended without one (a
        hold of an earlier day went with that day)."""
        if day != self.day:
            return
        for scope in scopes:
            held = self._held.get(scope)
            if held is None:
                continue
            held.tokens = max(held.tokens - hold.tokens, 0)
            held.cost = max(held.cost - hold.cost, 0)
            if not (held.tokens or held.cost):
                del self._held[scope]

    def exhausted(
        self, budgets: Sequence[Budgeted], day: str, *, held: bool = False
    ) -> OverBudget | None:
        """The first daily limit of these budgets that is spent (a running turn ends);
        `held`: with what the turns in flight hold (a turn that would start)."""
        self._roll(day)
        for budgeted in budgets:
            spent = self._spent.get(budgeted.scope) or Spent()
            holding = self._held.get(budgeted.scope) if held else None
            if holding is not None:
                spent = Spent(
                    saturated(spent.tokens + holding.tokens),
                    saturated(spent.cost + holding.cost),
                )
            limits, scope = budgeted.limits, budgeted.scope
            if limits.tokens_per_day is not None and spent.tokens >= limits.tokens_per_day:
                return OverBudget(
                    scope,
                    "tokens_per_day",
                    spent.tokens,
                    limits.tokens_per_day,
                    holding is not None and holding.tokens > 0,
                )
            if limits.cost_per_day is not None and spent.cost >= limits.cost_per_day:
                return OverBudget(
                    scope,
                    "cost_per_day",
                    spent.cost,
                    limits.cost_per_day,
                    holding is not None and holding.cost > 0,
                )
        return None

    def charge(self, scopes: Iterable[Scope], tokens: int, cost: int, day: str) -> None:
        """A step's tokens and cost, spent from each scope today."""
        self._roll(day)
        for scope in scopes:
            spent = self._spent.pop(scope, None) or Spent()
            spent.tokens = saturated(spent.tokens + tokens)
            spent.cost = saturated(spent.cost + cost)
            self._spent[scope] = spent  # the most recently charged last
            _bound(self._spent, self.max_scopes)

    def _started(self, scope: Scope, limit: int, now: float) -> None:
        window = self._turns.pop(scope, None)
        if window is None or window.maxlen != limit:  # a reload changed the limit
            window = deque(window or (), maxlen=limit)
        window.append(now)
        self._turns[scope] = window
        _bound(self._turns, self.max_scopes)


def _bound(scopes: OrderedDict[Scope, T], most: int) -> None:
    """Forget the least recently used outside origins beyond `most` scopes. Agents and
    channels are never forgotten (the config bounds them): senders that rotate names can
    make a sender's day start anew, never an agent's or a channel's."""
    if len(scopes) <= most:
        return
    for scope in scopes:
        if scope.kind == "origin":
            del scopes[scope]
            return
