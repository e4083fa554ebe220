"""What our small HTTP servers on hypercorn's trio worker share (the webhook channel, the
metrics listener): a config that serves an already bound socket quietly, and the ASGI
lifespan handshake every app must answer."""

from __future__ import annotations

import logging
import socket

import hypercorn.config
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable


def socket_config(sock: socket.socket, log_name: str) -> hypercorn.config.Config:
    """Serve `sock` (bound and listening; hypercorn owns it from here): no access log, no
    Server header, errors to `log_name`, a short graceful shutdown."""
    config = hypercorn.config.Config()
    config.bind = [f"fd://{sock.detach()}"]
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
