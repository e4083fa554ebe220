"""EventsFollowCommand in process: a real EventSink, and a client whose "socket" is a bounded
memory channel (a full channel is a client that does not read)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from zeroclaw.control import AnyRequest, EventsFollow, Exchange, Reply
from zeroclaw.events import AgentTransition, EventSink, MemoryOperation
from zeroclaw.supervisor._commands import EventsFollowCommand, events_send_secs


class Client:
    """One connection: `socket` holds `room` replies before a send blocks."""

    def __init__(self, room: int = 10_000) -> None:
        self.to_client, self.socket = trio.open_memory_channel[Reply[Any]](room)
        self.requests, inbox = trio.open_memory_channel[AnyRequest](16)
        self.exchange = Exchange(self.to_client.send, inbox)
        self.final: Reply[Any] | None = None
        self.error: BaseException | None = None
        self.done = trio.Event()

    async def run(self, handler: EventsFollowCommand, request: EventsFollow) -> None:
        try:
            self.final = await handler(request, self.exchange)
        except trio.BrokenResourceError as exc:  # what the control server closes on
            self.error = exc
        finally:
            self.done.set()

    def received(self) -> list[Reply[Any]]:
        out = []
        while True:
            try:
                out.append(self.socket.receive_nowait())
            except trio.WouldBlock:
                return out

    def seqs(self) -> list[int]:
        return [p.seq for r in self.received() if r.data is not None for p in r.data.events]


def transition(alias: str) -> AgentTransition:
    return AgentTransition(alias, "running", "backoff", "killed by signal 9")


async def test_backlog_then_live_events_with_no_gap_and_no_repeat() -> None:
    sink = EventSink()
    for _ in range(3):
        sink.publish(transition("alpha"))
    sink.publish(transition("beta"))
    handler = EventsFollowCommand(sink, send_secs=5)
    client = Client()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run, handler, EventsFollow(agents=("alpha",), backlog=2))
        await trio.testing.wait_all_tasks_blocked()
        assert handler.followers == 1
        sink.publish(transition("beta"))
        sink.publish(transition("alpha"))
        sink.publish(MemoryOperation(agent="alpha", op="purge"))
        await trio.testing.wait_all_tasks_blocked()
        assert client.seqs() == [2, 3, 6, 7]
        client.requests.close()  # the client goes away: the follow ends
        await client.done.wait()
    assert client.final is not None and client.final.error == "cancelled"
    assert handler.followers == 0 and not sink._subscribers


async def test_without_follow_the_backlog_comes_in_batches_and_ends() -> None:
    sink = EventSink()
    for _ in range(600):
        sink.publish(transition("alpha"))
    client = Client()
    await client.run(EventsFollowCommand(sink, send_secs=5), EventsFollow(follow=False))
    streamed = client.received()
    assert [len(r.data.events) for r in streamed] == [256, 256]
    assert all(r.more for r in streamed)
    assert client.final is not None and not client.final.more
    assert len(client.final.data.events) == 88


async def test_a_reader_that_falls_behind_its_buffer_is_told_slow_reader() -> None:
    sink = EventSink()
    handler = EventsFollowCommand(sink, send_secs=60, buffer=8)
    client = Client(room=2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run, handler, EventsFollow(backlog=0))
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(20):  # publish never waits for the reader
            sink.publish(transition("alpha"))
            await trio.testing.wait_all_tasks_blocked()
        assert not client.done.is_set()  # blocked on the third event's send
        got = client.received()  # it reads again: the handler finds its buffer overflowed
        await client.done.wait()
        got += client.received()
    assert [p.seq for r in got[:-1] for p in r.data.events] == [1, 2, 3]
    assert got[-1].error == "slow_reader" and "8 events behind" in (got[-1].message or "")
    assert isinstance(client.error, trio.BrokenResourceError) and client.final is None
    assert handler.cut_off == 1 and handler.followers == 0 and not sink._subscribers


async def test_a_socket_that_stays_full_is_closed_after_the_deadline(
    autojump_clock: trio.abc.Clock,
) -> None:
    sink = EventSink()
    handler = EventsFollowCommand(sink, send_secs=3)
    client = Client(room=1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run, handler, EventsFollow(backlog=0))
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        sink.publish(transition("alpha"))
        sink.publish(transition("alpha"))  # the first fills the socket, this one waits
        await client.done.wait()
    assert 3 <= trio.current_time() - began < 4
    # No last word after a send cut short: only the event that fitted is there.
    assert [r.error for r in client.received()] == [None]
    assert isinstance(client.error, trio.BrokenResourceError)


async def test_followers_are_bounded_and_unknown_kinds_refused() -> None:
    sink = EventSink()
    handler = EventsFollowCommand(sink, max_followers=2, send_secs=5)
    clients = [Client() for _ in range(3)]
    async with trio.open_nursery() as nursery:
        for client in clients[:2]:
            nursery.start_soon(client.run, handler, EventsFollow())
        await trio.testing.wait_all_tasks_blocked()
        await clients[2].run(handler, EventsFollow())
        assert clients[2].final is not None and clients[2].final.error == "busy"
        # Not following is not bounded.
        await clients[2].run(handler, EventsFollow(follow=False))
        assert clients[2].final is not None and clients[2].final.ok
        for client in clients[:2]:
            client.requests.close()
    refused = Client()
    await refused.run(handler, EventsFollow(kinds=("agent", "agnt")))
    assert refused.final is not None and refused.final.error == "bad_request"
    assert "'agnt'" in (refused.final.message or "")


@pytest.mark.parametrize(
    ("raw", "secs"), [(None, 3.0), ("0.5", 0.5), ("0", 3.0), ("nan", 3.0), ("x", 3.0)]
)
def test_the_send_deadline_from_the_environment(raw: str | None, secs: float) -> None:
    env = {} if raw is None else {"ZEROCLAW_EVENTS_SEND_SECS": raw}
    assert events_send_secs(env) == secs
