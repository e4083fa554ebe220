"""A start message names every other agent's workspace (~40 bytes an agent): with the
default send buffer the zygote's socket carried none past ~5,000 agents (ADR 0069)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import msgspec
import pytest
import trio

from tests.agent.helpers import agent_spec
from tests.conftest import PATIENCE
from zeroclaw.supervisor._zygote import send_preload, start_zygote
from zeroclaw.supervisor._zygote_client import SpawnError, ZygoteClient

# An entry point that returns at once (exit status 0): only the start is looked at.
EXIT_AT_ONCE = "operator:is_"


async def test_a_spec_naming_8000_other_workspaces_reaches_the_zygote(tmp_path: Path) -> None:
    others = tuple(f"/var/lib/zeroclaw/agents/a{i:05d}/workspace" for i in range(8000))
    spec = msgspec.structs.replace(agent_spec(tmp_path), other_workspaces=others)
    started = start_zygote(EXIT_AT_ONCE, {"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    proc, sock = started.proc, started.sock
    send_preload(sock, ())  # the daemon's order: the preload (none here) before any spawn
    exited: dict[int, int] = {}
    done = trio.Event()

    def on_exit(pid: int, status: int) -> None:
        exited[pid] = status
        done.set()

    client = ZygoteClient(proc.pid, sock, on_exit)
    ours, theirs = socket.socketpair()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            with trio.fail_after(PATIENCE):
                pid = await client.spawn(spec, {}, theirs.fileno())
                await done.wait()
            assert exited == {pid: 0}
            nursery.cancel_scope.cancel()
    finally:
        ours.close()
        theirs.close()
        sock.close()  # EOF: the zygote leaves nothing behind and exits
        proc.wait(PATIENCE)


async def test_a_start_message_over_the_zygotes_packet_is_refused_saying_so(
    tmp_path: Path,
) -> None:
    others = tuple(f"/var/lib/zeroclaw/agents/a{i:05d}/workspace" for i in range(60_000))
    spec = msgspec.structs.replace(agent_spec(tmp_path), other_workspaces=others)
    started = start_zygote(EXIT_AT_ONCE, {"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    proc, sock = started.proc, started.sock
    send_preload(sock, ())  # the daemon's order: the preload (none here) before any spawn
    client = ZygoteClient(proc.pid, sock, lambda pid, status: None)
    ours, theirs = socket.socketpair()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            with pytest.raises(SpawnError, match=r"start message is \d+ bytes, over the"):
                await client.spawn(spec, {}, theirs.fileno())
            nursery.cancel_scope.cancel()
    finally:
        ours.close()
        theirs.close()
        sock.close()
        proc.wait(PATIENCE)
