"""Loopback MCP servers the tests start as real processes: a free port, and a start that
waits for the server's own word that it listens."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Mapping, Sequence

import trio

from tests.conftest import PATIENCE


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def start_listening(
    argv: Sequence[str], said: bytes, *, env: Mapping[str, str] | None = None
) -> trio.Process:
    """Start `argv` (stderr piped, in its own session) and return once its stderr says
    `said`; fails the test if it exits first."""
    process = await trio.lowlevel.open_process(
        list(argv),
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stderr is not None
    heard = b""
    with trio.fail_after(PATIENCE):
        while said not in heard:
            chunk = await process.stderr.receive_some(4096)
            assert chunk, f"{argv[0]} exited: {heard!r}"
            heard += chunk
    return process
