"""A conversation's turns run one at a time in the order their messages were taken, however
trio orders the tasks (it runs a batch of new tasks reversed half the time)."""

from __future__ import annotations

import trio
import trio.lowlevel
import trio.testing

from zeroclaw.channels._in_order import InOrder, Place


async def test_turns_spawned_together_run_in_the_order_taken_one_at_a_time() -> None:
    order: InOrder[str] = InOrder()
    ran: list[tuple[str, int]] = []
    running: set[str] = set()

    async def turn(key: str, n: int, place: Place[str]) -> None:
        async with order.turn(place):
            assert key not in running  # one at a time per conversation
            running.add(key)
            ran.append((key, n))
            await trio.lowlevel.checkpoint()  # others run meanwhile
            running.discard(key)

    for _ in range(8):  # eight batches: a reversed one is all but certain
        async with trio.open_nursery() as nursery:
            for n in range(6):
                for key in ("!a", "!b"):
                    nursery.start_soon(turn, key, n, order.take(key))
        for key in ("!a", "!b"):
            assert [n for k, n in ran if k == key] == list(range(6))
        ran.clear()
    assert len(order) == 0


async def test_a_place_left_while_waiting_lets_nobody_ahead_of_the_running_turn() -> None:
    order: InOrder[int] = InOrder()
    release = trio.Event()
    log: list[str] = []

    async def turn(name: str, place: Place[int]) -> None:
        async with order.turn(place):
            log.append(f"{name} in")
            if name == "first":
                await release.wait()
            log.append(f"{name} out")

    async with trio.open_nursery() as nursery:
        first, second, third = order.take(7), order.take(7), order.take(7)
        nursery.start_soon(turn, "first", first)
        with trio.CancelScope() as waiting:
            nursery.start_soon(turn, "third", third)
            await trio.testing.wait_all_tasks_blocked()
            waiting.cancel()
        # the second is cancelled while it waits (its task never got to run here)
        async with trio.open_nursery() as inner:
            inner.cancel_scope.cancel()
            inner.start_soon(turn, "second", second)
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["first in"]  # the third waits for the first, not for the second
        release.set()
    assert log == ["first in", "first out", "third in", "third out"]
    assert len(order) == 0
