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
    scopes: dict[str, trio.CancelScope] = {}

    async def turn(name: str, place: Place[int]) -> None:
        with trio.CancelScope() as scopes[name]:
            async with order.turn(place):
                log.append(f"{name} in")
                if name == "first":
                    await release.wait()
                log.append(f"{name} out")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for name in ("first", "second", "third"):
                nursery.start_soon(turn, name, order.take(7))
            await trio.testing.wait_all_tasks_blocked()
            scopes["second"].cancel()  # it leaves while the first runs and the third waits
            await trio.testing.wait_all_tasks_blocked()
            assert log == ["first in"]  # the third waits for the first, not for the second
            release.set()
    assert log == ["first in", "first out", "third in", "third out"]
    assert len(order) == 0
