"""The event sink: a bounded ring, ordered numbering, subscribers that lose only the oldest."""

from __future__ import annotations

import msgspec
import trio
import trio.testing

from zeroclaw.events import (
    AgentTransition,
    Event,
    EventSink,
    MemoryOperation,
    Published,
    ReloadApplied,
    RouteRefused,
)


def transition(i: int) -> AgentTransition:
    return AgentTransition(alias=f"a{i}", from_state="starting", to_state="running")


def test_the_ring_keeps_only_the_newest_events_in_order() -> None:
    sink = EventSink(capacity=3, clock=lambda: 42.0)
    for i in range(5):
        sink.publish(transition(i))
    kept = sink.recent()
    assert [p.seq for p in kept] == [3, 4, 5]
    assert [p.event for p in kept] == [transition(2), transition(3), transition(4)]
    assert sink.recent(2) == kept[1:]
    assert sink.recent(0) == []
    assert sink.last_seq == 5
    assert kept[0].at == 42.0


def test_events_cross_a_process_boundary_as_a_tagged_union() -> None:
    item = Published(1, 1.5, RouteRefused(sender="alpha", to="beta", code="not_peers"))
    raw = msgspec.msgpack.encode(item)
    assert msgspec.msgpack.decode(raw, type=Published) == item
    assert msgspec.json.decode(
        msgspec.json.encode(MemoryOperation(agent="a", op="store")), type=Event
    ) == MemoryOperation(agent="a", op="store")
    assert b'"kind":"route.refused"' in msgspec.json.encode(item.event)


async def test_a_subscriber_gets_what_follows_and_a_slow_one_loses_the_oldest() -> None:
    sink = EventSink()
    sink.publish(transition(0))  # before subscribing: not delivered
    got: list[Event] = []
    with sink.subscribe(buffer=2) as subscription:
        for i in range(1, 4):
            sink.publish(transition(i))
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                async for item in subscription:
                    got.append(item.event)
                    if len(got) == 3:
                        return

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            sink.publish(transition(4))
    assert got == [transition(2), transition(3), transition(4)]
    assert subscription.lost == 1
    # Leaving the block unsubscribes: later events go nowhere.
    sink.publish(transition(5))
    assert not sink._subscribers


async def test_a_wait_for_events_cut_by_a_deadline_loses_nothing() -> None:
    """A follower waits for the next event with a deadline (then writes a keepalive) and
    waits again: each wait cut short leaves the subscription whole."""
    sink = EventSink()
    with sink.subscribe() as subscription:
        for _ in range(3):
            with trio.move_on_after(0.01) as cut:
                await subscription.ready()
            assert cut.cancelled_caught and subscription.take() == []
        sink.publish(transition(1))
        sink.publish(transition(2))
        await subscription.ready()  # something is queued: at once
        assert [p.event for p in subscription.take()] == [transition(1), transition(2)]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(subscription.ready)
            await trio.testing.wait_all_tasks_blocked()
            sink.publish(transition(3))
        assert [p.event for p in subscription.take()] == [transition(3)]


def test_a_subscriber_of_some_kinds_is_offered_only_those() -> None:
    """A task that waits for reloads is not woken by every turn's events (ADR 0068)."""
    sink = EventSink()
    reloads = sink.subscribe(kinds=(ReloadApplied,))
    everything = sink.subscribe()
    sink.publish(transition(1))
    sink.publish(MemoryOperation(agent="alpha", op="context"))
    assert reloads.take() == []  # nothing queued, nobody woken
    applied = ReloadApplied(outcome="ok")
    sink.publish(applied)
    assert [p.event for p in reloads.take()] == [applied]
    assert [p.seq for p in everything.take()] == [1, 2, 3]
