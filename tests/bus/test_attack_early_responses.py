"""Attacks on the Responses an agent's bus keeps unclaimed (ADR 0068). Whoever can open
turns on an agent (a gateway sender, a channel) while its turns wait before taking their
context (MCP servers starting, a session's previous append) sends more contexts than the
bus keeps; and late answers to the agent's own requests (their callers gave up) landed in
the same few slots. A context pushed out must not cost its turn the full wait: the engine
asks memory at once. Driven frame by frame (no socket)."""

from __future__ import annotations

import trio
import trio.testing

from tests.bus.test_client_responses import arrive, client
from zeroclaw.bus._client import EARLY_RESPONSES
from zeroclaw.bus._wire import Response
from zeroclaw.turns import context_id


async def test_a_context_pushed_out_by_newer_ones_is_given_up_at_once() -> None:
    bus = client()
    turns = [f"turn-1-{i}" for i in range(EARLY_RESPONSES + 3)]
    for turn in turns:
        arrive(bus, Response(id=context_id(turn), ok=True))
    # The first three were pushed out: their turns ask memory now, not after 30 s.
    for turn in turns[:3]:
        with trio.testing.assert_no_checkpoints():
            assert await bus.expect(context_id(turn), wait_secs=30) is None
    for turn in turns[3:]:
        got = await bus.expect(context_id(turn), wait_secs=0)
        assert got is not None and got.ok


async def test_late_answers_to_the_agents_own_requests_push_out_no_context() -> None:
    bus = client()
    arrive(bus, Response(id=context_id("turn-1-1"), ok=True))
    for _ in range(EARLY_RESPONSES * 2):  # answers whose callers timed out
        arrive(bus, Response(id=bus.new_id(), ok=False, error="busy"))
    got = await bus.expect(context_id("turn-1-1"), wait_secs=0)
    assert got is not None and got.ok
