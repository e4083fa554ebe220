"""A router that cannot start leaves nothing open: every socket it made is closed, so the
context it was given can be terminated (`ctx.term()` waits for every socket of the
context, and the daemon calls it on its way out)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import zmq

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import Router
from zeroclaw.config import validate_document

PATIENCE = 30.0  # a generous bound on a term that returns at once when nothing is open


def _router(tmp_path: Path, ctx: zmq.Context[zmq.Socket[bytes]]) -> Router:
    config = validate_document(make_config(tmp_path, {"alpha": agent_entry()}))
    return Router(config, tmp_path, ctx)


async def _terminated(ctx: zmq.Context[zmq.Socket[bytes]]) -> bool:
    """Whether `ctx.term()` returns: it blocks for good while a socket of ctx is open."""
    with trio.move_on_after(PATIENCE):
        await trio.to_thread.run_sync(ctx.term, abandon_on_cancel=True)
        return True
    return False  # the abandoned worker thread stays blocked in term(); a daemon thread


async def test_a_router_whose_endpoint_cannot_be_bound_closes_every_socket(
    tmp_path: Path,
) -> None:
    (tmp_path / "router.sock").mkdir()  # neither unlinked nor bound over
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = _router(tmp_path, ctx)
    with pytest.raises(IsADirectoryError):
        await router.run()  # fails before it started: raised as is
    assert await _terminated(ctx)
