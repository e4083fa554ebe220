"""The daemon's usage service with a real ledger: a step is charged to who reports it and
to the origin the daemon admitted its turn with; what a hostile agent tries with its own
reports (the router gives the service the sender's authenticated alias, never a field)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import VALID_DOC
from zeroclaw._ops import encode_body
from zeroclaw.bus import Origin, Request
from zeroclaw.config import Config, validate_document
from zeroclaw.events import BudgetExceeded, EventSink, ProviderBreakerChanged, TurnSpent
from zeroclaw.turns import (
    MAX_STEP_TOKENS,
    ProviderHealth,
    ProvidersReport,
    StepUsage,
    TokenUsage,
    UsageReport,
    UsageVerdict,
)
from zeroclaw.usage import UsageLedger, UsageService
from zeroclaw.usage import _service as service_module

OPERATOR = Origin.operator("cli.local")
HOOK = Origin.from_sender("webhook.ops", "ci-bot")
STEP = TokenUsage(input_tokens=1000, output_tokens=100)


def config(alpha: dict[str, Any] | None = None) -> Config:
    doc = copy.deepcopy(VALID_DOC)
    doc["providers"]["openai"] = {
        "cheap": {"model": "m", "price": {"input_per_mtok": 1, "output_per_mtok": 2}},
        "dear": {"model": "m", "price": {"input_per_mtok": 10, "output_per_mtok": 30}},
    }
    doc["agents"]["alpha"]["model_provider"] = ["openai.cheap", "openai.dear"]
    doc["agents"]["alpha"].update(alpha or {})
    return validate_document(doc)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[UsageLedger]:
    with UsageLedger(tmp_path / "usage") as opened:
        yield opened


class Harness:
    def __init__(self, ledger: UsageLedger, running: Config) -> None:
        self.events = EventSink()
        self.cancelled: list[tuple[str, str]] = []
        self.config = running
        self.service = UsageService(
            ledger,
            lambda: self.config,
            self.events,
            wall=lambda: 1_796_000_000.0,  # 2026-11-30, UTC
            cancel_turn=lambda agent, turn: self.cancelled.append((agent, turn)),
        )

    def report(
        self, sender: str, turn: str, *, last: bool = False, compaction: bool = False, **step: Any
    ) -> Any:
        fields = {"provider": "openai.cheap", "tokens": STEP, **step}
        body = UsageReport(turn, StepUsage(**fields), last, compaction)
        request = Request(id="r", service="usage", op="report", body=encode_body(body))
        response = self.service.serve(sender, request)
        assert response.ok, response
        return msgspec.msgpack.decode(response.body, type=UsageVerdict)

    def published(self, kind: type[Any]) -> list[Any]:
        return [p.event for p in self.events.recent(1000) if isinstance(p.event, kind)]

    async def groups(self) -> dict[tuple[str, str, str], Any]:
        reply = await self.service.query("2026-11-01")
        return {(r.agent, r.origin, r.provider): r for r in reply.rows}


@pytest.fixture
def harness(ledger: UsageLedger) -> Harness:
    return Harness(ledger, config())


async def test_a_step_is_charged_to_its_agent_origin_session_and_provider(
    harness: Harness,
) -> None:
    assert harness.service.admit("alpha", HOOK, "webhook.ops:ci-bot/default", "t1") is None
    assert harness.report("alpha", "t1") == UsageVerdict()
    assert harness.report("alpha", "t1", provider="openai.dear", last=True) == UsageVerdict()
    rows = await harness.groups()
    start = rows[("alpha", "webhook.ops:ci-bot", "")]
    assert (start.turns, start.session) == (1, "webhook.ops:ci-bot/default")
    cheap = rows[("alpha", "webhook.ops:ci-bot", "openai.cheap")]
    assert (cheap.steps, cheap.input_tokens, cheap.cost) == (1, 1000, "0.001200")
    assert rows[("alpha", "webhook.ops:ci-bot", "openai.dear")].cost == "0.013000"
    [spent] = harness.published(TurnSpent)
    assert (spent.origin, spent.steps, spent.cost) == ("webhook.ops:ci-bot", 2, "0.014200")
    assert spent.providers == ("openai.cheap", "openai.dear")
    counts = harness.service.counts
    assert counts.tokens[("alpha", "openai.cheap", "input")] == 1000
    assert counts.cost[("alpha", "openai.dear")] == 13_000_000_000


async def test_the_days_spend_comes_back_from_the_ledger_after_a_restart(
    ledger: UsageLedger,
) -> None:
    running = config({"budget": {"tokens_per_day": 2000}})
    first = Harness(ledger, running)
    assert first.service.admit("alpha", OPERATOR, "default", "t1") is None
    first.report("alpha", "t1", tokens=TokenUsage(input_tokens=2000), last=True)
    await first.service.flush()
    again = Harness(ledger, running)  # the daemon restarted
    over = again.service.admit("alpha", OPERATOR, "default", "t2")
    assert over is not None and over.limit == "tokens_per_day"


async def test_a_step_that_spends_a_budget_stops_its_turn_and_the_next_is_refused(
    ledger: UsageLedger,
) -> None:
    harness = Harness(ledger, config({"budget": {"cost_per_day": "0.002"}}))
    assert harness.service.admit("alpha", OPERATOR, "default", "t1") is None
    assert not harness.report("alpha", "t1").stop  # 0.0012 of 0.002
    verdict = harness.report("alpha", "t1")  # 0.0024: spent
    assert verdict.stop and verdict.limit == "cost_per_day"
    assert verdict.detail == "cost_per_day of agent alpha spent (0.002400 of 0.002000)"
    [ended] = harness.published(BudgetExceeded)
    assert ended.at == "step"
    assert harness.service.admit("alpha", OPERATOR, "default", "t2") is not None


async def test_a_compaction_after_its_turn_ended_is_charged_to_that_turns_origin(
    harness: Harness,
) -> None:
    # A session's compaction summarises after its turn's answer (ADR 0059): its step is
    # charged to the origin and session the daemon admitted that turn with, and is no
    # spoofing; no second usage.turn event for it.
    assert harness.service.admit("alpha", HOOK, "webhook.ops:ci-bot/default", "t1") is None
    harness.report("alpha", "t1", last=True)
    harness.service.closed("alpha", "t1")
    harness.report("alpha", "t1", last=True, compaction=True)
    rows = await harness.groups()
    step = rows[("alpha", "webhook.ops:ci-bot", "openai.cheap")]  # the turn's and the summary's
    assert (step.steps, step.session) == (2, "webhook.ops:ci-bot/default")
    assert ("alpha", "unknown", "openai.cheap") not in rows
    assert harness.service.counts.spoofed == 0
    assert len(harness.published(TurnSpent)) == 1  # the turn's, not again for the summary


async def test_attack_a_senders_compactions_spend_its_own_budget(ledger: UsageLedger) -> None:
    # Before the fix a compaction (reported after its turn closed) was charged to the agent
    # alone, as origin `unknown`: an outside sender whose long messages made every turn
    # compact had the agent spend about as much again beyond its per-origin budget.
    harness = Harness(
        ledger, config({"budget": {"origins": {"webhook.ops:*": {"tokens_per_day": 2000}}}})
    )
    assert harness.service.admit("alpha", HOOK, "webhook.ops:ci-bot/default", "t1") is None
    harness.report("alpha", "t1", last=True)  # 1100 tokens
    harness.service.closed("alpha", "t1")
    harness.report("alpha", "t1", last=True, compaction=True)  # 1100 more: 2200 of 2000
    over = harness.service.admit("alpha", HOOK, "webhook.ops:ci-bot/default", "t2")
    assert over is not None and over.limit == "tokens_per_day"
    assert over.detail == (
        "tokens_per_day of webhook.ops:ci-bot on agent alpha spent (2200 of 2000)"
    )
    # Once per turn: a second "compaction" of the same turn is the agent's own.
    harness.report("alpha", "t1", last=True, compaction=True)
    rows = await harness.groups()
    assert rows[("alpha", "unknown", "openai.cheap")].steps == 1
    assert harness.service._tallies == {}  # nothing kept for a turn that ended


# --- what a hostile agent tries with its own reports ---------------------------------------


async def test_attack_an_agent_cannot_charge_another_agents_turn_or_origin(
    ledger: UsageLedger,
) -> None:
    harness = Harness(ledger, config())
    assert harness.service.admit("beta", HOOK, "webhook.ops:ci-bot/default", "beta-turn") is None
    # alpha names beta's turn: charged to alpha, from an origin nobody gave it
    harness.report("alpha", "beta-turn", last=True)
    rows = await harness.groups()
    assert ("alpha", "unknown", "openai.cheap") in rows
    assert not [key for key in rows if key[0] == "beta" and key[2]]  # beta spent nothing
    assert harness.service.counts.spoofed == 1
    assert harness.published(TurnSpent) == []  # no turn of anyone's was reported


async def test_attack_a_turn_the_daemon_never_opened_is_charged_to_its_reporter(
    harness: Harness,
) -> None:
    harness.report("alpha", "peer:beta/made-up", last=True)
    assert list(await harness.groups()) == [("alpha", "unknown", "openai.cheap")]


async def test_attack_a_provider_outside_the_chain_is_other_at_the_dearest_price(
    harness: Harness,
) -> None:
    assert harness.service.admit("alpha", OPERATOR, "default", "t1") is None
    for n in range(20):  # a label a scrape would carry forever, were it kept
        harness.report("alpha", "t1", provider=f"free.model-{n}", failed=(f"x{n}",) * 50)
    rows = await harness.groups()
    other = rows[("alpha", "operator", "other")]
    assert other.steps == 20 and other.cost == "0.260000"  # 20 x (1000 x 10 + 100 x 30) / 1e6
    labels = {provider for _, provider, _ in harness.service.counts.tokens}
    assert labels == {"other"}
    assert set(harness.service.counts.failovers) == {("alpha", "other")}


@pytest.mark.parametrize(
    "tokens",
    [
        {"input_tokens": -1_000_000},  # a refund
        {"output_tokens": MAX_STEP_TOKENS + 1},
        {"input_tokens": 1.5},
        {"input_tokens": "9" * 40},
    ],
)
async def test_attack_a_negative_or_unbounded_count_is_refused_and_charges_nothing(
    harness: Harness, tokens: dict[str, object]
) -> None:
    assert harness.service.admit("alpha", OPERATOR, "default", "t1") is None
    body = {"turn": "t1", "step": {"provider": "openai.cheap", "tokens": tokens}}
    request = Request(
        id="r", service="usage", op="report", body=msgspec.Raw(msgspec.msgpack.encode(body))
    )
    response = harness.service.serve("alpha", request)
    assert (response.ok, response.error) == (False, "bad_request")
    assert harness.service.counts.malformed == 1
    assert [key[2] for key in await harness.groups()] == [""]  # the turn's start only


async def test_attack_counts_at_their_bound_every_step_saturate_and_never_fail(
    ledger: UsageLedger,
) -> None:
    harness = Harness(ledger, config({"budget": {"tokens_per_day": 10**15}}))
    assert harness.service.admit("alpha", OPERATOR, "default", "t1") is None
    huge = TokenUsage(*(MAX_STEP_TOKENS,) * 4)
    for _ in range(50):
        harness.report("alpha", "t1", provider="openai.dear", tokens=huge)
    await harness.service.flush()
    row = (await harness.groups())[("alpha", "operator", "openai.dear")]
    assert row.steps == 50 and row.cost_pico > 0


async def test_attack_an_agent_that_goes_on_after_its_stop_has_its_turn_cancelled(
    ledger: UsageLedger,
) -> None:
    harness = Harness(ledger, config({"budget": {"tokens_per_day": 1}}))
    assert harness.service.admit("alpha", OPERATOR, "default", "t1") is None
    assert harness.report("alpha", "t1").stop
    assert harness.cancelled == []
    harness.report("alpha", "t1")  # it asks its model again anyway
    assert harness.cancelled == [("alpha", "t1")]
    assert harness.service.counts.ignored_stops == 1


async def test_attack_senders_that_rotate_names_or_sessions_cannot_grow_the_ledger(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_module, "MAX_KEYS_PER_DAY", 5)
    for n in range(30):
        origin = Origin.from_sender("webhook.ops", f"rotating-{n}")
        assert harness.service.admit("alpha", origin, f"s{n}", f"t{n}") is None
        harness.report("alpha", f"t{n}", last=True)
    for n in range(30):  # one sender, a new session name each time
        assert harness.service.admit("alpha", HOOK, f"webhook.ops:ci-bot/{n}", f"u{n}") is None
        harness.report("alpha", f"u{n}", last=True)
    rows = (await harness.service.query("2026-11-01")).rows
    assert len({(r.origin, r.session) for r in rows}) == 6
    overflow = [r for r in rows if r.origin == "webhook.ops:~" and r.provider]
    assert [(r.session, r.steps) for r in overflow] == [("~", 55)]  # charged all the same


async def test_attack_a_breaker_report_keeps_only_the_senders_own_chain(
    harness: Harness,
) -> None:
    report = ProvidersReport(
        (
            ProviderHealth("openai.cheap", "open", 3, float("inf"), "x" * 10_000),
            ProviderHealth("openai.someone-elses", "open", 1),
            ProviderHealth("openai.dear", "closed"),
        )
    )
    request = Request(id="r", service="usage", op="providers", body=encode_body(report))
    assert harness.service.serve("alpha", request).ok
    assert harness.service.serve("beta", request).ok  # beta's chain is one provider
    status = harness.service.provider_status()
    assert [(s.agent, s.provider, s.state) for s in status] == [
        ("alpha", "openai.cheap", "open"),
        ("alpha", "openai.dear", "closed"),
    ]
    assert len(status[0].last_error) == 300 and status[0].retry_in_secs == 0.0
    [changed] = harness.published(ProviderBreakerChanged)
    assert (changed.agent, changed.provider) == ("alpha", "openai.cheap")


async def test_attack_one_breaker_report_changes_each_provider_once(harness: Harness) -> None:
    # The hole: every entry was compared with the state before the report, so one report
    # naming a provider of the chain 5,000 times, alternately open and closed, published
    # 2,500 provider.breaker events and pushed everything else out of the events ring.
    flips = tuple(
        ProviderHealth("openai.cheap", "open" if n % 2 == 0 else "closed", n) for n in range(5000)
    )
    report = ProvidersReport((*flips, ProviderHealth("openai.cheap", "open", 7)))
    request = Request(id="r", service="usage", op="providers", body=encode_body(report))
    assert harness.service.serve("alpha", request).ok
    [changed] = harness.published(ProviderBreakerChanged)
    assert (changed.provider, changed.state, changed.failures) == ("openai.cheap", "open", 7)
    status = harness.service.provider_status()
    assert [(s.provider, s.state) for s in status] == [
        ("openai.cheap", "open"),
        ("openai.dear", "closed"),
    ]


async def test_a_batch_the_ledger_refuses_is_kept_for_the_next_flush(
    tmp_path: Path,
) -> None:
    ledger = UsageLedger(tmp_path / "usage")
    harness = Harness(ledger, config())
    assert harness.service.admit("alpha", OPERATOR, "default", "t1") is None
    ledger.close()
    await harness.service.flush()  # logged, kept
    reopened = UsageLedger(tmp_path / "usage")
    harness.service.ledger = reopened
    await harness.service.flush()
    assert [(k.agent, t.turns) for k, t in reopened.rows()] == [("alpha", 1)]
    reopened.close()


async def test_run_writes_what_gathered_and_once_more_when_cancelled(harness: Harness) -> None:
    harness.service.flush_secs = 3600
    async with trio.open_nursery() as nursery:
        await nursery.start(harness.service.run)
        assert harness.service.admit("alpha", OPERATOR, "default", "t1") is None
        nursery.cancel_scope.cancel()
    assert [t.turns for _, t in harness.service.ledger.rows()] == [1]


async def test_a_turns_hold_ends_with_its_first_step_or_its_end(ledger: UsageLedger) -> None:
    # Attack pass: turns in flight hold their message's tokens (ADR 0057), never for
    # longer than until they charge a step or end without one.
    harness = Harness(ledger, config({"budget": {"tokens_per_day": 2000}}))
    service, text = harness.service, "x" * 8000  # 2004 tokens, estimated
    assert service.admit("alpha", OPERATOR, "default", "t1", text=text) is None
    over = service.admit("alpha", OPERATOR, "default", "t2", text=text)
    assert over is not None and over.spent == 2004  # what t1 holds
    service.closed("alpha", "t1")  # it ended without a step (its agent failed)
    assert service.admit("alpha", OPERATOR, "default", "t3", text=text) is None
    harness.report("alpha", "t3", tokens=TokenUsage(input_tokens=100))  # charged instead
    assert service.admit("alpha", OPERATOR, "default", "t4", text=text) is None
    assert service.book._held.get(service_module.Scope("alpha")) is not None  # t4's
    harness.report("alpha", "t4", tokens=TokenUsage(input_tokens=100), last=True)
    assert service.book._held == {} and service._holds == {}


async def test_attack_a_flood_of_questions_does_not_make_the_daemon_forget_a_chat_turn(
    ledger: UsageLedger,
) -> None:
    # The hole: the router's questions are never closed, so they filled the turns the
    # service remembers (10,000) and pushed out the oldest, an open chat turn too: a
    # peer asking (or senders granted the ask) made a sender's running turn `unknown`,
    # its steps charged to no origin and never stopped by the sender's budget.
    running = config({"budget": {"origins": {"webhook.ops:*": {"tokens_per_day": 1500}}}})
    service = UsageService(ledger, lambda: running, wall=lambda: 1_796_000_000.0, max_turns=4)
    harness = Harness(ledger, running)
    harness.service = service
    assert service.admit("alpha", HOOK, "webhook.ops:ci-bot/default", "t1") is None
    for n in range(20):
        peer = Origin.peer("beta")
        turn = f"beta/{n}"
        assert service.admit_question("alpha", peer, "peer:beta/default", turn, None) is None
    verdict = harness.report("alpha", "t1")  # 1100 tokens: the sender still has room
    assert not verdict.stop and service.counts.spoofed == 0
    verdict = harness.report("alpha", "t1")  # 2200 of 1500: the sender's budget ends it
    # the sender's own budget, told in its terms
    assert verdict.stop and verdict.detail == "your tokens_per_day budget is spent; try again later"
    assert len(service._turns) <= 4 + 1  # the questions stay bounded


def test_a_peers_question_is_refused_in_the_terms_of_the_chat_its_chain_began_with(
    ledger: UsageLedger,
) -> None:
    """The asking agent's model reads the refusal and may pass it on to whom its turn
    answers: for an outside sender's chain (or one the daemon does not know) it names only
    the peer's limit, never the peer's scopes or the amounts; the operator's gets it all."""
    running = config({"budget": {"origins": {"peer:beta": {"tokens_per_day": 1500}}}})
    harness = Harness(ledger, running)
    service = harness.service
    peer, session = Origin.peer("beta"), "peer:beta/default"
    assert service.admit_question("alpha", peer, session, "beta/q1", HOOK) is None
    assert not harness.report("alpha", "beta/q1").stop  # 1100 of 1500
    stopped = harness.report("alpha", "beta/q1")  # mid-turn: 2200 of 1500
    assert stopped.detail == "the peer's tokens_per_day budget is spent; try again later"
    short = "the peer's tokens_per_day budget is spent; try again later"
    assert service.admit_question("alpha", peer, session, "beta/q2", HOOK) == short
    assert service.admit_question("alpha", peer, session, "beta/q3", None) == short
    whole = service.admit_question("alpha", peer, session, "beta/q4", OPERATOR)
    assert whole == "tokens_per_day of peer:beta on agent alpha spent (2200 of 1500)"
    assert service.admit("alpha", OPERATOR, "default", "t1") is None  # not the peer's budget
    # the event keeps the whole line, whoever is told
    assert all("2200 of 1500" in e.detail for e in harness.published(BudgetExceeded))


def test_a_turn_the_daemon_does_not_know_is_told_as_little_as_an_outside_sender(
    ledger: UsageLedger,
) -> None:
    """A made-up turn (or one a flood of questions pushed out) learns no amounts; one
    named as a question is told it is the peer's limit, as its asker would be."""
    harness = Harness(ledger, config({"budget": {"tokens_per_day": 1000}}))
    question = harness.report("alpha", "beta/made-up")  # 1100 of 1000
    assert question.detail == "the peer's tokens_per_day budget is spent; try again later"
    chat = harness.report("alpha", "made-up")
    assert chat.detail == "the agent's tokens_per_day budget is spent; try again later"


def test_a_turn_is_budgeted_only_when_a_budget_applies(ledger: UsageLedger) -> None:
    """ADR 0068: without one, the agent posts its steps' usage and waits for no verdict."""
    assert not Harness(ledger, config()).service.budgeted("alpha", OPERATOR)
    capped = Harness(ledger, config({"budget": {"tokens_per_day": 2000}}))
    assert capped.service.budgeted("alpha", OPERATOR)
    assert capped.service.budgeted("alpha", HOOK)
