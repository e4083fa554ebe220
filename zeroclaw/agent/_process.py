"""The agent process's main: until the router exists, an agent idles and answers liveness."""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import AsyncIterator

import trio

from .._logging import setup_logging
from ..control import FrameDecoder, encode_frame
from ._link import MAX_LINK_FRAME, Ping, Pong, Ready, decode_link, encode_link
from ._spec import AgentSpec

log = logging.getLogger("zeroclaw.agent")


def agent_main(spec: AgentSpec, link_fd: int) -> int:
    """Entry point called in the forked child; returns the process exit code."""
    setup_logging(spec.log_format, spec.log_level)
    return trio.run(serve_agent, spec, link_fd)


async def serve_agent(spec: AgentSpec, link_fd: int) -> int:
    link = trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=link_fd)))
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_link, link, nursery.cancel_scope)
            nursery.start_soon(_stop_on_signal, signals, nursery.cancel_scope, spec.alias)
    await link.aclose()
    return 0


async def _stop_on_signal(signals: AsyncIterator[int], scope: trio.CancelScope, alias: str) -> None:
    async for signum in signals:
        log.info("agent %s stopping on %s", alias, signal.Signals(signum).name)
        scope.cancel()
        return


async def _serve_link(link: trio.SocketStream, scope: trio.CancelScope) -> None:
    await link.send_all(encode_frame(encode_link(Ready(os.getpid()))))
    decoder = FrameDecoder(MAX_LINK_FRAME)
    while True:
        try:
            data = await link.receive_some(65536)
        except trio.BrokenResourceError:
            data = b""
        if not data:
            scope.cancel()  # the daemon closed the link: stop
            return
        for frame in decoder.feed(data):
            message = decode_link(frame)
            if isinstance(message, Ping):
                await link.send_all(encode_frame(encode_link(Pong(message.seq))))
