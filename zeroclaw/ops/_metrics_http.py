"""The `/metrics` listener's HTTP side: hypercorn's trio worker serving a tiny ASGI app,
like the webhook channel. Loaded only when `[daemon] metrics_listen` is set."""

from __future__ import annotations

import socket

import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope
from prometheus_client import CONTENT_TYPE_LATEST

from .._asgi import answer_lifespan, serve_guarded
from .._http_guard import HttpBounds, check_bearer
from ._metrics import Metrics


async def serve_metrics(
    metrics: Metrics,
    sock: socket.socket,
    *,
    token: bytes,
    bounds: HttpBounds | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `GET /metrics` on a bound, listening socket until cancelled, to a request that
    carries `Authorization: Bearer <token>`; 401 without it, 404 elsewhere."""

    async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        extra: list[tuple[bytes, bytes]] = []
        if not check_bearer(scope["headers"], token):
            status, body, content_type = 401, b"unauthorized: send the bearer token\n", "text/plain"
            extra = [(b"www-authenticate", b'Bearer realm="zeroclaw metrics"')]
        elif scope["path"] == "/metrics" and scope["method"] in ("GET", "HEAD"):
            # Rendered here, in the daemon's trio thread: the collector reads live state
            # that only this thread changes.
            status, body, content_type = 200, metrics.render(), CONTENT_TYPE_LATEST
        else:
            status, body, content_type = 404, b"not found: try GET /metrics\n", "text/plain"
        headers = [
            *extra,
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        payload = b"" if scope["method"] == "HEAD" else body
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    await serve_guarded(
        app,
        sock,
        name="metrics",
        bounds=bounds or HttpBounds(),
        log_name="zeroclaw.metrics.http",
        task_status=task_status,
    )
