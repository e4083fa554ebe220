"""The control server's trio shell on a real socket: whatever a crowd holds, status gets in.

The handler here is a stand-in for the daemon's (status answers at once, anything else runs
until cancelled), so the property is about admission, reaping and reserved slots on real
connections, not about what the daemon does with a request.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.config import ControlLimits
from zeroclaw.control import (
    AgentStart,
    AnyRequest,
    ChatOpen,
    FrameDecoder,
    Reply,
    Status,
    control_address,
    decode_reply,
    encode,
    encode_frame,
)
from zeroclaw.supervisor._admission import ConnectionTable
from zeroclaw.supervisor._control_server import ControlServer, Exchange, bind_control_socket

CAPACITY, RESERVED = 6, 2
_names = itertools.count()


async def handler(request: AnyRequest, exchange: Exchange) -> Reply:
    if isinstance(request, (Status, ChatOpen)):
        return Reply(ok=True, data={"answered": type(request).__name__})
    await trio.sleep_forever()  # a request that keeps its connection busy
    raise AssertionError("unreachable")


async def ask(stream: trio.SocketStream, request: AnyRequest, wait: bool = True) -> Reply | None:
    await stream.send_all(encode_frame(encode(request)))
    if not wait:
        return None
    decoder = FrameDecoder(1 << 20)
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return None  # closed: reaped or refused before answering
        frames = decoder.feed(data)
        if frames:
            return decode_reply(frames[0])


async def crowd_then_status(runtime_dir: Path, kinds: list[str]) -> tuple[Reply | None, int]:
    table = ConnectionTable(capacity=CAPACITY, reserved=RESERVED, per_peer=1000)
    server = ControlServer(
        bind_control_socket(runtime_dir), handler, zygote_pid=-1, daemon_pid=-1, table=table
    )
    address = control_address(runtime_dir)
    held: list[trio.SocketStream] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        for kind in kinds:
            sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
            await sock.connect(address)
            stream = trio.SocketStream(sock)
            held.append(stream)
            if kind == "asking":
                await ask(stream, Status())
            elif kind == "chat":
                await ask(stream, ChatOpen(agent="alpha"))
            elif kind == "busy":
                await ask(stream, AgentStart(alias="x"), wait=False)
            await trio.testing.wait_all_tasks_blocked()  # the server has done all it can
        in_use = sum(1 for _, _, busy, chat, _ in table.snapshot().values() if busy or chat)
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.connect(address)
        async with trio.SocketStream(sock) as operator:
            reply = await ask(operator, Status())
        for stream in held:
            await stream.aclose()
        nursery.cancel_scope.cancel()
    return reply, in_use


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["idle", "asking", "busy", "chat"]), max_size=14))
def test_status_always_gets_in(kinds: list[str]) -> None:
    """Idle connections, answered ones, requests that never finish and chat sessions, in any
    mix and number (up to past capacity plus reserve): the operator's status is answered."""
    runtime_dir = Path(f"/nonexistent/zeroclaw-test-{os.getpid()}-{next(_names)}")
    reply, in_use = trio.run(crowd_then_status, runtime_dir, kinds)
    assert reply is not None and reply.ok, (kinds, reply)
    # Busy requests and chat sessions are never reaped; only the general pool holds them.
    assert in_use == min(sum(1 for k in kinds if k in ("busy", "chat")), CAPACITY)


async def one_process_over_its_limit(runtime_dir: Path) -> tuple[list[bool], list[bool]]:
    """Connections of this process, each asked one status (so idle), with a per-process
    limit of 2, then of 4 (a reload): which of them the server had closed, after each."""
    limits = [ControlLimits(max_connections=10, max_per_process=2)]
    server = ControlServer(
        bind_control_socket(runtime_dir),
        handler,
        zygote_pid=-1,
        daemon_pid=-1,
        limits=lambda: limits[0],
    )
    address = control_address(runtime_dir)
    held: list[trio.SocketStream] = []

    async def connect() -> None:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.connect(address)
        held.append(trio.SocketStream(sock))
        reply = await ask(held[-1], Status())
        assert reply is not None and reply.ok
        await trio.testing.wait_all_tasks_blocked()

    async def closed() -> list[bool]:
        return [_at_eof(stream) for stream in held]

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        for _ in range(3):
            await connect()
        first = await closed()
        limits[0] = ControlLimits(max_connections=10, max_per_process=4)
        for _ in range(2):
            await connect()
        second = await closed()
        for stream in held:
            await stream.aclose()
        nursery.cancel_scope.cancel()
    return first, second


def test_the_per_process_limit_is_the_configs_read_at_each_connect() -> None:
    """`[daemon] control_limits`: a process over its limit loses its oldest idle
    connection; a raised limit (a reload) lets it hold more, closing nothing."""
    runtime_dir = Path(f"/nonexistent/zeroclaw-test-{os.getpid()}-{next(_names)}")
    first, second = trio.run(one_process_over_its_limit, runtime_dir)
    assert first == [True, False, False]
    assert second == [True, False, False, False, False]


def _at_eof(stream: trio.SocketStream) -> bool:
    """Whether the server closed this connection (a read that does not wait)."""
    with socket.socket(fileno=os.dup(stream.socket.fileno())) as sock:
        try:
            return sock.recv(1, socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
