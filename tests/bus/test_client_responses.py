"""The agent's bus client and Responses it did not ask for (ADR 0068): the daemon sends a
chat turn's context right behind the turn's message, so it may arrive before the runtime
waits for it; it is kept, a bounded few, for `expect`. Driven frame by frame (no socket)."""

from __future__ import annotations

import trio
import trio.testing

from zeroclaw.bus import AgentBus, BusCredentials
from zeroclaw.bus._client import EARLY_RESPONSES
from zeroclaw.bus._wire import Response, encode


def client() -> AgentBus:
    return AgentBus(BusCredentials("alpha", "ipc://unused", b"s", b"p", b"k", 1 << 20))


def arrive(bus: AgentBus, response: Response) -> None:
    bus._on_frames([encode(response)], b"")


async def test_a_response_that_arrives_first_is_there_when_expected() -> None:
    bus = client()
    arrive(bus, Response(id="turn-1/context", ok=True))
    with trio.testing.assert_no_checkpoints():
        got = await bus.expect("turn-1/context", wait_secs=0)
    assert got is not None and got.id == "turn-1/context"
    assert await bus.expect("turn-1/context", wait_secs=0) is None  # taken once


async def test_a_response_that_arrives_later_wakes_its_waiter() -> None:
    bus = client()
    got: list[Response | None] = []

    async def wait() -> None:
        got.append(await bus.expect("turn-2/context", wait_secs=30))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        arrive(bus, Response(id="turn-2/context", ok=False, error="none"))
    assert [r.ok if r else None for r in got] == [False]


def test_unclaimed_responses_are_kept_only_a_few() -> None:
    bus = client()
    for i in range(EARLY_RESPONSES + 5):
        arrive(bus, Response(id=f"late-{i}"))
    assert list(bus._early) == [f"late-{i}" for i in range(5, EARLY_RESPONSES + 5)]
