"""The agent's MCP host over streamable HTTP against a server on the SDK's own server side
(tests/mcp/http_server.py), for a list change on demand: server-everything says
tools/list_changed only right after initialize, when over HTTP the client's stream for it
may not be open yet."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.conftest import PATIENCE
from tests.mcp._servers import free_port, start_listening
from tests.mcp.test_host import Box, context, hosting, run
from zeroclaw.agent import McpServerSpec

SERVER = Path(__file__).with_name("http_server.py")


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    port = free_port()
    process = await start_listening([sys.executable, str(SERVER), str(port)], b"Uvicorn running on")
    assert process.stderr is not None

    async def drain() -> None:  # its access log, so it never blocks on a full pipe
        assert process.stderr is not None
        while await process.stderr.receive_some(65536):
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        yield f"http://127.0.0.1:{port}/mcp"
        process.kill()
        await process.wait()
        nursery.cancel_scope.cancel()
    await process.stderr.aclose()


async def test_tools_list_changed_over_http_is_listed_and_pinned_again(box: Box, url: str) -> None:
    spec = McpServerSpec(
        name="h", transport="http", url=url, tools=("echo", "grow", "extra"), timeout_secs=10.0
    )
    async with hosting(box, [spec], service=True) as (_, _, offers):
        assert offers.names() == ["mcp__h__echo", "mcp__h__grow"]
        changed = offers.changed
        grown = await run(context(box), offers.get("mcp__h__grow"), {})
        assert grown.ok and grown.output.startswith("grown"), grown
        with trio.fail_after(PATIENCE):
            await changed.wait()  # list_changed: listed and pinned again
        assert offers.names() == ["mcp__h__echo", "mcp__h__grow", "mcp__h__extra"]
        extra = await run(context(box), offers.get("mcp__h__extra"), {})
        assert extra.ok and extra.output.startswith("extra"), extra
