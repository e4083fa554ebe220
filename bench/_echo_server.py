"""The bare HTTP baseline of the channels bench: hypercorn's trio worker, set up as the webhook
adapter sets it up, serving an ASGI app that answers the posted body and does nothing else.

`python -m bench._echo_server PORT` serves on 127.0.0.1:PORT until SIGTERM."""

from __future__ import annotations

import logging
import socket
import sys
from functools import partial

import hypercorn.config
import hypercorn.trio
import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope


async def echo(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return  # the client went away
        chunks.append(message["body"])
        if not message["more_body"]:
            break
    body = b"".join(chunks)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def main(port: int) -> None:
    # The adapter's socket and hypercorn settings (zeroclaw/channels/_webhook.py `serve`).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    config = hypercorn.config.Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("bench.echo")
    config.include_server_header = False
    config.graceful_timeout = 1.0
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(hypercorn.trio.serve, echo, config))


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]))
