"""Budgets, pure: which scopes a turn spends from, which limits it keeps, and the book's
admission and exhaustion, driven with a given day and clock (exhaustively: Hypothesis)."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import VALID_DOC
from zeroclaw.bus import Origin
from zeroclaw.config import validate_document
from zeroclaw.turns import TokenUsage
from zeroclaw.usage import (
    PICO,
    BudgetBook,
    Budgeted,
    Budgets,
    Limits,
    OverBudget,
    Price,
    Scope,
    cost,
    per_token,
    scopes_of,
    shown,
    units,
)
from zeroclaw.usage._budget import HOUR, Spent

DAY = "2026-12-05"
ALPHA = Scope("alpha")


# --- prices -------------------------------------------------------------------------------


def test_a_price_per_million_tokens_is_an_exact_integer_per_token() -> None:
    assert per_token(Decimal("2.5")) == 2_500_000
    assert per_token(Decimal("0.000125")) == 125
    with pytest.raises(ValueError, match="six decimals"):
        per_token(Decimal("0.0000001"))


@given(st.lists(st.integers(0, 10**8), min_size=1, max_size=50))
def test_a_sum_of_costs_is_exact_however_many_steps(counts: list[int]) -> None:
    price = Price.per_mtok(Decimal("0.075"), Decimal("0.3"))
    total = sum(cost(TokenUsage(input_tokens=n, output_tokens=n), price) for n in counts)
    exact = sum(Decimal(n) * (Decimal("0.075") + Decimal("0.3")) / 10**6 for n in counts)
    assert Decimal(total) / PICO == exact


def test_cache_prices_default_to_the_input_price_and_each_kind_has_its_own() -> None:
    price = Price.per_mtok(Decimal(3), Decimal(15), cache_write=Decimal("3.75"))
    usage = TokenUsage(1_000_000, 1_000_000, 1_000_000, 1_000_000)
    assert shown(cost(usage, price)) == "24.750000"  # 3 + 15 + 3 (cached) + 3.75 (written)


# --- scopes and budgets from the config ------------------------------------------------------


def budgets(alpha_budget: dict[str, Any]) -> Budgets:
    doc = copy.deepcopy(VALID_DOC)
    doc["agents"]["alpha"]["budget"] = alpha_budget
    return Budgets(validate_document(doc).agents)


def test_an_outside_origin_spends_from_the_agent_its_own_and_its_channel_scope() -> None:
    assert scopes_of("alpha", "operator") == (ALPHA,)
    assert scopes_of("alpha", "subagent:beta") == (ALPHA,)
    assert scopes_of("alpha", "unknown") == (ALPHA,)
    assert scopes_of("alpha", "webhook.ops:ci-bot") == (
        ALPHA,
        Scope("alpha", "origin", "webhook.ops:ci-bot"),
        Scope("alpha", "channel", "webhook.ops"),
    )
    assert scopes_of("alpha", "peer:beta")[2] == Scope("alpha", "channel", "peer")


def test_the_most_specific_key_gives_an_origin_its_own_budget() -> None:
    found = budgets(
        {
            "tokens_per_day": 100,
            "origins": {
                "webhook.ops:@CI-Bot": {"turns_per_hour": 5},
                "webhook.ops:*": {"turns_per_hour": 2},
                "*": {"turns_per_hour": 1},
                "webhook.ops": {"tokens_per_day": 50},
                "peer": {"cost_per_day": "0.5"},
            },
        }
    )
    ci = found.of("alpha", Origin.from_sender("webhook.ops", "ci-bot"))
    assert ci == (
        Budgeted(ALPHA, Limits(tokens_per_day=100)),
        Budgeted(Scope("alpha", "origin", "webhook.ops:ci-bot"), Limits(turns_per_hour=5)),
        Budgeted(Scope("alpha", "channel", "webhook.ops"), Limits(tokens_per_day=50)),
    )
    bob = found.of("alpha", Origin.from_sender("webhook.ops", "bob"))
    assert bob[1].limits == Limits(turns_per_hour=2)
    beta = found.of("alpha", Origin.peer("beta"))
    assert beta[1] == Budgeted(Scope("alpha", "origin", "peer:beta"), Limits(turns_per_hour=1))
    assert beta[2] == Budgeted(Scope("alpha", "channel", "peer"), Limits(cost_per_day=PICO // 2))
    assert found.of("alpha", Origin.operator("cli.local")) == (
        Budgeted(ALPHA, Limits(tokens_per_day=100)),
    )
    assert found.of("beta", Origin.peer("alpha")) == ()  # beta has no budget


# --- the book ---------------------------------------------------------------------------------


def test_a_turn_is_refused_once_a_daily_limit_is_spent_and_a_new_day_starts_anew() -> None:
    book = BudgetBook()
    limits = (Budgeted(ALPHA, Limits(tokens_per_day=100, cost_per_day=10)),)
    assert book.admit(limits, now=0, day=DAY) is None
    book.charge([ALPHA], 99, 9, DAY)
    assert book.exhausted(limits, DAY) is None
    book.charge([ALPHA], 1, 0, DAY)
    over = book.admit(limits, now=1, day=DAY)
    assert over is not None and (over.limit, over.spent, over.allowed) == (
        "tokens_per_day",
        100,
        100,
    )
    assert over.detail == "tokens_per_day of agent alpha spent (100 of 100)"
    assert book.admit(limits, now=2, day="2026-12-06") is None  # midnight UTC


def test_turns_per_hour_is_a_rolling_hour() -> None:
    book = BudgetBook()
    limits = (Budgeted(ALPHA, Limits(turns_per_hour=2)),)
    assert book.admit(limits, now=0, day=DAY) is None
    assert book.admit(limits, now=10, day=DAY) is None
    over = book.admit(limits, now=HOUR - 0.001, day=DAY)
    assert over is not None and over.limit == "turns_per_hour"
    assert book.admit(limits, now=HOUR, day=DAY) is None  # the first is an hour old: gone


def test_a_refusal_by_one_scope_counts_the_turn_in_none() -> None:
    book = BudgetBook()
    sender = Scope("alpha", "origin", "webhook.ops:bob")
    limits = (
        Budgeted(ALPHA, Limits(turns_per_hour=10)),
        Budgeted(sender, Limits(turns_per_hour=1)),
    )
    assert book.admit(limits, now=0, day=DAY) is None
    assert book.admit(limits, now=1, day=DAY) is not None
    assert book.turns(ALPHA, 1) == 1  # the refused turn took nothing from the agent


def test_the_book_forgets_the_least_recently_charged_sender_beyond_its_bound() -> None:
    book = BudgetBook(max_scopes=3)
    for n in range(5):
        book.charge([Scope("alpha", "origin", f"webhook.ops:s{n}")], 10, 1, DAY)
    assert book.spent(Scope("alpha", "origin", "webhook.ops:s0"), DAY).tokens == 0
    assert book.spent(Scope("alpha", "origin", "webhook.ops:s4"), DAY).tokens == 10
    assert len(book._spent) == 3


def test_attack_a_flood_of_sender_names_never_resets_an_agents_or_a_channels_day() -> None:
    book = BudgetBook(max_scopes=10)
    beta, channel = Scope("beta"), Scope("alpha", "channel", "webhook.ops")
    book.charge([beta, channel], 500, 5, DAY)  # then beta stays idle
    limits = (Budgeted(beta, Limits(tokens_per_day=500)),)
    window = (Budgeted(channel, Limits(turns_per_hour=1)),)
    assert book.admit(window, now=0, day=DAY) is None
    for n in range(1000):  # alpha's webhook, a new name each time
        book.charge([Scope("alpha", "origin", f"webhook.ops:x{n}")], 1, 0, DAY)
        book.admit(
            (Budgeted(Scope("alpha", "origin", f"webhook.ops:x{n}"), Limits(turns_per_hour=9)),),
            now=1,
            day=DAY,
        )
    assert book.exhausted(limits, DAY) is not None  # beta's day is still spent
    assert book.spent(channel, DAY).tokens == 500
    assert book.admit(window, now=2, day=DAY) is not None  # and the channel's hour
    assert len(book._spent) <= 10 and len(book._turns) <= 10


limits_strategy = st.builds(
    Limits,
    st.none() | st.integers(1, 500),
    st.none() | st.integers(1, 500),
    st.none() | st.integers(1, 5),
)
actions = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.floats(0, 2000, allow_nan=False)),
        st.tuples(st.just("charge"), st.integers(0, 200), st.integers(0, 200)),
        st.tuples(st.just("day"), st.sampled_from(["2026-12-05", "2026-12-06", "2026-12-07"])),
    ),
    max_size=40,
)


@given(limits_strategy, limits_strategy, actions)
def test_admission_is_exactly_every_scope_under_every_limit(
    own: Limits, sender: Limits, script: list[tuple[Any, ...]]
) -> None:
    """Whatever happens, a turn is admitted exactly when no scope has spent a daily limit
    and none started its hourly number of turns in the hour before; admitted turns are
    counted in every scope with a turn limit, refused ones in none."""
    book = BudgetBook()
    origin = Scope("alpha", "origin", "webhook.ops:bob")
    limits = (Budgeted(ALPHA, own), Budgeted(origin, sender))
    now, day = 0.0, DAY
    spent = {ALPHA: [0, 0], origin: [0, 0]}
    started: dict[Scope, list[float]] = {ALPHA: [], origin: []}
    for action in script:
        if action[0] == "day":
            if action[1] != day:
                day = action[1]
                spent = {ALPHA: [0, 0], origin: [0, 0]}
        elif action[0] == "charge":
            book.charge([ALPHA, origin], action[1], action[2], day)
            for scope in spent:
                spent[scope][0] += action[1]
                spent[scope][1] += action[2]
        else:
            now += action[1]
            expected = all(
                (b.limits.tokens_per_day is None or spent[b.scope][0] < b.limits.tokens_per_day)
                and (b.limits.cost_per_day is None or spent[b.scope][1] < b.limits.cost_per_day)
                and (
                    b.limits.turns_per_hour is None
                    or sum(t > now - HOUR for t in started[b.scope]) < b.limits.turns_per_hour
                )
                for b in limits
            )
            over = book.admit(limits, now=now, day=day)
            assert (over is None) == expected
            if over is None:
                for b in limits:
                    if b.limits.turns_per_hour is not None:
                        started[b.scope].append(now)
            else:
                assert over.spent >= over.allowed
        for b in limits:
            assert book.spent(b.scope, day).tokens == spent[b.scope][0]


# --- turns in flight hold what they will spend at least (attack pass) ----------------------


def test_attack_turns_admitted_together_see_what_the_others_hold() -> None:
    # The hole: a turn's spend is charged at its first step, so turns admitted before any
    # had a step were all admitted against the same spend (a flood, a slow model).
    book = BudgetBook()
    budgets = [Budgeted(ALPHA, Limits(tokens_per_day=100))]
    assert book.admit(budgets, now=0.0, day=DAY, hold=Spent(60, 0)) is None  # alone: as before
    assert book.admit(budgets, now=0.0, day=DAY, hold=Spent(50, 0)) is None  # 60 < 100
    over = book.admit(budgets, now=0.0, day=DAY, hold=Spent(1, 0))  # 110 held
    assert over is not None and (over.limit, over.spent, over.allowed) == (
        "tokens_per_day",
        110,
        100,
    )
    assert over.detail == (
        "tokens_per_day of agent alpha spent (110 of 100, the turns running now included)"
    )
    # The first turn's step is charged in place of its hold: 30 spent, 50 held.
    book.release([ALPHA], Spent(60, 0), DAY)
    book.charge([ALPHA], 30, 0, DAY)
    assert book.admit(budgets, now=0.0, day=DAY, hold=Spent(5, 0)) is None  # 80 < 100
    assert book.admit(budgets, now=0.0, day=DAY, hold=Spent(5, 0)) is None  # 85 < 100
    # A running turn is stopped by what was spent, never by what others hold.
    assert book.exhausted(budgets, DAY) is None


def test_a_hold_of_cost_counts_against_a_cost_budget_and_a_new_day_forgets_holds() -> None:
    book = BudgetBook()
    budgets = [Budgeted(ALPHA, Limits(cost_per_day=1000))]
    assert book.admit(budgets, now=0.0, day=DAY, hold=Spent(1, 1000)) is None
    assert book.admit(budgets, now=0.0, day=DAY, hold=Spent(1, 1)) is not None
    tomorrow = "2026-12-06"
    assert book.admit(budgets, now=0.0, day=tomorrow, hold=Spent(1, 1000)) is None
    book.release([ALPHA], Spent(1, 1000), DAY)  # yesterday's hold: nothing of today's
    assert book.admit(budgets, now=0.0, day=tomorrow, hold=Spent(1, 1)) is not None


@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500)), max_size=30))
def test_every_hold_released_leaves_nothing_held(holds: list[tuple[int, int]]) -> None:
    book = BudgetBook()
    budgets = [Budgeted(ALPHA, Limits(tokens_per_day=10**6, cost_per_day=10**6))]
    admitted = [
        Spent(tokens, cost)
        for tokens, cost in holds
        if book.admit(budgets, now=0.0, day=DAY, hold=Spent(tokens, cost)) is None
    ]
    for hold in admitted:
        book.release([ALPHA], hold, DAY)
    assert book._held == {}


ORIGINS = {
    "operator": Origin.operator(),
    "channel": Origin.from_sender("webhook.ops", "ci-bot"),
    "api": Origin.api("ci", "pipeline"),
    "peer": Origin.peer("beta"),
    "subagent": Origin.subagent("alpha"),
    "schedule": Origin.schedule("alpha", "daily"),
}


@pytest.mark.parametrize("kind", sorted(ORIGINS))
@pytest.mark.parametrize(
    ("scope", "whose"),
    [
        (Scope("secret-agent"), "the agent's"),
        (Scope("secret-agent", "origin", "webhook.ops:ci-bot"), "your"),
        (Scope("secret-agent", "channel", "webhook.ops"), "this channel's"),
    ],
)
def test_an_outside_sender_is_told_whose_limit_is_spent_and_nothing_of_the_host(
    kind: str, scope: Scope, whose: str
) -> None:
    over = OverBudget(scope, "cost_per_day", units(Decimal("12.5")), units(Decimal("10")))
    told = over.told_to(ORIGINS[kind])
    if kind in ("channel", "api"):
        assert told == f"{whose} cost_per_day budget is spent; try again later"
        assert not any(secret in told for secret in ("secret-agent", "ci-bot", "12.5", "10"))
    else:  # the operator, the host's own agents and schedules: the whole of it
        assert told == over.detail
        assert "secret-agent" in told and "12.500000 of 10.000000" in told


@pytest.mark.parametrize("kind", sorted(ORIGINS))
@pytest.mark.parametrize(
    "scope",
    [Scope("beta"), Scope("beta", "origin", "peer:alpha"), Scope("beta", "channel", "peer")],
)
def test_a_peers_refusal_on_an_outside_senders_behalf_names_only_the_peers_limit(
    kind: str, scope: Scope
) -> None:
    """Told to the asking agent, whose model may pass it on to the chain's origin."""
    over = OverBudget(scope, "cost_per_day", units(Decimal("12.5")), units(Decimal("10")))
    told = over.told_to(ORIGINS[kind], peer=True)
    if kind in ("channel", "api"):
        assert told == "the peer's cost_per_day budget is spent; try again later"
    else:
        assert told == over.detail


def test_an_origin_the_daemon_does_not_know_is_told_as_little_as_an_outside_sender() -> None:
    over = OverBudget(Scope("beta"), "turns_per_hour", 3, 3)
    assert over.told_to(None) == "the agent's turns_per_hour budget is spent; try again later"
    assert over.told_to(None, peer=True).startswith("the peer's turns_per_hour budget")
