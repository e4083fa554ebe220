"""A hostile or broken model server against the lean HTTP/1.1 client (ADR 0068, issue 31
attack pass): real loopback servers that write raw bytes, and real TLS with certificates
made by `openssl` for the test."""

from __future__ import annotations

import functools
import shutil
import ssl
import subprocess
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from zeroclaw.providers._http import tls_context
from zeroclaw.providers._lean_http import RECEIVE_BYTES, LeanClient

TIMEOUT = httpx.Timeout(10.0)

# One connection's script: the stream, after the client's first request head was read.
Script = Callable[[trio.SocketStream], Awaitable[None]]


async def read_request(stream: trio.SocketStream) -> bytes:
    """Up to the end of one request (head and a content-length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await _some(stream)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += await _some(stream)
    return head


class ClientGone(Exception):
    """The client closed the connection: the script's turn is over."""


async def _some(stream: trio.SocketStream) -> bytes:
    # At the end of the stream `receive_some` answers b"" at once, every time: looping on
    # it never blocked, so `wait_all_tasks_blocked` never returned (a hang, seen once under
    # load, when the client closed a connection the script still read).
    data = await stream.receive_some(65536)
    if not data:
        raise ClientGone
    return data


@asynccontextmanager
async def raw_server(script: Script, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    async def handle(stream: trio.SocketStream) -> None:
        try:
            if tls is not None:
                wrapped = trio.SSLStream(stream, tls, server_side=True)
                await wrapped.do_handshake()
                await script(wrapped)  # type: ignore[arg-type]
            else:
                await script(stream)
        except (ClientGone, trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError):
            return

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        )
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


def client(url: str, ssl_context: ssl.SSLContext | None = None) -> LeanClient:
    return LeanClient(
        url,
        headers={"authorization": "Bearer sk-test"},
        timeout=TIMEOUT,
        ssl_context=ssl_context or tls_context(),
    )


async def chunks_of(lean: LeanClient) -> list[bytes]:
    async with lean.stream("POST", "chat/completions", content=b"{}") as response:
        return [chunk async for chunk in response.aiter_bytes()]


# --- TLS: verification and the host name are checked ------------------------------------


def certificate(tmp_path: Path, san: str) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    cert, key = tmp_path / f"{san.replace(':', '_')}.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=zeroclaw-test", "-addext", f"subjectAltName={san}"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


async def answer_ok(stream: trio.SocketStream) -> None:
    await read_request(stream)
    await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")


async def test_a_self_signed_certificate_is_refused(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path, "IP:127.0.0.1")
    async with raw_server(answer_ok, tls=server_context(cert, key)) as port:
        lean = client(f"https://127.0.0.1:{port}/v1/")
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await chunks_of(lean)
        await lean.aclose()


async def test_a_trusted_certificate_for_another_host_is_refused(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path, "DNS:model.invalid")
    trusting = ssl.create_default_context(cafile=str(cert))
    async with raw_server(answer_ok, tls=server_context(cert, key)) as port:
        lean = client(f"https://127.0.0.1:{port}/v1/", trusting)
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await chunks_of(lean)
        await lean.aclose()
    # The control: the same trust, a certificate for the address asked, is taken.
    cert, key = certificate(tmp_path, "IP:127.0.0.1")
    trusting = ssl.create_default_context(cafile=str(cert))
    async with raw_server(answer_ok, tls=server_context(cert, key)) as port:
        lean = client(f"https://127.0.0.1:{port}/v1/", trusting)
        assert b"".join(await chunks_of(lean)) == b"ok"
        await lean.aclose()


# --- what a hostile server sends ------------------------------------------------------------


async def test_a_compression_bomb_is_handed_on_in_bounded_pieces() -> None:
    # 64 MiB of zeros in ~64 KiB: one read of the socket. Undone whole, one chunk alone
    # would be twice MAX_ANSWER_BYTES before the provider could count it.
    packer = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    bomb = packer.compress(bytes(64 * 1024 * 1024)) + packer.flush()

    async def script(stream: trio.SocketStream) -> None:
        await read_request(stream)
        head = f"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: {len(bomb)}\r\n"
        await stream.send_all(head.encode() + b"\r\n" + bomb)

    async with raw_server(script) as port:
        lean = client(f"http://127.0.0.1:{port}/v1/")
        async with lean.stream("POST", "chat/completions", content=b"{}") as response:
            largest = 0
            async for chunk in response.aiter_bytes():
                largest = max(largest, len(chunk))
                break  # the provider stops at its bound; the first piece is what it holds
        await lean.aclose()
    assert 0 < largest <= RECEIVE_BYTES


async def test_informational_answers_without_end_are_refused() -> None:
    # Each arrives well within the read timeout, so without a bound a server that sends
    # them for ever holds the turn (and a core) for ever; here it stops after 100,000.
    async def script(stream: trio.SocketStream) -> None:
        await read_request(stream)
        for _ in range(1000):
            await stream.send_all(b"HTTP/1.1 100 Continue\r\n\r\n" * 100)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    async with raw_server(script) as port:
        lean = client(f"http://127.0.0.1:{port}/v1/")
        with pytest.raises(httpx.RemoteProtocolError):
            await chunks_of(lean)
        await lean.aclose()


@pytest.mark.parametrize("together", [False, True], ids=["apart", "in-one-read"])
async def test_an_answer_sent_before_its_request_is_not_taken_for_its_answer(
    together: bool,
) -> None:
    # The server answers the first request, then at once sends a second answer nobody
    # asked for: the next request must not read that one as its own. `in-one-read`: both
    # reach the client together (as on a busy machine), and it closes that connection.
    first = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst"
    stray = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstray"

    async def script(stream: trio.SocketStream) -> None:
        await read_request(stream)
        if together:
            await stream.send_all(first + stray)
        else:
            await stream.send_all(first)
            await stream.send_all(stray)
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecond")

    async with raw_server(script) as port:
        lean = client(f"http://127.0.0.1:{port}/v1/")
        assert b"".join(await chunks_of(lean)) == b"first"
        await trio.testing.wait_all_tasks_blocked()
        try:
            second = b"".join(await chunks_of(lean))
        except httpx.TransportError:
            second = b"(refused)"
        await lean.aclose()
    assert second != b"stray"


async def test_a_head_larger_than_the_bound_is_refused() -> None:
    async def script(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\n")
        while True:
            await stream.send_all(b"x-pad: " + b"a" * 4000 + b"\r\n")

    async with raw_server(script) as port:
        lean = client(f"http://127.0.0.1:{port}/v1/")
        with pytest.raises(httpx.RemoteProtocolError):
            await chunks_of(lean)
        await lean.aclose()
