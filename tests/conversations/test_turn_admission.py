"""The turn service asks the daemon's budgets before a turn's message goes to its agent
(issue 27): a refusal is `budget_exceeded` and the agent never hears of the turn; an origin
the router refuses anyway spends no budget; an admitted turn is closed when it ends."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trio

from tests.conftest import PATIENCE
from tests.conversations.helpers import bench, read_all
from zeroclaw._ops import decode_body
from zeroclaw.bus import Origin
from zeroclaw.conversations import TurnRefused
from zeroclaw.turns import TurnDone, TurnInput


@dataclass
class Over:
    detail: str

    def told_to(self, origin: Origin) -> str:
        return self.detail


class Admission:
    """The budgets as the turn service sees them (`TurnAdmission`): it records what it is
    asked, and refuses everything when told to."""

    def __init__(self, refuse: bool = False, budgets: bool = True) -> None:
        self.refuse = refuse
        self.budgets = budgets
        self.admitted: list[tuple[str, str, str]] = []
        self.closed_turn_ids: list[str] = []

    def admit(
        self, agent: str, origin: Origin, session: str, turn: str, *, text: str = ""
    ) -> Over | None:
        if self.refuse:
            return Over("turns_per_hour of agent alpha spent (3 of 3)")
        self.admitted.append((agent, origin.who, session))
        return None

    def budgeted(self, agent: str, origin: Origin) -> bool:
        return self.budgets

    def closed(self, agent: str, turn: str) -> None:
        self.closed_turn_ids.append(turn)


async def test_an_admitted_turn_runs_and_is_closed_with_its_session(tmp_path: Path) -> None:
    budgets = Admission()
    async with bench(tmp_path, admission=budgets) as b:
        await b.agent(tmp_path)
        with trio.fail_after(PATIENCE):
            async with b.service.open_turn(
                "alpha", "hello", session="s1", origin=Origin.operator("cli.local")
            ) as turn:
                events = await read_all(turn)
        assert isinstance(events[-1], TurnDone)
        assert budgets.admitted == [("alpha", "operator", "s1")]
        assert budgets.closed_turn_ids == [turn.id]


async def test_a_refused_turn_never_reaches_its_agent(tmp_path: Path) -> None:
    budgets = Admission(refuse=True)
    async with bench(tmp_path, admission=budgets) as b:
        _, delivered = await b.client("alpha")
        with trio.fail_after(PATIENCE):
            async with b.service.open_turn(
                "alpha", "hello", session=None, origin=Origin.operator("cli.local")
            ) as turn:
                [refused] = await read_all(turn)
        assert refused == TurnRefused(
            "budget_exceeded", "turns_per_hour of agent alpha spent (3 of 3)"
        )
        assert turn.outcome == "refused" and budgets.closed_turn_ids == []
        with trio.move_on_after(0.2):  # nothing comes: there is no event to await
            message = await delivered.receive()
            raise AssertionError(f"the agent heard of a refused turn: {message}")


async def test_attack_an_origin_the_router_refuses_spends_no_budget(tmp_path: Path) -> None:
    """A sender alpha does not accept (no group admits it) must not use up the budgets of
    those it does: the router refuses it, and the budgets never count it."""
    budgets = Admission()
    async with bench(tmp_path, admission=budgets) as b:
        await b.client("alpha")
        with trio.fail_after(PATIENCE):
            async with b.service.open_turn(
                "alpha", "hi", session=None, origin=Origin.from_sender("cli.local", "mallory")
            ) as turn:
                [refused] = await read_all(turn)
        assert isinstance(refused, TurnRefused) and refused.code == "origin_not_allowed"
        assert budgets.admitted == [] and budgets.closed_turn_ids == []


async def test_the_agent_is_told_whether_a_budget_applies_to_its_turn(tmp_path: Path) -> None:
    """ADR 0068: when none does, the agent posts its steps' usage instead of waiting."""
    told = []
    for budgets in (True, False):
        async with bench(tmp_path / str(budgets), admission=Admission(budgets=budgets)) as b:
            _, delivered = await b.client("alpha")
            with trio.fail_after(PATIENCE):
                async with b.service.open_turn(
                    "alpha", "hello", session=None, origin=Origin.operator("cli.local")
                ):
                    message = await delivered.receive()
            told.append(decode_body(message.body, TurnInput).budgeted)
    assert told == [True, False]
