"""SocketOwner with real ZeroMQ sockets under trio."""

from __future__ import annotations

import trio
import zmq

from tests.conftest import PATIENCE
from zeroclaw.bus import SocketOwner


async def test_flood_both_ways_through_a_router_relay(tmp_path: object) -> None:
    """Edge-triggered FDs: 20k messages each way at once, all arrive, nothing deadlocks."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    n = 20_000
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.bind("inproc://relay")
    a, b = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
    a.routing_id, b.routing_id = b"A", b"B"
    for s in (a, b):
        s.connect("inproc://relay")
    got = {b"A": 0, b"B": 0}
    done = trio.Event()
    relay: SocketOwner

    def on_relay(frames: list[bytes], _user: bytes) -> bool:
        sender, payload = frames
        relay.send_nowait([b"B" if sender == b"A" else b"A", payload])
        return True

    def counter(name: bytes) -> object:
        def on_frames(frames: list[bytes], _user: bytes) -> bool:
            got[name] += 1
            if got[b"A"] == n and got[b"B"] == n:
                done.set()
            return True

        return on_frames

    relay = SocketOwner(router, on_relay, name="relay", park_per_destination=True)
    owner_a = SocketOwner(a, counter(b"A"), name="a")  # type: ignore[arg-type]
    owner_b = SocketOwner(b, counter(b"B"), name="b")  # type: ignore[arg-type]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for owner in (relay, owner_a, owner_b):
                nursery.start_soon(owner.run)

            async def blast(owner: SocketOwner) -> None:
                for _i in range(n):
                    await owner.send([b"x" * 200])

            nursery.start_soon(blast, owner_a)
            nursery.start_soon(blast, owner_b)
            await done.wait()
            nursery.cancel_scope.cancel()
    assert got == {b"A": n, b"B": n}
    assert owner_a.closed and relay.closed  # sockets closed on cancellation
    ctx.term()


async def test_a_stalled_peer_does_not_block_the_others() -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.sndhwm = 10
    router.bind("inproc://stall")
    slow, fast = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
    slow.routing_id, fast.routing_id = b"slow", b"fast"
    slow.rcvhwm = 10
    for s in (slow, fast):
        s.connect("inproc://stall")
    dropped: list[str] = []
    overflowed = trio.Event()
    joined: set[bytes] = set()
    both_joined = trio.Event()

    def on_relay(frames: list[bytes], _user: bytes) -> bool:
        joined.add(frames[0])  # a peer is routable once the router has heard from it
        if joined == {b"slow", b"fast"}:
            both_joined.set()
        return True

    def on_drop(frames: list[bytes], reason: str) -> None:
        dropped.append(reason)
        overflowed.set()

    relay = SocketOwner(
        router, on_relay, name="relay", park_per_destination=True, max_parked=1000, on_drop=on_drop
    )
    fast_got = trio.Event()
    fast_count = [0]

    def on_fast(frames: list[bytes], _user: bytes) -> bool:
        fast_count[0] += 1
        if fast_count[0] == 100:
            fast_got.set()
        return True

    fast_owner = SocketOwner(fast, on_fast, name="fast")
    with trio.fail_after(PATIENCE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.run)
            nursery.start_soon(fast_owner.run)
            fast_owner.send_nowait([b"hello"])
            slow.send(b"hello")  # the slow peer says hello, then never reads
            await both_joined.wait()
            for _ in range(500):
                relay.send_nowait([b"slow", b"for the slow one"])
            for _ in range(100):
                relay.send_nowait([b"fast", b"for the fast one"])
            await fast_got.wait()  # arrives although "slow" never reads
            assert relay.parked() > 0
            for _ in range(1000):
                relay.send_nowait([b"slow", b"overflow"])
            await overflowed.wait()
            assert set(dropped) == {"destination queue full"}
            nursery.cancel_scope.cancel()
    slow.close(linger=0)
    ctx.term()


async def test_messages_of_any_part_count_arrive_whole_and_unroutable_ones_are_dropped() -> None:
    """The owner sends part by part (ADR 0037): each message keeps its parts and its order,
    and a ROUTER_MANDATORY send to a peer that is not connected is handed to `on_drop`."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.bind("inproc://parts")
    peer = ctx.socket(zmq.DEALER)
    peer.routing_id = b"peer"
    peer.connect("inproc://parts")
    joined = trio.Event()
    dropped: list[tuple[list[bytes], str]] = []
    got_drop = trio.Event()
    received: list[list[bytes]] = []
    all_received = trio.Event()
    sent = [[b"one"], [b"a", b"b"], [b"1", b"2", b"3", b"4", b"5"]]

    def on_router(frames: list[bytes], _user: bytes) -> bool:
        joined.set()
        return True

    def on_drop(frames: list[bytes], reason: str) -> None:
        dropped.append((frames, reason))
        got_drop.set()

    def on_peer(frames: list[bytes], _user: bytes) -> bool:
        received.append(frames)
        if len(received) == len(sent):
            all_received.set()
        return True

    relay = SocketOwner(router, on_router, name="relay", park_per_destination=True, on_drop=on_drop)
    peer_owner = SocketOwner(peer, on_peer, name="peer")
    with trio.fail_after(PATIENCE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.run)
            nursery.start_soon(peer_owner.run)
            peer_owner.send_nowait([b"hello"])
            await joined.wait()
            relay.send_nowait([b"nobody", b"lost"])
            for parts in sent:
                relay.send_nowait([b"peer", *parts])
            await all_received.wait()
            await got_drop.wait()
            nursery.cancel_scope.cancel()
    assert received == sent
    assert [frames for frames, _reason in dropped] == [[b"nobody", b"lost"]]
    ctx.term()
