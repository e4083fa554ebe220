"""What our small HTTP servers on hypercorn's trio worker share (the webhook channel, the
metrics listener, the gateway): a quiet hypercorn config, the listening socket, the ASGI
lifespan handshake every app must answer, a body read within a size cap, and
`serve_guarded`, which serves an app on a bound socket within the bounds an outside client
gets (ADR 0045: a connection cap, a descriptor reserve, read deadlines)."""

from __future__ import annotations

import errno
import logging
import math
import os
import resource
import select
import socket
import ssl
from collections.abc import Callable
from typing import Any, cast

import hypercorn.config
import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.events import Event, Updated
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGIReceiveEvent,
    ASGISendCallable,
    ASGISendEvent,
    ConnectionState,
    Scope,
)

from ._http_guard import (
    ConnectionClock,
    Cut,
    HttpBounds,
    admit_connection,
    body_deadline,
    descriptor_reserve,
)
from ._listeners import LISTENERS
from ._log_throttle import LogThrottle
from ._unix import LISTEN_BACKLOG


def bind_listener(listen: str) -> socket.socket:
    """A listening TCP socket on `host:port` ([v6]:port too); OSError when it cannot bind.
    Listening at once: no other socket can take the port meanwhile. The accept queue is as
    long as the kernel allows (`LISTEN_BACKLOG`): a full one drops a client's SYN, which it
    sends again only a second later; the listener's own cap decides whom it serves."""
    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


class ClientGone(Exception):
    """The client went away before its request body arrived."""


async def read_body(
    receive: ASGIReceiveCallable, declared_length: str | None, limit: int
) -> bytes | None:
    """The request body, or None as soon as it is over `limit` bytes (declared so, or
    sent so): the rest is never read. ClientGone when the client leaves first."""
    if declared_length is not None and declared_length.isdigit() and int(declared_length) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone
        size += len(message["body"])
        if size > limit:
            return None
        chunks.append(message["body"])
        if not message.get("more_body", False):
            return b"".join(chunks)


def quiet_config(log_name: str) -> hypercorn.config.Config:
    """No access log, no Server header, errors to `log_name`, a short graceful shutdown."""
    config = hypercorn.config.Config()
    config.accesslog = None
    config.errorlog = logging.getLogger(log_name)
    config.include_server_header = False
    config.graceful_timeout = 1.0
    return config


async def answer_lifespan(receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    """The lifespan scope: nothing to start or stop, so each step is complete at once."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


# --------------------------------------------------------------------------- guarded serving

ACCEPT_RETRY_SECS = 0.1  # after an accept that found no descriptor: do not spin
HANGUP_POLL_SECS = 1.0  # how often a connection is looked at for a client that hung up
CUT_LOG_INTERVAL_SECS = 10.0  # a flood of cut connections is a line per cause per interval
_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def open_descriptors(limit: int) -> int:
    """How many descriptors this process holds (the directory read itself not counted), or
    a bound above it when that bound is clear of `limit` less the reserve: listing
    /proc/self/fd costs ~0.5 µs a descriptor, 1 ms per accepted connection in a daemon
    whose 1,100 agents run (ADR 0069), where the size of the descriptor table (which
    holds every open one) is one short read."""
    table = _descriptor_table_size()
    if table is not None and table < limit - descriptor_reserve(limit):
        return table
    try:
        return len(os.listdir("/proc/self/fd")) - 1
    except OSError:  # out of descriptors for the read itself: as full as it gets
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _descriptor_table_size() -> int | None:
    """`FDSize` of /proc/self/status: the slots of this process's descriptor table."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"FDSize:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class _GuardedStream(trio.abc.HalfCloseableStream):
    """A connection whose reads end at the `ConnectionClock`'s deadline: the connection is
    then broken, which hypercorn answers by closing it. Under TLS `inner` is the TLS
    stream, so the clock sees the plain HTTP bytes."""

    def __init__(
        self,
        inner: trio.SocketStream | trio.SSLStream[trio.SocketStream],
        sock: trio.socket.SocketType,
        clock: ConnectionClock,
        on_cut: Callable[[Cut], None],
        send_timeout: float,
    ) -> None:
        self._inner = inner
        self._send_timeout = send_timeout
        self._on_cut = on_cut
        self.socket = sock  # hypercorn reads the peer's address from it
        self.clock = clock
        self.cut: Cut | None = None
        self._reading = trio.CancelScope()
        self.serving = trio.CancelScope()  # the connection's server runs in it

    def _deadline(self) -> float:
        deadline = self.clock.deadline()
        return math.inf if deadline is None else deadline

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        with trio.CancelScope(deadline=self._deadline()) as self._reading:
            data = await self._inner.receive_some(max_bytes)
            if not data:
                # The client is gone: hypercorn drops its request too, but would keep the
                # connection (and its place under the cap) until its keep-alive timer.
                self.serving.cancel()
            self.clock.received(bytes(data), trio.current_time())
            return bytes(data)
        # Closed here and now, and the connection's server stopped: hypercorn would keep
        # the connection (and its place under the cap) until its own keep-alive timer.
        self.cut = self.clock.expired()
        if self.cut is not None:
            self._on_cut(self.cut)
        self.close_now()
        self.serving.cancel()
        raise trio.BrokenResourceError(f"the client was too slow ({self.cut})")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # A client that does not read its answer would hold the connection: hypercorn
        # shields its sends from cancellation, so the bound is here.
        with trio.move_on_after(self._send_timeout):
            await self._inner.send_all(data)
            self.clock.sent(bytes(data[:16]), trio.current_time())
            self._reading.deadline = self._deadline()  # a read waiting now gets the new one
            return
        self.cut = "send_timeout"
        self._on_cut(self.cut)
        self.close_now()
        self.serving.cancel()
        raise trio.BrokenResourceError("the client did not read its answer in time")

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        if isinstance(self._inner, trio.SocketStream):
            await self._inner.send_eof()
        # TLS has no half-close: the connection closes whole (hypercorn's aclose)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close_now(self) -> None:
        self.socket.close()

    def answering(self, busy: bool) -> None:
        """The server is answering a request, or has answered it (`_ClockedServer`)."""
        self.clock.answering(busy, trio.current_time())
        self._reading.deadline = self._deadline()  # a read waiting now gets the new one


class _ClockedServer(TCPServer):
    """Hypercorn's per-connection server, telling the connection's clock when a request
    is being answered (hypercorn's `Updated(idle=False)`) and when its answer is complete
    (`Updated(idle=True)`): a streamed answer (server-sent events, a long body) is no idle
    connection, however long it goes on without the client sending a byte."""

    def __init__(
        self,
        app: ASGIWrapper,
        config: hypercorn.config.Config,
        context: WorkerContext,
        state: ConnectionState,
        stream: _GuardedStream,
    ) -> None:
        super().__init__(app, config, context, state, cast("trio.SSLStream[Any]", stream))
        self._guarded = stream

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, Updated):
            self._guarded.answering(not event.idle)
        await super().protocol_send(event)


async def _watch_hangup(stream: _GuardedStream) -> None:
    """Stop the connection's server when the client hangs up, even while hypercorn does not
    read: with a request pipelined behind the one being answered it waits for that answer
    before it reads again, so the client's leaving (and its turn's end) went unnoticed until
    the answer was written. The kernel tells a peer's FIN (`POLLRDHUP`) or reset (`POLLHUP`,
    `POLLERR`) whatever is still unread; a look now and then is one non-blocking call."""
    poller = select.poll()
    poller.register(stream.socket.fileno(), select.POLLRDHUP)  # HUP and ERR come unasked
    while True:
        await trio.sleep(HANGUP_POLL_SECS)
        if poller.poll(0):
            stream.serving.cancel()
            return


def _body_deadline_app(
    app: ASGIFramework, bounds: HttpBounds, on_cut: Callable[[Cut], None]
) -> ASGIFramework:
    """`app`, with a deadline on the request body: past it, the client gets 408 and the
    connection is closed (hypercorn closes a connection whose request was not read whole),
    and the app sees a disconnect."""

    async def guarded(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        deadline = body_deadline(trio.current_time(), bounds.body_timeout_secs)
        started = False
        timed_out = False

        async def bounded_receive() -> ASGIReceiveEvent:
            nonlocal timed_out
            if not timed_out:
                with trio.move_on_at(deadline):
                    return await receive()
                timed_out = True
                on_cut("body_timeout")
                if not started:
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 408,
                            "headers": [
                                (b"connection", b"close"),
                                (b"content-type", b"text/plain"),
                                (b"content-length", b"29"),
                            ],
                        }
                    )
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b"request body not sent in time",
                            "more_body": False,
                        }
                    )
            return {"type": "http.disconnect"}

        async def bounded_send(message: ASGISendEvent) -> None:
            nonlocal started
            if timed_out:
                return  # the 408 went instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await app(scope, bounded_receive, bounded_send)

    return guarded


async def serve_guarded(
    app: ASGIFramework,
    sock: socket.socket,
    *,
    name: str,
    bounds: HttpBounds,
    log_name: str,
    ssl_context: ssl.SSLContext | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on `sock` (bound, listening; ours to close) until cancelled, with the
    connection cap, the descriptor reserve and the read deadlines of `bounds` (ADR 0045);
    over TLS when `ssl_context` is given (the handshake within the idle deadline).

    Our own accept loop hands each admitted connection to hypercorn's per-connection
    server: hypercorn has no connection cap, and its read timeout is per read, not per
    request."""
    config = quiet_config(log_name)
    # A backstop only: our deadlines cut first (hypercorn's timer covers idle and headers).
    config.keep_alive_timeout = bounds.idle_timeout_secs + bounds.header_timeout_secs
    counts = LISTENERS.counts(name)
    throttle = LogThrottle[str](CUT_LOG_INTERVAL_SECS, overflow_key="other")
    logger = logging.getLogger(log_name)

    def on_cut(cut: Cut) -> None:
        counts.cut[cut] += 1
        many = throttle.event(cut, trio.current_time())
        if many:
            logger.warning("%s cut %d connection(s): %s", name, many, cut, extra={"rule": cut})

    wrapped = ASGIWrapper(_body_deadline_app(app, bounds, on_cut))
    context = WorkerContext(None)
    state = ConnectionState({})
    listener = trio.socket.from_stdlib_socket(sock)

    async def handle(stream: _GuardedStream) -> None:
        try:
            with stream.serving:
                async with trio.open_nursery() as watching:
                    watching.start_soon(_watch_hangup, stream)
                    server = _ClockedServer(wrapped, config, context, state, stream)
                    await server.run()
                    watching.cancel_scope.cancel()
        finally:
            stream.close_now()  # not awaited: the listener may be cancelled already
            counts.note_closed()

    try:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                try:
                    conn, _ = await listener.accept()
                except OSError as exc:
                    if exc.errno in _CAPACITY_ERRNOS:
                        on_cut("descriptors_low")
                        await trio.sleep(ACCEPT_RETRY_SECS)
                    continue  # the peer gave up meanwhile, or the like: not ours to fail
                limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                verdict = admit_connection(
                    counts.open, bounds.max_connections, open_descriptors(limit), limit
                )
                if verdict != "accept":
                    conn.close()
                    on_cut(verdict)
                    continue
                counts.open += 1
                now = trio.current_time()
                clock = ConnectionClock(
                    bounds.idle_timeout_secs, bounds.header_timeout_secs, since=now
                )
                plain = trio.SocketStream(conn)
                inner = (
                    plain
                    if ssl_context is None
                    else trio.SSLStream(plain, ssl_context, server_side=True)
                )
                stream = _GuardedStream(inner, conn, clock, on_cut, bounds.body_timeout_secs)
                nursery.start_soon(handle, stream)
    finally:
        listener.close()
