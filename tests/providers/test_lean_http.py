"""The lean HTTP/1.1 client the network providers post through (ADR 0068), against real
loopback servers: kept-alive connections are reused, one the server closed while idle is
replaced without the caller seeing it, chunked and compressed answers are read as httpx
reads them, and a proxy in the environment sends every request through httpx instead."""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import h11
import httpx
import pytest
import trio

from zeroclaw.providers._http import HttpModel
from zeroclaw.providers._lean_http import LeanClient, proxied

TIMEOUT = httpx.Timeout(10.0)

# (request, the h11 connection) -> the events of the answer; None: close without answering
Respond = Callable[[h11.Request, int], list[h11.Event] | None]


class Server:
    """An HTTP/1.1 server on loopback speaking through h11, answering by `respond`; it
    counts the connections it accepted and the requests it read."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.connections = 0
        self.requests: list[tuple[h11.Request, bytes]] = []
        self.port = 0

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError):  # the client went away
                await self._serve(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            request: h11.Request | None = None
            body = b""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    conn.receive_data(data)
                    if not data and request is None:
                        return
                    continue
                if isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    return
            assert request is not None
            self.requests.append((request, body))
            events = self.respond(request, len(self.requests))
            if events is None:
                return  # closed without a word: a kept-alive connection gone stale
            for answer in events:
                await stream.send_all(conn.send(answer) or b"")
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()


@asynccontextmanager
async def serving(respond: Respond) -> AsyncIterator[Server]:
    server = Server(respond)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        yield server
        nursery.cancel_scope.cancel()


def answer(body: bytes, headers: list[tuple[str, str]] | None = None) -> list[h11.Event]:
    head = [("content-length", str(len(body))), *(headers or [])]
    return [h11.Response(status_code=200, headers=head), h11.Data(data=body), h11.EndOfMessage()]


async def post(client: LeanClient, body: bytes = b"{}") -> tuple[int, bytes]:
    async with client.stream("POST", "chat/completions", content=body) as response:
        return response.status_code, b"".join([c async for c in response.aiter_bytes()])


def lean(server: Server) -> LeanClient:
    return LeanClient(
        f"http://127.0.0.1:{server.port}/v1/",
        headers={"content-type": "application/json", "authorization": "Bearer k"},
        timeout=TIMEOUT,
        ssl_context=None,  # type: ignore[arg-type]  # plain HTTP: never used
    )


async def test_requests_reuse_a_kept_alive_connection() -> None:
    async with serving(lambda request, n: answer(b"answer %d" % n)) as server:
        client = lean(server)
        results = [await post(client, b'{"n": %d}' % i) for i in range(3)]
        await client.aclose()
    assert results == [(200, b"answer 1"), (200, b"answer 2"), (200, b"answer 3")]
    assert server.connections == 1
    request, body = server.requests[0]
    assert request.method == b"POST" and request.target == b"/v1/chat/completions"
    headers = dict(request.headers)
    assert headers[b"authorization"] == b"Bearer k" and headers[b"host"].startswith(b"127.0.0.1:")
    assert headers[b"accept-encoding"] == b"identity"
    assert body == b'{"n": 0}'


async def test_a_connection_the_server_closed_while_idle_is_replaced_unseen() -> None:
    # The second request arrives on the first connection, which the server then closes
    # without answering (its keep-alive ran out): the client asks again on a new one.
    def respond(request: h11.Request, n: int) -> list[h11.Event] | None:
        return None if n == 2 else answer(b"answer %d" % n)

    async with serving(respond) as server:
        client = lean(server)
        assert await post(client) == (200, b"answer 1")
        assert await post(client) == (200, b"answer 3")
        await client.aclose()
    assert server.connections == 2 and len(server.requests) == 3


async def test_a_new_connection_that_closes_unanswered_is_an_error_not_a_retry() -> None:
    async with serving(lambda request, n: None) as server:
        client = lean(server)
        with pytest.raises(httpx.RemoteProtocolError):
            await post(client)
        await client.aclose()
    assert server.connections == 1


async def test_a_chunked_stream_arrives_as_it_is_sent() -> None:
    chunks = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]

    def respond(request: h11.Request, n: int) -> list[h11.Event]:
        head = h11.Response(status_code=200, headers=[("transfer-encoding", "chunked")])
        return [head, *(h11.Data(data=c) for c in chunks), h11.EndOfMessage()]

    async with serving(respond) as server:
        client = lean(server)
        assert await post(client) == (200, b"".join(chunks))
        assert await post(client) == (200, b"".join(chunks))  # and the connection goes on
        await client.aclose()
    assert server.connections == 1


async def test_an_answer_compressed_although_not_asked_is_undone() -> None:
    body = b'{"choices": []}' * 100
    packed = gzip.compress(body)
    async with serving(lambda r, n: answer(packed, [("content-encoding", "gzip")])) as server:
        client = lean(server)
        assert await post(client) == (200, body)
        await client.aclose()


async def test_an_answer_cut_short_closes_its_connection() -> None:
    async with serving(lambda request, n: answer(b"x" * 100_000)) as server:
        client = lean(server)
        async with client.stream("POST", "chat/completions", content=b"{}") as response:
            async for _ in response.aiter_bytes():
                break  # an error's head is enough: the rest is never read
        assert await post(client) == (200, b"x" * 100_000)
        await client.aclose()
    assert server.connections == 2


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_proxy_in_the_environment_sends_requests_through_httpx(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    monkeypatch.setenv("NO_PROXY", "localhost")
    model = HttpModel(
        "openai.x", "http://127.0.0.1:9/v1", headers={}, timeout_secs=5, max_retries=0
    )
    assert not proxied() and isinstance(model._client, LeanClient)
    monkeypatch.setenv(variable, "http://proxy.invalid:3128")
    model = HttpModel(
        "openai.x", "http://127.0.0.1:9/v1", headers={}, timeout_secs=5, max_retries=0
    )
    assert proxied() and isinstance(model._client, httpx.AsyncClient)


@pytest.mark.parametrize(
    ("url", "host", "header"),
    [
        ("https://bücher.example/v1/", "xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("http://[::1]:8000/v1/", "::1", "[::1]:8000"),
        ("http://127.0.0.1:9/v1/", "127.0.0.1", "127.0.0.1:9"),
    ],
)
def test_the_host_is_named_as_it_is_reached(url: str, host: str, header: str) -> None:
    """An international name in its ASCII form (h11 sends only ASCII), an IPv6 literal in
    brackets, a port only when it is not the scheme's."""
    client = LeanClient(url, headers={}, timeout=TIMEOUT, ssl_context=None)  # type: ignore[arg-type]
    assert client._host == host and ("host", header) in client._headers
