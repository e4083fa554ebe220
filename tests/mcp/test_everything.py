"""The agent's MCP host against the registry's `@modelcontextprotocol/server-everything`
(npm, installed by `make install` into .venv/npm), over streamable HTTP on loopback and over
stdio inside the sandbox, for the protocol's corners: structured content, resources and
prompts beside the tools, progress notifications, tools/list_changed, a call past its
timeout; and the agent's kernel refusing a connect to a port its profile does not allow."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import PATIENCE, REPO
from tests.mcp._servers import free_port, start_listening
from tests.mcp.test_host import Box, context, hosting, run
from zeroclaw.agent import McpServerSpec

EVERYTHING = REPO / ".venv" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed: no server-everything"),
    pytest.mark.skipif(
        NODE is not None and not EVERYTHING.exists(),
        reason=f"{EVERYTHING} is missing: run `make install` (it installs it with npm)",
    ),
]

TOOLS = (
    "echo",
    "get-structured-content",
    "trigger-long-running-operation",
    "get-resource-reference",
    "get-tiny-image",
)


class Served:
    """A server-everything process in its streamableHttp mode, listening on `port`."""

    def __init__(self, process: trio.Process, port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"


async def serve_everything() -> Served:
    """Start it on a free port (it takes PORT from its environment) and wait for it to say
    it listens."""
    port = free_port()
    process = await start_listening(
        [str(EVERYTHING), "streamableHttp"],
        b"listening on port",
        env={"PATH": os.environ["PATH"], "PORT": str(port), "HOME": str(REPO)},
    )
    return Served(process, port)


async def stop(served: Served) -> None:
    served.process.kill()
    await served.process.wait()
    if served.process.stderr is not None:
        await served.process.stderr.aclose()


@pytest.fixture
async def everything() -> AsyncIterator[Served]:
    served = await serve_everything()
    yield served
    await stop(served)


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def over(transport: str, served: Served | None, **kw: Any) -> McpServerSpec:
    if transport == "http":
        assert served is not None
        return McpServerSpec(
            name="ev",
            transport="http",
            url=served.url,
            timeout_secs=kw.pop("timeout_secs", 10.0),
            tools=TOOLS,
            **kw,
        )
    return McpServerSpec(
        name="ev",
        transport="stdio",
        command=str(EVERYTHING),
        args=("stdio",),
        timeout_secs=kw.pop("timeout_secs", 10.0),
        tools=TOOLS,
        **kw,
    )


@pytest.fixture(params=["http", "stdio"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, Served | None]]:
    if request.param == "stdio":
        yield "stdio", None
        return
    served = await serve_everything()
    yield "http", served
    await stop(served)


async def test_structured_content_is_returned_once(
    box: Box, transport: tuple[str, Served | None]
) -> None:
    async with hosting(box, [over(*transport)]) as (_, _, offers):
        tool = offers.get("mcp__ev__get-structured-content")
        result = await run(context(box), tool, {"location": "Chicago"})
    assert result.ok, result
    # its text content restates the structured content as JSON: the model reads it once
    assert json.loads(result.output) == {
        "temperature": 36,
        "conditions": "Light rain / drizzle",
        "humidity": 82,
    }


async def test_resources_and_prompts_are_listed_but_never_offered_as_tools(
    box: Box, transport: tuple[str, Served | None]
) -> None:
    async with hosting(box, [over(*transport)]) as (host, _, offers):
        session = host.connections["ev"].session
        resources = (await session.list_resources()).resources
        prompts = (await session.list_prompts()).prompts
        assert resources and prompts
        offered = set(offers.names())
        assert offered <= {f"mcp__ev__{t}" for t in TOOLS}
        assert not offered & {f"mcp__ev__{r.name}" for r in resources}
        assert not offered & {f"mcp__ev__{p.name}" for p in prompts}
        # contents that are not text (an embedded resource, an image) do not break a call
        ctx = context(box)
        image = await run(ctx, offers.get("mcp__ev__get-tiny-image"), {})
        embedded = await run(ctx, offers.get("mcp__ev__get-resource-reference"), {})
        assert image.ok and embedded.ok, (image, embedded)
        echo = await run(ctx, offers.get("mcp__ev__echo"), {"message": "still here"})
        assert echo.ok and "still here" in echo.output


async def test_progress_notifications_during_a_call_are_tolerated(
    box: Box, transport: tuple[str, Served | None]
) -> None:
    async with hosting(box, [over(*transport)]) as (_, _, offers):
        tool = offers.get("mcp__ev__trigger-long-running-operation")
        result = await run(context(box), tool, {"duration": 0.4, "steps": 4})
    assert result.ok and "completed" in result.output, result


async def test_a_call_past_its_timeout_is_mcp_timeout_and_the_server_still_serves(
    box: Box, transport: tuple[str, Served | None]
) -> None:
    # The call bound (3 s, tools/list's too) is far short of the call's 60; the start has
    # its own (node on a loaded machine's two cores took over 1 s to answer initialize).
    spec = over(*transport, timeout_secs=3.0, startup_timeout_secs=PATIENCE)
    async with hosting(box, [spec]) as (host, daemon, offers):
        ctx = context(box)
        tool = offers.get("mcp__ev__trigger-long-running-operation")
        slow = await run(ctx, tool, {"duration": 60, "steps": 60})
        assert slow.error_code == "mcp_timeout", slow
        echo = await run(ctx, offers.get("mcp__ev__echo"), {"message": "after"})
        assert echo.ok and "after" in echo.output, echo
        assert host.status["ev"] == "ready"
        assert [s.status for s in daemon.states] == ["starting", "ready"]


async def test_tools_list_changed_makes_the_host_list_again(box: Box) -> None:
    """server-everything registers a tool once the client is initialized and says
    notifications/tools/list_changed (over stdio it always arrives; over HTTP it goes to a
    stream the client may not have opened yet)."""
    async with hosting(box, [over("stdio", None)]) as (_, _, offers):
        with trio.fail_after(PATIENCE):
            while offers.count < 2:  # the first listing, then the one list_changed asked
                await offers.changed.wait()
        assert "mcp__ev__echo" in offers.names()


async def test_an_http_server_that_goes_away_is_unavailable_then_reached_again(
    box: Box, everything: Served
) -> None:
    async with hosting(box, [over("http", everything)]) as (host, daemon, offers):
        await stop(everything)
        echo = await run(context(box), offers.get("mcp__ev__echo"), {"message": "gone?"})
        assert echo.error_code == "mcp_unavailable", echo
        await daemon.wait_for("ev", "restarting")
        assert (await host.call("ev", "echo", {"message": "x"})).error_code == "mcp_unavailable"


async def test_headers_env_names_a_variable_the_agent_lacks_the_server_is_unavailable(
    box: Box, everything: Served
) -> None:
    spec = over("http", everything, headers_env={"Authorization": "SERVER_TOKEN", "X": "NOPE"})
    async with hosting(box, [spec]) as (_, daemon, offers):
        state = await daemon.wait_for("ev", "restarting")
        assert state.detail.endswith("variables the agent does not have: NOPE"), state
        assert "for the server" not in state.detail  # a value is never told
        assert offers.names() == []
    good = over("http", everything, headers_env={"Authorization": "SERVER_TOKEN"})
    async with hosting(box, [good]) as (_, _, offers):
        assert "mcp__ev__echo" in offers.names()


CONFINED_HOST = """
import json, sys, msgspec, trio
from pathlib import Path
from tests.agent.helpers import agent_spec
from tests.mcp.test_host import Box, hosting
from zeroclaw.agent import McpServerSpec
from zeroclaw.agent._sandbox import agent_confinement
from zeroclaw.policy import SandboxPlan, abi_version, apply_sandbox, cap_last_cap

allowed, other, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
tools = ("echo",)
ev = McpServerSpec("ev", "http", url=allowed, tools=tools, timeout_secs=10.0)
# The agent's spec names only `ev`: its TCP rules admit that port (and no other).
spec = msgspec.structs.replace(agent_spec(root), mcp_servers=(ev,))
confinement = agent_confinement(spec, abi_version(), cap_last_cap())
apply_sandbox(SandboxPlan(()), confinement, files=False)
stray = McpServerSpec("stray", "http", url=other, tools=tools, timeout_secs=10.0)

async def main():
    async with hosting(Box(root / "box"), [ev, stray]) as (host, daemon, offers):
        state = await daemon.wait_for("stray", "restarting")
        print(json.dumps({"offered": [t.name for t in offers.latest], "stray": state.detail}))

trio.run(main)
"""


async def test_the_kernel_refuses_the_agent_a_connect_to_a_port_its_profile_does_not_list(
    tmp_path: Path,
) -> None:
    from zeroclaw.policy import abi_version

    if abi_version() < 4:
        pytest.skip("this kernel's Landlock has no TCP rules (ABI < 4)")
    first, second = await serve_everything(), await serve_everything()
    try:
        result = await trio.run_process(
            [sys.executable, "-c", CONFINED_HOST, first.url, second.url, str(tmp_path)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    finally:
        await stop(first)
        await stop(second)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    seen = json.loads(result.stdout)
    assert seen["offered"] == ["mcp__ev__echo"]  # the allowed endpoint serves
    # the other one listens, but the kernel refuses the agent's connect to it
    assert "cannot reach 127.0.0.1:" in seen["stray"] and "EACCES" in seen["stray"], seen
