"""Questions and answers between agents are typed bodies: a real agent runtime answers a
question it cannot decode with an error at once, instead of leaving the asker waiting."""

from __future__ import annotations

from pathlib import Path

from tests.bodies import raw
from tests.conversations.helpers import bench
from zeroclaw._ops import decode_body
from zeroclaw.bus import PeerAnswer, PeerQuestion

PAIR = {"pair": {"channel": "cli", "agents": ["alpha", "beta"]}}


async def test_a_question_that_does_not_decode_is_answered_with_an_error(
    root: Path, tmp_path: Path
) -> None:
    async with bench(root, groups=PAIR) as b:
        await b.agent(tmp_path)  # alpha: a real runtime
        beta, inbox = await b.client("beta")
        outcome = await beta.send("alpha", "", raw(["not", "a", "question"]), kind="ask")
        assert outcome.delivered
        reply = await inbox.receive()
    assert reply.kind == "reply" and reply.from_ == "alpha"
    answer = decode_body(reply.body, PeerAnswer)
    assert answer.in_reply_to == outcome.id
    assert answer.error == "the question does not decode"


async def test_a_typed_question_gets_the_turns_reply(root: Path, tmp_path: Path) -> None:
    async with bench(root, groups=PAIR) as b:
        await b.agent(tmp_path)
        beta, inbox = await b.client("beta")
        outcome = await beta.send("alpha", "", PeerQuestion("hello"), kind="ask")
        reply = await inbox.receive()
    answer = decode_body(reply.body, PeerAnswer)
    assert (answer.in_reply_to, answer.error) == (outcome.id, None)
    assert answer.text.startswith("Hello, I am alpha")
