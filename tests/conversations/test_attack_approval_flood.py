"""An agent's approval questions count against its turn's bound as its events do: a flood
of them into a turn nobody reads cuts the turn off, and each question beyond is denied at
once, instead of growing the daemon's backlog (and the operator's prompts) without end."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.conversations.helpers import bench, read_all
from tests.conversations.test_service import CLI, post
from zeroclaw._ops import decode_body
from zeroclaw.conversations import TurnOverflow
from zeroclaw.turns import TURN_SERVICE, ApprovalAnswer, ApprovalAsked, ApprovalQuestion

PATIENCE = 60.0


async def test_approval_questions_beyond_the_turns_bound_overflow_it(root: Path) -> None:
    async with bench(root, max_buffered=5) as b:
        alpha, inbox = await b.client("alpha")
        async with b.service.open_turn("alpha", "hi", session=None, origin=CLI) as turn:
            turn_id = (await inbox.receive()).id
            for i in range(10):
                post(alpha, ApprovalQuestion(turn_id, f"q{i}"), op="approve")
            with trio.fail_after(PATIENCE):  # a generous bound: it comes at once
                cancel = await inbox.receive()  # the service stopped the agent's work
            assert cancel.kind == "cancel"
            # After every question on alpha's socket: all were taken, this one is denied.
            answer = await alpha.request(TURN_SERVICE, "approve", ApprovalQuestion(turn_id, "x"))
            assert decode_body(answer.body, ApprovalAnswer) == ApprovalAnswer(False)
            assert len(turn.pending_approvals) == 5
            events = await read_all(turn)
    assert [e.what for e in events if isinstance(e, ApprovalAsked)] == [f"q{i}" for i in range(5)]
    assert events[-1] == TurnOverflow(5)
