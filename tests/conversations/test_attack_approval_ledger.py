"""The daemon's record of the approvals its turns were given (ADR 0052), attacked by an agent
with its real keys whose turn's approvals its own accomplice answers (a channel whose
`approvals` is "sender", or an operator who says yes to everything): the record stays
bounded however many a turn is given, and what it keeps is a yes just given."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.conversations.helpers import bench
from tests.conversations.test_service import CLI
from zeroclaw.conversations import Turn
from zeroclaw.turns import TURN_APPROVE, ApprovalAnswer, ApprovalAsked, ApprovalQuestion
from zeroclaw.turns._approval_ledger import MAX_APPROVALS_PER_TURN

PATIENCE = 60.0
ASKED = 3 * MAX_APPROVALS_PER_TURN


async def next_question(turn: Turn) -> ApprovalAsked:
    async for event in turn.events():
        if isinstance(event, ApprovalAsked):
            return event
    raise AssertionError("the turn ended before its question")


async def test_a_turn_given_yes_after_yes_keeps_a_bounded_record(root: Path) -> None:
    # The hole: every yes was recorded until the turn closed, and an agent decides when its
    # turn ends: one long turn of distinct questions, each answered yes, grew the daemon's
    # memory without end (500 characters a question).
    async with bench(root) as b:
        alpha, inbox = await b.client("alpha")
        async with b.service.open_turn("alpha", "hi", session=None, origin=CLI) as turn:
            turn_id = (await inbox.receive()).id
            answers: list[ApprovalAnswer] = []

            async def ask(what: str) -> None:
                answers.append(await alpha.call(TURN_APPROVE, ApprovalQuestion(turn_id, what)))

            for i in range(ASKED):
                with trio.fail_after(PATIENCE):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(ask, f"run step {i}: " + "x" * 480)
                        asked = await next_question(turn)
                        assert turn.answer_approval(asked.rid, True)
            assert answers == [ApprovalAnswer(True)] * ASKED
            ledger = b.service.approvals
            assert len(ledger) <= MAX_APPROVALS_PER_TURN
            # the latest yes is kept, for the service that acts on it
            assert ledger.take("alpha", turn_id, f"run step {ASKED - 1}: " + "x" * 480)
        assert len(b.service.approvals) == 0  # and the turn's end forgets the rest
