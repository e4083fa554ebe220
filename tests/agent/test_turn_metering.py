"""How a turn reports its steps' usage to the daemon (ADR 0057): a step after which the
turn goes on waits for the daemon's verdict, unless the daemon said no budget applies to
the turn; then every step is posted and the turn never waits (ADR 0068)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from tests.agent.helpers import local_engine
from tests.conftest import PATIENCE
from zeroclaw.providers import OfflineProvider
from zeroclaw.turns import UsageReport, UsageVerdict


class Meter:
    """The daemon's usage service as the engine sees it; its verdicts come only when
    `answer` is set."""

    def __init__(self) -> None:
        self.waited: list[UsageReport] = []
        self.posted: list[UsageReport] = []
        self.answer = trio.Event()

    async def step(self, report: UsageReport) -> UsageVerdict:
        self.waited.append(report)
        await self.answer.wait()
        return UsageVerdict()

    def post(self, report: UsageReport) -> None:
        self.posted.append(report)


async def test_a_turn_no_budget_applies_to_posts_every_step_and_never_waits(
    tmp_path: Path,
) -> None:
    meter = Meter()  # it never answers: a turn that waited would never end
    async with local_engine(OfflineProvider(), tmp_path) as (engine, _):
        engine.meter = meter
        with trio.fail_after(PATIENCE):
            result = await engine.run_turn("remember: the plan", turn_id="t1", budgeted=False)
    assert [c.name for c in result.tool_calls] == ["memory_store"]
    assert meter.waited == []
    assert [(r.turn, r.last) for r in meter.posted] == [("t1", False), ("t1", True)]


async def test_a_budgeted_turn_waits_for_the_verdict_on_a_step_it_goes_on_after(
    tmp_path: Path,
) -> None:
    meter = Meter()
    async with local_engine(OfflineProvider(), tmp_path) as (engine, _):
        engine.meter = meter
        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def turn() -> None:
                await engine.run_turn("remember: the plan", turn_id="t1")
                done.set()

            nursery.start_soon(turn)
            with trio.fail_after(PATIENCE):
                while not meter.waited:
                    await trio.testing.wait_all_tasks_blocked()
            assert not done.is_set() and meter.posted == []  # held by the verdict
            meter.answer.set()
    assert [(r.turn, r.last) for r in meter.posted] == [("t1", True)]
