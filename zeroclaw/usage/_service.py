"""The daemon's usage service (`USAGE_SERVICE`, ADR 0057): what every turn spends, recorded
against whom the daemon knows started it, and the budgets that admit and end turns.

Ways in, each with its own authority:
- `admit(agent, origin, session, turn)`: the turn service (a chat, a channel message, a
  dispatch) and the router (a peer's question) ask before they hand a turn to its agent:
  refused `budget_exceeded` when a budget of the turn is spent, otherwise the turn is
  counted and remembered with its origin and session, the daemon's own.
- `serve(sender, request)`: an agent reports a step of a turn (`UsageReport`) or its
  breakers (`ProvidersReport`); `sender` is the router's authenticated identity. A step is
  charged to the sender, always, and to the origin and session the daemon admitted that
  turn with, only when the turn is one it admitted to that sender: an agent can under-report
  its own spend (it holds its provider key), but never charge another agent, nor an origin
  that did not start a turn with it. A provider the sender's chain does not name is
  recorded as `other` and priced at the chain's dearest price.
- the operator: `query` (`zeroclaw usage`), `status` (`zeroclaw status`), metrics.

Steps are charged in memory at once (the budgets see them on the next step) and written
to the ledger in batches, a second at a time, on a worker thread.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec
import trio

from .._ops import BodyError, Nothing, OpTable
from .._tokens import message_tokens
from ..bus import Origin, Request, Response, answer, refusal
from ..config import Config, parse_budget_key
from ..control import BudgetStatus, ProviderStatus, UsageReply, UsageRow
from ..events import BudgetExceeded, EventSink, ProviderBreakerChanged, TurnSpent
from ..turns import (
    TOKEN_KINDS,
    USAGE_OPERATIONS,
    USAGE_PROVIDERS,
    USAGE_REPORT,
    USAGE_SERVICE,
    ProviderHealth,
    ProvidersReport,
    TokenUsage,
    UsageReport,
    UsageVerdict,
)
from ._budget import BudgetBook, Budgets, Limits, OverBudget, Scope, Spent, scopes_of
from ._ledger import LedgerError, LedgerKey, Tally, UsageLedger
from ._prices import FREE, Price, cost, saturated, shown

log = logging.getLogger("zeroclaw.usage")

FLUSH_SECS = 1.0  # how long steps gather in memory before one ledger commit
MAX_TURNS = 10_000  # chats, and questions apart, remembered with their origin (oldest out first)
MAX_KEYS_PER_DAY = 10_000  # (origin, session) pairs one agent's ledger rows name in a day
OVERFLOW = "~"  # the session (or a channel's origin) of what came beyond that
OTHER_PROVIDER = "other"  # a provider the agent's chain does not name
UNKNOWN_ORIGIN = "unknown"  # a turn the daemon did not admit to the reporting agent
MAX_ERROR = 300


def utc_day(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True, slots=True)
class TurnOwner:
    """A turn as the daemon admitted it: to whom, from whom, in which session, and on
    whose behalf (whose terms a refusal is told in: the turn's own origin for a chat, the
    chat a chain of questions began with for a peer's question; None: not known)."""

    agent: str
    origin: Origin | None  # None: a turn the daemon does not know (charged as `unknown`)
    session: str
    on_behalf_of: Origin | None = None

    @property
    def who(self) -> str:
        return UNKNOWN_ORIGIN if self.origin is None else self.origin.who


@dataclass(slots=True)
class _TurnTally:
    steps: int = 0
    tokens: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # in TOKEN_KINDS order
    cost: int = 0
    providers: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    estimated: bool = False
    stopped: bool = False  # told to stop: a further step is the agent ignoring it


@dataclass(slots=True)
class _Named:
    pairs: set[tuple[str, str]] = field(default_factory=set)  # (origin, session)
    origins: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Settings:
    """What the service takes from one config: budgets, prices, each agent's chain."""

    config: Config
    budgets: Budgets
    prices: dict[str, Price]
    chains: dict[str, tuple[str, ...]]


def _settings(config: Config) -> _Settings:
    prices: dict[str, Price] = {}
    for ref in config.provider_ids():
        price = getattr(config.provider(ref), "price", None)
        prices[ref] = (
            FREE
            if price is None
            else Price.per_mtok(
                price.input_per_mtok,
                price.output_per_mtok,
                price.cached_input_per_mtok,
                price.cache_write_per_mtok,
            )
        )
    chains = {alias: agent.provider_chain for alias, agent in config.agents.items()}
    return _Settings(config, Budgets(config.agents), prices, chains)


@dataclass
class UsageCounts:
    """What metrics read when scraped (labels from the config: bounded)."""

    tokens: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # agent, provider, kind
    cost: Counter[tuple[str, str]] = field(default_factory=Counter)  # agent, provider -> pico
    refusals: Counter[tuple[str, str]] = field(default_factory=Counter)  # agent, limit
    stopped: Counter[tuple[str, str]] = field(default_factory=Counter)  # agent, limit
    failovers: Counter[tuple[str, str]] = field(default_factory=Counter)  # agent, provider
    spoofed: int = 0  # steps of a turn the daemon did not admit to their reporter
    ignored_stops: int = 0  # steps after the daemon said stop
    malformed: int = 0


class UsageService:
    def __init__(
        self,
        ledger: UsageLedger,
        config: Callable[[], Config],
        events: EventSink | None = None,
        *,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        flush_secs: float = FLUSH_SECS,
        max_turns: int = MAX_TURNS,
        cancel_turn: Callable[[str, str], None] = lambda agent, turn: None,
    ) -> None:
        """`config`: the running config (a reload changes budgets and prices);
        `cancel_turn(agent, turn)`: stops a turn of the turn service whose agent goes on
        after it was told to stop (the daemon's backstop; a peer's turn has none)."""
        self.ledger = ledger
        self._config = config
        self._settings_cache: _Settings | None = None
        self.events = events
        self.wall = wall
        self.clock = clock
        self.flush_secs = flush_secs
        self.max_turns = max_turns
        self.cancel_turn = cancel_turn
        self.book = BudgetBook()
        self.counts = UsageCounts()
        self._turns: dict[tuple[str, str], TurnOwner] = {}
        # The order each kind of turn came in, each bounded by `max_turns` on its own: the
        # turn service's (closed at their end) and the router's questions (never closed).
        self._chats: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._questions: OrderedDict[tuple[str, str], None] = OrderedDict()
        # Turns the turn service closed, for the one compaction step each may report after
        # its end (bounded like `_turns`, the oldest forgotten first).
        self._ended: OrderedDict[tuple[str, str], TurnOwner] = OrderedDict()
        # What each admitted turn holds of its budgets until its first step is charged.
        self._holds: dict[tuple[str, str], tuple[tuple[Scope, ...], Spent, str]] = {}
        self._tallies: dict[tuple[str, str], _TurnTally] = {}
        self._pending: dict[LedgerKey, Tally] = {}
        # agent -> the origins and sessions its ledger rows of `_keys_day` name
        self._keys_day = ""
        self._keys: dict[str, _Named] = {}
        self._health: dict[str, tuple[tuple[ProviderHealth, ...], float]] = {}
        self._seed()

    # --- the running config ---------------------------------------------------------------

    def _now_settings(self) -> _Settings:
        config = self._config()
        if self._settings_cache is None or self._settings_cache.config is not config:
            self._settings_cache = _settings(config)
        return self._settings_cache

    def _seed(self) -> None:
        """Today's spend from the ledger, so a restart does not start the day's budgets
        anew (the turns of the last hour are not kept: a restart forgets them)."""
        day = utc_day(self.wall())
        for key, tally in self.ledger.rows(since=day, until=day):
            self.book.charge(scopes_of(key.agent, key.origin), tally.tokens, tally.cost, day)
            self._key(day, key.agent, key.origin, key.session, key.provider)

    # --- admission ------------------------------------------------------------------------

    def admit(
        self,
        agent: str,
        origin: Origin,
        session: str,
        turn: str,
        *,
        text: str = "",
        question: bool = False,
        on_behalf_of: Origin | None = None,
    ) -> OverBudget | None:
        """Whether a turn may start: None (it is counted, and remembered with its origin
        and session), or the budget that refuses it (published as an event). `text`: the
        turn's message, the least it will spend, held against its budgets while it has
        charged nothing (so turns admitted together see each other). `question`: a peer's
        question, which nobody closes: remembered apart, the oldest forgotten first, so
        that however many are asked no turn the turn service holds open is forgotten;
        `on_behalf_of` is then the chat its chain began with (a chat is on its own)."""
        day = utc_day(self.wall())
        settings = self._now_settings()
        budgets = settings.budgets.of(agent, origin)
        hold = _hold(settings, agent, text) if text and budgets else None
        over = self.book.admit(budgets, now=self.clock(), day=day, hold=hold)
        if over is not None:
            self.counts.refusals[(agent, over.limit)] += 1
            self._publish(
                BudgetExceeded(
                    agent, origin.who, over.limit, over.scope.describe(), over.detail, "start"
                )
            )
            return over
        owner = TurnOwner(agent, origin, session, on_behalf_of if question else origin)
        key = (agent, turn)
        order = self._questions if question else self._chats
        self._turns[key] = owner
        order[key] = None
        order.move_to_end(key)
        if hold is not None:
            self._holds[key] = (tuple(b.scope for b in budgets), hold, day)
        while len(order) > self.max_turns:
            forgotten, _ = order.popitem(last=False)
            self._turns.pop(forgotten, None)
            self._tallies.pop(forgotten, None)
            self._release(forgotten)
        self._add(self._key(day, named(agent), owner.who, session, ""), Tally(turns=1))
        return None

    def budgeted(self, agent: str, origin: Origin) -> bool:
        """Whether any budget applies to a turn of `agent` from `origin` (the turn service
        tells the agent, which then waits for a verdict on each step; ADR 0068)."""
        return bool(self._now_settings().budgets.of(agent, origin))

    def admit_question(
        self, callee: str, origin: Origin, session: str, turn: str, on_behalf_of: Origin | None
    ) -> str | None:
        """The router's question admission (`bus.QuestionAdmission`): why not, in the terms
        of the origin the asking chain works for, or None."""
        over = self.admit(callee, origin, session, turn, question=True, on_behalf_of=on_behalf_of)
        return None if over is None else over.told_to(on_behalf_of, peer=True)

    def closed(self, agent: str, turn: str) -> None:
        """The turn service: the turn ended (its last step was reported before its end).
        Its owner is kept a while for the session's compaction, which comes after."""
        owner = self._turns.pop((agent, turn), None)
        self._chats.pop((agent, turn), None)
        self._questions.pop((agent, turn), None)
        self._tallies.pop((agent, turn), None)
        self._release((agent, turn))
        if owner is not None:
            self._ended[(agent, turn)] = owner
            while len(self._ended) > self.max_turns:
                self._ended.popitem(last=False)

    def _release(self, key: tuple[str, str]) -> None:
        held = self._holds.pop(key, None)
        if held is not None:
            scopes, hold, day = held
            self.book.release(scopes, hold, day)

    # --- the bus service ------------------------------------------------------------------

    def serve(self, sender: str, request: Request) -> Response:
        """`USAGE_SERVICE` requests; `sender` is the router's identity of the agent.
        Answered at once, in the order they arrive: a step is charged before its turn's
        end (the agent sends the last step before the turn's answer) is read."""
        response = serve_now(_TABLE, (self, sender, request), request)
        if not response.ok:
            self.counts.malformed += 1
        return response

    def _report(self, sender: str, request: Request, report: UsageReport) -> Response:
        return answer(request, self.record(sender, report))

    def record(self, sender: str, report: UsageReport) -> UsageVerdict:
        """One step of a turn of `sender`: charged, and the daemon's word on going on."""
        settings = self._now_settings()
        key = (sender, report.turn)
        owner = self._turns.get(key)
        if owner is None and report.compaction:
            # A compaction comes after its turn ended and summarises that turn's session:
            # charged to the origin that made the agent spend it, once per turn (else an
            # outside sender's compactions spent none of its own budget).
            owner = self._ended.pop(key, None) or TurnOwner(sender, None, "")
        elif owner is None:
            self.counts.spoofed += 1
            owner = TurnOwner(sender, None, "")
        chain = _chain_of(settings, sender)
        step = report.step
        provider = step.provider if step.provider in chain else OTHER_PROVIDER
        tokens = step.tokens
        price = settings.prices.get(provider) or _dearest(settings, chain)
        spent = cost(tokens, price)
        day = utc_day(self.wall())
        self._release(key)  # what it spent is charged now, in place of what it held
        self.book.charge(scopes_of(sender, owner.who), tokens.total, spent, day)
        self._add(
            self._key(day, named(sender), owner.who, owner.session, provider),
            Tally(
                steps=1,
                input_tokens=tokens.input_tokens,
                output_tokens=tokens.output_tokens,
                cached_input_tokens=tokens.cached_input_tokens,
                cache_write_tokens=tokens.cache_write_tokens,
                cost=spent,
                estimated_steps=int(tokens.estimated),
            ),
        )
        failed = tuple(p if p in chain else OTHER_PROVIDER for p in step.failed[: len(chain) + 1])
        self._count(sender, provider, tokens, spent, failed)
        tally = self._tally(key, owner)
        ignored = tally is not None and tally.stopped
        if tally is not None:
            _add_step(tally, provider, tokens, spent, failed)
        verdict = UsageVerdict()
        if not report.last:
            origin = owner.origin or Origin.operator()
            over = self.book.exhausted(settings.budgets.of(sender, origin), day)
            if over is not None:
                # a question's turn is named `asker/id` (bus.question_turn), known or not
                told = over.told_to(owner.on_behalf_of, peer="/" in report.turn)
                verdict = UsageVerdict(True, over.limit, told)
                self.counts.stopped[(sender, over.limit)] += 1
                if not ignored:
                    self._publish(
                        BudgetExceeded(
                            sender,
                            owner.who,
                            over.limit,
                            over.scope.describe(),
                            over.detail,
                            "step",
                        )
                    )
        if ignored:  # the agent went on after the daemon's stop: its turn is ended for it
            self.counts.ignored_stops += 1
            log.warning(
                "agent %s went on with turn %s after its budget stopped it", sender, report.turn
            )
            self.cancel_turn(sender, report.turn)
        if tally is not None:
            tally.stopped = tally.stopped or verdict.stop
            if (report.last and not report.compaction) or verdict.stop:
                self._spent(key, owner, tally)
        return verdict

    def _tally(self, key: tuple[str, str], owner: TurnOwner) -> _TurnTally | None:
        if owner.origin is None or key not in self._turns:
            return None  # an unknown or ended turn: charged, but no event of its own
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = _TurnTally()
        return tally

    def _spent(self, key: tuple[str, str], owner: TurnOwner, tally: _TurnTally) -> None:
        self._publish(
            TurnSpent(
                owner.agent,
                owner.who,
                owner.session,
                tally.steps,
                input_tokens=tally.tokens[0],
                cached_input_tokens=tally.tokens[1],
                cache_write_tokens=tally.tokens[2],
                output_tokens=tally.tokens[3],
                cost=shown(tally.cost),
                providers=tuple(dict.fromkeys(tally.providers)),
                failed=tuple(dict.fromkeys(tally.failed)),
                estimated=tally.estimated,
                stopped=tally.stopped,
            )
        )
        if not tally.stopped:
            self._tallies.pop(key, None)
        else:  # kept (empty) so a step after the stop is seen as ignoring it
            tally.steps, tally.tokens, tally.cost = 0, [0, 0, 0, 0], 0
            tally.providers, tally.failed = [], []

    def _count(
        self, agent: str, provider: str, tokens: TokenUsage, spent: int, failed: tuple[str, ...]
    ) -> None:
        counts = self.counts
        if agent.startswith(SUBAGENT_PREFIX):
            agent = named(agent)  # one series per sub-agent, whatever its revision
        elif agent not in self._now_settings().chains:
            agent = "other"  # a removed agent: one series
        for kind in TOKEN_KINDS:
            if n := tokens.of(kind):
                counts.tokens[(agent, provider, kind)] += n
        counts.cost[(agent, provider)] += spent
        for name in failed:
            counts.failovers[(agent, name)] += 1

    def _key(self, day: str, agent: str, who: str, session: str, provider: str) -> LedgerKey:
        """The ledger row of a step or a turn's start. Once an agent's rows of the day name
        MAX_KEYS_PER_DAY origins and sessions, a new one is recorded under its origin's
        overflow session (`~`), or its channel's overflow origin (`webhook.ops:~`): outside
        senders that rotate names or sessions cannot grow the ledger without bound."""
        if day != self._keys_day:  # a new day: yesterday's names are no bound of today's
            self._keys_day, self._keys = day, {}
        named = self._keys.get(agent)
        if named is None:
            named = self._keys[agent] = _Named()
        if (who, session) not in named.pairs:
            if len(named.pairs) >= MAX_KEYS_PER_DAY:
                channel, colon, _ = who.partition(":")
                if colon and who not in named.origins:
                    who = f"{channel}:{OVERFLOW}"
                return LedgerKey(day, agent, who, OVERFLOW, provider)
            named.pairs.add((who, session))
            named.origins.add(who)
        return LedgerKey(day, agent, who, session, provider)

    def _providers(self, sender: str, request: Request, report: ProvidersReport) -> Response:
        chain = self._now_settings().chains.get(sender, ())
        # One entry per provider of the sender's chain (its last), in the chain's order:
        # a report naming one many times changes it once.
        last = {health.provider: health for health in report.providers}
        kept = tuple(
            msgspec.structs.replace(
                health,
                last_error=health.last_error[:MAX_ERROR],
                retry_in_secs=min(max(health.retry_in_secs, 0.0), 86_400.0 * 10)
                if math.isfinite(health.retry_in_secs)
                else 0.0,
            )
            for provider in chain
            if (health := last.get(provider)) is not None
        )
        before = {h.provider: h for h in self._health.get(sender, ((), 0.0))[0]}
        self._health[sender] = (kept, self.clock())
        for health in kept:
            was = before.get(health.provider)
            if (was.state if was is not None else "closed") != health.state:
                self._publish(
                    ProviderBreakerChanged(
                        sender, health.provider, health.state, health.failures, health.last_error
                    )
                )
        return answer(request, Nothing())

    def agent_down(self, alias: str) -> None:
        """Its breakers went with its process: a new one starts them closed."""
        self._health.pop(alias, None)

    # --- the ledger -----------------------------------------------------------------------

    def _add(self, key: LedgerKey, tally: Tally) -> None:
        before = self._pending.get(key)
        self._pending[key] = tally if before is None else before.plus(tally)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Commit what gathered every `flush_secs`, and once more when cancelled."""
        task_status.started()
        try:
            while True:
                await trio.sleep(self.flush_secs)
                await self.flush()
        finally:
            with trio.CancelScope(shield=True):
                await self.flush()

    async def flush(self) -> None:
        """Write what gathered in one transaction; kept for the next try if it fails."""
        batch, self._pending = self._pending, {}
        if batch:
            try:
                await trio.to_thread.run_sync(self.ledger.add, batch)
            except LedgerError as exc:
                log.error("usage not written, kept for the next try: %s", exc)
                for key, tally in batch.items():
                    self._add(key, tally)

    # --- the operator ---------------------------------------------------------------------

    async def query(self, since: str, agent: str | None = None) -> UsageReply:
        """The ledger's rows from UTC day `since` on, what is still gathering included."""
        await self.flush()
        rows = await trio.to_thread.run_sync(self.ledger.rows, since, agent)
        return UsageReply([usage_row(key, tally) for key, tally in rows], since)

    def provider_status(self) -> list[ProviderStatus]:
        """Every provider of every chain of two or more, as its agent last reported it."""
        out = []
        now = self.clock()
        for agent, chain in sorted(self._now_settings().chains.items()):
            if len(chain) < 2:
                continue
            reported, at = self._health.get(agent, ((), None))
            known = {h.provider: h for h in reported}
            for provider in chain:
                health = known.get(provider)
                ago = None if at is None else round(now - at, 3)
                if health is None:
                    out.append(ProviderStatus(agent, provider, "closed", reported_secs_ago=ago))
                else:
                    out.append(
                        ProviderStatus(
                            agent,
                            provider,
                            health.state,
                            health.failures,
                            health.retry_in_secs,
                            health.last_error,
                            ago,
                        )
                    )
        return out

    def budget_status(self) -> list[BudgetStatus]:
        """Each agent's own budget and its channels' (`'<channel>'`) ones, with what they
        spent today and their turns of the last hour."""
        settings = self._now_settings()
        day, now = utc_day(self.wall()), self.clock()
        out = []
        for alias, agent in sorted(settings.config.agents.items()):
            scoped: list[tuple[Scope, Limits]] = [(Scope(alias), Limits.of(agent.budget))]
            for key, configured in sorted(agent.budget.origins.items()):
                parsed = parse_budget_key(key)
                if not isinstance(parsed, str) and parsed.form == "together":
                    scoped.append((Scope(alias, "channel", parsed.channel), Limits.of(configured)))
            for scope, limits in scoped:
                if not limits:
                    continue
                spent = self.book.spent(scope, day)
                out.append(
                    BudgetStatus(
                        alias,
                        "agent" if scope.kind == "agent" else scope.who,
                        spent.tokens,
                        shown(spent.cost),
                        self.book.turns(scope, now),
                        limits.tokens_per_day,
                        None if limits.cost_per_day is None else shown(limits.cost_per_day),
                        limits.turns_per_hour,
                    )
                )
        return out

    def _publish(self, event: TurnSpent | BudgetExceeded | ProviderBreakerChanged) -> None:
        if self.events is not None:
            self.events.publish(event)


SUBAGENT_PREFIX = "sub:"  # a sub-agent runtime's identity: sub:<id>@<digest12>


def named(identity: str) -> str:
    """Whose spend it is in the ledger and the metrics: an agent's alias, or a sub-agent
    runtime's `sub:<id>` (its revision's digest dropped: one account per sub-agent)."""
    return identity.partition("@")[0] if identity.startswith(SUBAGENT_PREFIX) else identity


def _chain_of(settings: _Settings, sender: str) -> tuple[str, ...]:
    """The providers a sender may have been answered by: an agent's chain; for a sub-agent
    runtime any configured provider (its bundle names one, which the loader checked)."""
    if sender.startswith(SUBAGENT_PREFIX):
        return tuple(settings.prices)
    return settings.chains.get(sender, ())


def _hold(settings: _Settings, agent: str, text: str) -> Spent:
    """The least a turn of `agent` with the message `text` will spend: the message's
    tokens (the shared estimate) at the cheapest price its chain may answer at."""
    tokens = message_tokens(text)
    prices = [settings.prices.get(ref, FREE) for ref in settings.chains.get(agent, ())]
    cheapest = min((min(p.input, p.cached_input) for p in prices), default=0)
    return Spent(tokens, saturated(tokens * cheapest))


def _dearest(settings: _Settings, chain: tuple[str, ...]) -> Price:
    """The price of a provider an agent named that its chain does not: its chain's
    dearest, kind by kind (lying about who answered never makes a step cheaper)."""
    prices = [settings.prices.get(ref, FREE) for ref in chain] or [FREE]
    return Price(
        max(p.input for p in prices),
        max(p.output for p in prices),
        max(p.cached_input for p in prices),
        max(p.cache_write for p in prices),
    )


def _add_step(
    tally: _TurnTally, provider: str, tokens: TokenUsage, spent: int, failed: tuple[str, ...]
) -> None:
    tally.steps += 1
    for i, kind in enumerate(TOKEN_KINDS):
        tally.tokens[i] += tokens.of(kind)
    tally.cost += spent
    tally.providers.append(provider)
    tally.failed.extend(failed)
    tally.estimated = tally.estimated or tokens.estimated


def usage_row(key: LedgerKey, tally: Tally) -> UsageRow:
    return UsageRow(
        key.day,
        key.agent,
        key.origin,
        key.session,
        key.provider,
        tally.turns,
        tally.steps,
        tally.input_tokens,
        tally.output_tokens,
        tally.cached_input_tokens,
        tally.cache_write_tokens,
        shown(tally.cost),
        tally.cost,
        tally.estimated_steps,
    )


def serve_now(table: OpTable[_Ctx, Response], ctx: _Ctx, request: Request) -> Response:
    """The table's handler for the request, answered at once (the router calls it in its
    own task: nothing may escape): a body that does not decode, or an op the service
    lacks, is `bad_request`; a failure of the handler is `internal_error`, logged."""
    try:
        return table.run(ctx, request.op, request.body)
    except BodyError as exc:
        return refusal(request, "bad_request", exc.detail)
    except Exception as exc:
        log.exception("usage service failed a request of %s", ctx[1])
        return refusal(request, "internal_error", repr(exc))


_Ctx = tuple[UsageService, str, Request]  # the service, the sender, its request

# The usage service's one table: op -> request struct -> handler.
_TABLE: OpTable[_Ctx, Response] = (
    OpTable[_Ctx, Response](USAGE_SERVICE)
    .on(USAGE_REPORT, lambda ctx, report: ctx[0]._report(ctx[1], ctx[2], report))
    .on(USAGE_PROVIDERS, lambda ctx, report: ctx[0]._providers(ctx[1], ctx[2], report))
    .require(USAGE_OPERATIONS)
)
