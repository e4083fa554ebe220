"""A small HTTP/1.1 service on loopback for the HTTP adapter tests (ADR 0054): real sockets,
requests parsed by h11, answers by path. It records every request it was sent.

    POST /ok             200 JSON: {"capability", "input", "authorized"} of the request
    POST /text           200 text/plain: "got <input>"
    POST /big?n=N        200 text/plain: N bytes of "x"
    POST /status/CODE    CODE with a JSON error body
    POST /redirect?to=U  302 to U
    POST /echo-key       200 text/plain, the request's Authorization header echoed back in
                         the body and a header (a hostile service: the daemon must cut the
                         token out of the output and of its HTTP client's debug log)
    POST /gzip           200 with Content-Encoding gzip (never asked for)
    POST /hang           reads the request and never answers (`release` ends it)

`authorized` says whether the request's bearer token is `key` (never the token itself).
Run as a module, it serves forever and prints its port on the first line (the key it
expects in the environment, never on its command line):
    ZC_HTTP_SERVICE_KEY=KEY python -m tests.discovery.http_service
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import h11
import trio


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class HttpService:
    key: str = ""
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    arrived: trio.Event = field(default_factory=trio.Event)  # the first request was read
    release: trio.Event = field(default_factory=trio.Event)  # ends the /hang requests

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            seen = await _read_request(stream)
            if seen is None:
                return
            self.seen.append(seen)
            self.arrived.set()
            # the client may read what it wants and hang up
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(await self._answer(seen))

    async def _answer(self, seen: Seen) -> bytes:
        parts = urlsplit(seen.path)
        query = parse_qs(parts.query)
        request: dict[str, object] = {}
        try:
            parsed = json.loads(seen.body or b"{}")
            request = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            pass
        path = parts.path
        if path == "/ok":
            authorized = (
                bool(self.key) and seen.headers.get("authorization") == f"Bearer {self.key}"
            )
            document = {
                "capability": request.get("capability"),
                "input": request.get("input"),
                "authorized": authorized,
            }
            return response(200, json.dumps(document, indent=2).encode(), "application/json")
        if path == "/text":
            return response(200, f"got {request.get('input')}".encode(), "text/plain")
        if path == "/big":
            return response(200, b"x" * int(query["n"][0]), "text/plain")
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            body = json.dumps({"error": f"status {code}"}).encode()
            return response(code, body, "application/json")
        if path == "/redirect":
            return response(302, b"", "text/plain", location=query["to"][0])
        if path == "/echo-key":
            echoed = seen.headers.get("authorization", "")
            body = f"you sent {echoed}".encode()
            return response(200, body, "text/plain", extra={"x-you-sent": echoed})
        if path == "/gzip":
            return response(200, gzip.compress(b"zipped"), "text/plain", encoding="gzip")
        if path == "/hang":
            await self.release.wait()
            return response(200, b"late", "text/plain")
        return response(404, b"no such path", "text/plain")


def response(
    status: int,
    body: bytes,
    content_type: str,
    *,
    location: str | None = None,
    encoding: str | None = None,
    extra: dict[str, str] | None = None,
) -> bytes:
    head = [
        f"HTTP/1.1 {status} X",
        f"content-type: {content_type}",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if location is not None:
        head.append(f"location: {location}")
    if encoding is not None:
        head.append(f"content-encoding: {encoding}")
    head += [f"{name}: {value}" for name, value in (extra or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _read_request(stream: trio.SocketStream) -> Seen | None:
    conn = h11.Connection(h11.SERVER)
    request: h11.Request | None = None
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data:
                return None
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            break
        else:
            return None
    assert request is not None
    headers = {k.decode().lower(): v.decode() for k, v in request.headers}
    return Seen(request.method.decode(), request.target.decode(), headers, body)


async def _main(key: str) -> None:
    service = HttpService(key)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.serve)
        print(service.port, flush=True)


if __name__ == "__main__":
    trio.run(_main, os.environ.get("ZC_HTTP_SERVICE_KEY", ""))
