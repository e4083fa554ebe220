"""A lean HTTP/1.1 client for the model request: h11 driven straight over a trio stream.

A turn's model call is one POST and a streamed answer, to one origin, again and again. On
that path httpx's `AsyncClient` (its request and URL models, the auth and redirect layers,
httpcore's pool and anyio's stream over trio) cost about 0.6 ms per request more than h11
over a trio socket on the 2-core test machine, and more scheduler rounds per request
(ADR 0068). This client does only what the providers ask of it: keep-alive connections to
one origin (plain TCP or TLS with the process's verifying context), a request with a body,
the answer's status, headers and body as it arrives, and httpx's per-operation timeouts.
Its failures are httpx's exception types, so the retry and error paths stay one.

Not here, and so left to httpx (`HttpModel` picks): proxies from the environment
(`HTTPS_PROXY`, `ALL_PROXY`, ...): with any set, every request goes through httpx.
"""

from __future__ import annotations

import select
import ssl
import urllib.request
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import h11
import httpx
import trio

from .._version import __version__

RECEIVE_BYTES = 64 * 1024
MAX_IDLE = 4  # kept-alive connections to the origin (peers' turns run side by side)
# httpx's default: a connection idle longer is not reused (servers close theirs).
KEEPALIVE_EXPIRY_SECS = 5.0
MAX_HEADER_BYTES = 64 * 1024  # h11's default is 16 KiB; some proxies send long headers
# 1xx answers before the real one (a 100 Continue; nothing else is asked for): a server that
# sends them without end would hold the request for ever, each within the read timeout.
MAX_INFORMATIONAL = 8


def proxied() -> bool:
    """Whether the environment names a proxy (any scheme; `no_proxy` alone is none): then
    httpx, which honours them and their exceptions, carries every request."""
    return any(scheme != "no" for scheme in urllib.request.getproxies_environment())


@dataclass
class _Connection:
    stream: trio.abc.Stream
    h11: h11.Connection
    idle_since: float = 0.0


class LeanResponse:
    """What `HttpModel.stream` reads of an answer: as httpx's streamed `Response` offers it."""

    def __init__(self, url: httpx.URL, status: int, headers: httpx.Headers) -> None:
        self.url = url
        self.status_code = status
        self.headers = headers
        self._body: AsyncIterator[bytes] | None = None

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        assert self._body is not None
        return self._body


class LeanClient:
    """Requests to the origin of `base_url` over kept-alive HTTP/1.1 connections."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str],
        timeout: httpx.Timeout,
        ssl_context: ssl.SSLContext,
    ) -> None:
        self.base_url = httpx.URL(base_url)
        scheme = self.base_url.scheme
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r}")
        self._tls = scheme == "https"
        # The ASCII (IDNA) form: what is resolved, verified by TLS and named in `host`.
        self._host = self.base_url.raw_host.decode("ascii")
        self._port = self.base_url.port or (443 if self._tls else 80)
        authority = self._host if self.base_url.port is None else f"{self._host}:{self._port}"
        if ":" in self._host and self.base_url.port is None:  # an IPv6 literal
            authority = f"[{self._host}]"
        elif ":" in self._host:
            authority = f"[{self._host}]:{self._port}"
        self._headers = [
            ("host", authority),
            ("accept", "*/*"),
            ("accept-encoding", "identity"),
            ("user-agent", f"zeroclaw/{__version__}"),
            *headers.items(),
        ]
        self._timeout = timeout
        self._ssl_context = ssl_context
        self._idle: list[_Connection] = []
        self._closed = False
        self._targets: dict[str, tuple[httpx.URL, str]] = {}  # a provider posts to one path

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await _close(conn)

    @asynccontextmanager
    async def stream(
        self, method: str, path: str, *, content: bytes
    ) -> AsyncIterator[LeanResponse]:
        """One request; its answer's body is read (once) from the response's `aiter_bytes`.
        A kept-alive connection the server closed meanwhile is replaced once, before any
        of the answer arrived; every other failure is the caller's (httpx's types)."""
        url, target = self._target(path)
        headers = [*self._headers, ("content-length", str(len(content)))]
        request = h11.Request(method=method, target=target, headers=headers)
        conn, reused = await self._connection()
        try:
            try:
                event = await self._send(conn, request, content)
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                if not reused:
                    raise
                await _close(conn)  # closed while idle: once more, on a new connection
                conn, _ = await self._connection(fresh=True)
                event = await self._send(conn, request, content)
        except BaseException:
            await _close(conn)
            raise
        response = LeanResponse(
            url,
            event.status_code,
            httpx.Headers([(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers]),
        )
        body = self._body(conn, _decoder(response.headers.get("content-encoding", "")))
        response._body = body
        try:
            yield response
        finally:
            await body.aclose()
            if conn not in self._idle:  # unread, or cut short: the connection is not reused
                await _close(conn)

    def _target(self, path: str) -> tuple[httpx.URL, str]:
        """The URL of `path` and its request target, made once (parsing a URL costs)."""
        known = self._targets.get(path)
        if known is None:
            # As httpx merges a relative path: appended to the base URL's (ending in "/").
            raw = self.base_url.raw_path + path.encode("ascii")
            known = self._targets[path] = (self.base_url.copy_with(raw_path=raw), raw.decode())
        return known

    async def _connection(self, fresh: bool = False) -> tuple[_Connection, bool]:
        now = trio.current_time()
        while self._idle and not fresh:
            conn = self._idle.pop()
            if now - conn.idle_since <= KEEPALIVE_EXPIRY_SECS and not _readable(conn.stream):
                return conn, True
            await _close(conn)  # expired, closed by the server, or sent what nobody asked
        return await self._connect(), False

    async def _connect(self) -> _Connection:
        try:
            with trio.fail_after(_secs(self._timeout.connect)):
                stream: trio.abc.Stream = await trio.open_tcp_stream(self._host, self._port)
                if self._tls:
                    tls = trio.SSLStream(
                        stream,
                        self._ssl_context,
                        server_hostname=self._host,
                        https_compatible=True,
                    )
                    try:
                        await tls.do_handshake()
                    except BaseException:
                        await trio.aclose_forcefully(stream)
                        raise
                    stream = tls
        except trio.TooSlowError:
            raise httpx.ConnectTimeout("timed out connecting") from None
        except (OSError, trio.BrokenResourceError) as exc:
            # trio's TLS failure carries the reason (a certificate refused) as its cause.
            reason = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) else exc
            raise httpx.ConnectError(str(reason or exc) or type(exc).__name__) from None
        protocol = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
        return _Connection(stream, protocol)

    async def _send(self, conn: _Connection, request: h11.Request, content: bytes) -> h11.Response:
        """The request out, up to the answer's head."""
        data = conn.h11.send(request) + conn.h11.send(h11.Data(data=content))
        data += conn.h11.send(h11.EndOfMessage())
        try:
            with trio.fail_after(_secs(self._timeout.write)):
                await conn.stream.send_all(data)
        except trio.TooSlowError:
            raise httpx.WriteTimeout("timed out sending the request") from None
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from None
        for _ in range(MAX_INFORMATIONAL + 1):
            event = await self._next(conn)
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__}")
        raise httpx.RemoteProtocolError(f"over {MAX_INFORMATIONAL} informational answers")

    async def _next(self, conn: _Connection) -> h11.Event:
        """The server's next event, reading as much as it takes."""
        while True:
            try:
                event = conn.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from None
            if isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError("Server disconnected without a response")
            if isinstance(event, h11.Event):
                return event
            if event is h11.PAUSED:  # cannot happen before our request ended; never spin
                raise httpx.RemoteProtocolError("the server answered out of turn")
            try:
                with trio.fail_after(_secs(self._timeout.read)):
                    data = await conn.stream.receive_some(RECEIVE_BYTES)
            except trio.TooSlowError:
                raise httpx.ReadTimeout("timed out reading the answer") from None
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__) from None
            try:
                conn.h11.receive_data(bytes(data))
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from None

    async def _body(
        self, conn: _Connection, decode: zlib._Decompress | None
    ) -> AsyncGenerator[bytes, None]:
        """The answer's body as it arrives; at its end the connection goes back to the
        idle ones when both sides may go on, else it is closed."""
        done = False
        try:
            while True:
                event = await self._next(conn)
                if isinstance(event, h11.Data):
                    if decode is None:
                        if event.data:
                            yield bytes(event.data)
                    else:  # in pieces: the caller counts the answer's size between them
                        for piece in _decompressed(decode, bytes(event.data)):
                            yield piece
                elif isinstance(event, h11.EndOfMessage):
                    done = True
                    if decode is not None and (rest := decode.flush()):
                        yield rest
                    return
        finally:
            if done and not self._closed and self._keep(conn):
                self._idle.append(conn)
            else:
                await _close(conn)

    def _keep(self, conn: _Connection) -> bool:
        if conn.h11.our_state is not h11.DONE or conn.h11.their_state is not h11.DONE:
            return False
        if len(self._idle) >= MAX_IDLE or conn.h11.trailing_data[0]:
            return False  # (bytes after the answer: one nobody asked for, not the next's)
        conn.h11.start_next_cycle()
        conn.idle_since = trio.current_time()
        return True


def _decoder(encoding: str) -> zlib._Decompress | None:
    """A server that compresses although asked not to (`accept-encoding: identity`): gzip
    and deflate are undone as httpx would; any other coding is passed on as it came (the
    provider then says what the body starts with)."""
    encoding = encoding.strip().lower()
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if encoding == "deflate":
        return zlib.decompressobj()
    return None


def _decompressed(decode: zlib._Decompress, chunk: bytes) -> Iterator[bytes]:
    """`chunk` undone, at most RECEIVE_BYTES at a time: a 64 KiB read of a compression bomb
    is 64 MiB undone whole, twice MAX_ANSWER_BYTES before the provider could count it."""
    try:
        while True:
            piece = decode.decompress(chunk, RECEIVE_BYTES)
            chunk = decode.unconsumed_tail
            if piece:
                yield piece
            if not chunk and len(piece) < RECEIVE_BYTES:
                return
    except zlib.error as exc:
        raise httpx.DecodingError(str(exc)) from None


def _readable(stream: trio.abc.Stream) -> bool:
    """Whether an idle connection's socket has something to read: the server closed it, or
    sent bytes no request asked for. Either way it is not reused (as httpcore decides)."""
    transport = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    if not isinstance(transport, trio.SocketStream):
        return False
    poll = select.poll()
    poll.register(transport.socket.fileno(), select.POLLIN)
    return bool(poll.poll(0))


def _secs(value: float | None) -> float:
    return float("inf") if value is None else value


async def _close(conn: _Connection) -> None:
    with trio.CancelScope(shield=True):
        await trio.aclose_forcefully(conn.stream)
