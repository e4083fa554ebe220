"""The attack pass on MCP over streamable HTTP (issue 26): what a `headers_env` value, a
redirect or a server's stream can make the agent do or say.

Through a real daemon, the server is the SDK's own (tests/mcp/http_server.py) and the
header's value a known test secret, so the `daemons` fixture fails if any log holds it.
Against the agent's MCP host itself (outside the agent's Landlock, whose TCP rules would
refuse another port before the client's own rule is tried), the server is a raw one of ours
(tests/mcp/raw_http_server.py) that redirects elsewhere or streams without end."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.conftest import PATIENCE
from tests.known_secrets import MCP_HEADER
from tests.mcp._servers import free_port, start_listening
from tests.mcp.test_host import Box, context, hosting, run
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.agent import McpServerSpec

SERVER = Path(__file__).with_name("http_server.py")
RAW = Path(__file__).with_name("raw_http_server.py")


@pytest.fixture
def sdk_server() -> Iterator[str]:
    """The SDK's server on a free port: its URL, once it says it listens."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stderr is not None
    heard = b""
    while b"Uvicorn running on" not in heard:
        line = process.stderr.readline()
        assert line, f"the server exited: {heard!r}"
        heard += line
    drain = threading.Thread(target=lambda: process.stderr and process.stderr.read(), daemon=True)
    drain.start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()
        drain.join(PATIENCE)
        process.stderr.close()


def http_doc(root: Path, url: str, **server: Any) -> dict[str, Any]:
    port = url.split(":")[2].split("/")[0]
    doc = make_config(root, {"alpha": agent_entry(mcp=["h"])})
    doc["risk_profiles"]["sup"]["allowed_endpoints"] = [f"127.0.0.1:{port}"]
    doc["mcp_servers"] = {
        "h": {
            "url": url,
            "headers_env": {"Authorization": "MCP_AUTH"},
            "tools": ["echo"],
            "timeout_secs": 5.0,
            **server,
        }
    }
    return doc


def echo(daemon: Daemon, text: str) -> dict[str, Any]:
    message = "mcp h echo " + json.dumps({"text": text})
    result = daemon.cli("--agent", "alpha", "chat", "-m", message, "--json", timeout=PATIENCE)
    assert result.returncode == 0, result.stderr + daemon.log()
    turn: dict[str, Any] = json.loads(result.stdout)
    return turn


def live_detail(daemon: Daemon, *statuses: str) -> str:
    """The server's live detail in `mcp list --json`, once the agent reported one of
    `statuses`."""
    found: list[str] = []

    def reported(_: dict[str, Any]) -> bool:
        listing = daemon.cli("mcp", "list", "--json")
        assert listing.returncode == 0, listing.stderr
        for server in json.loads(listing.stdout)["servers"]:
            for live in server["live"]:
                if live["status"] in statuses:
                    found.append(live["detail"])
        return bool(found)

    daemon.wait_for(reported)
    return found[-1]


@pytest.mark.parametrize(
    "value",
    [
        MCP_HEADER + "\r\nX-Injected: 1",  # a header of the variable's own
        MCP_HEADER + "\n",  # an env file's trailing newline
        " " + MCP_HEADER,  # leading whitespace h11 refuses
    ],
    ids=["crlf", "newline", "space"],
)
def test_attack_a_header_value_a_request_cannot_carry_is_refused_by_name_never_shown(
    root: Path, daemons: Any, sdk_server: str, value: str
) -> None:
    # The hole: httpx refused the request with "Illegal header value b'<the value>'", and
    # that message became the server's state: the secret went to the agent's log, the
    # daemon's `mcp list`, `zeroclaw events` and every retry's warning.
    daemon = daemons(http_doc(root, sdk_server), faults=False).start(MCP_AUTH=value)
    turn = echo(daemon, "hello")
    assert turn["tool_calls"][0]["error_code"] == "mcp_unavailable", turn
    # restarting, or failed for good once its starts ran out (a slow machine looks late)
    detail = live_detail(daemon, "restarting", "failed")
    assert "MCP_AUTH" in detail and "a header cannot carry" in detail, detail
    secret = MCP_HEADER.split()[1]
    for shown in (
        daemon.cli("mcp", "list", "--json").stdout,
        daemon.cli("mcp", "show", "h", "--json").stdout,
        daemon.cli("events", "--kind", "mcp", "--json").stdout,
        daemon.cli("status", "--json").stdout,
        json.dumps(turn),
    ):
        assert secret not in shown, shown


class Raw:
    """A raw server of ours, and every request line it printed."""

    def __init__(self, process: trio.Process, port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.lines: list[str] = []
        self.heard = trio.Event()

    async def drain(self) -> None:
        assert self.process.stderr is not None
        pending = b""
        while chunk := await self.process.stderr.receive_some(65536):
            *lines, pending = (pending + chunk).split(b"\n")
            self.lines += [line.decode() for line in lines]
            self.heard.set()
            self.heard = trio.Event()

    async def requests(self) -> list[str]:
        """What it was asked until now: a request of ours marks the end."""
        marker = f"/marker-{len(self.lines)}"
        async with httpx.AsyncClient(timeout=PATIENCE) as client:
            await client.get(f"http://127.0.0.1:{self.port}{marker}")
        with trio.fail_after(PATIENCE):
            while not any(marker in line for line in self.lines):
                await self.heard.wait()
        end = next(i for i, line in enumerate(self.lines) if marker in line)
        return self.lines[:end]


@asynccontextmanager
async def raw(mode: str, port: int, other: int = 0) -> AsyncIterator[Raw]:
    argv = [sys.executable, str(RAW), str(port), mode, str(other)]
    process = await start_listening(argv, b"listening on")
    server = Raw(process, port)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.drain)
        try:
            yield server
        finally:
            process.kill()
            await process.wait()
            nursery.cancel_scope.cancel()


def over_raw(server: Raw, **kw: Any) -> McpServerSpec:
    return McpServerSpec(
        name="h",
        transport="http",
        url=server.url,
        headers_env={"Authorization": "SERVER_TOKEN"},
        tools=("echo",),
        timeout_secs=kw.pop("timeout_secs", 10.0),
        **kw,
    )


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


@pytest.mark.parametrize("mode", ["redirect", "redirect-host"])
async def test_attack_a_redirect_elsewhere_is_not_followed_and_takes_no_header_along(
    box: Box, mode: str
) -> None:
    # "redirect": to another port of the host, where a second server listens and says what
    # it was sent; "redirect-host": to the same port under another name (localhost).
    other = free_port()
    async with raw("trickle", other) as elsewhere:
        port = free_port()
        async with (
            raw(mode, port, other) as server,
            hosting(box, [over_raw(server)]) as (_, daemon, offers),
        ):
            state = await daemon.wait_for("h", "restarting")
            assert offers.names() == []
            assert state.detail.startswith("mcp_unavailable: h: Redirect to "), state
            assert "not followed" in state.detail
            asked = await server.requests()
            assert asked and all("authorization=for the server" in line for line in asked)
        assert await elsewhere.requests() == []


async def test_attack_an_event_that_never_ends_is_cut_at_the_line_bound(box: Box) -> None:
    async with (
        raw("endless-event", free_port()) as server,
        hosting(box, [over_raw(server, timeout_secs=PATIENCE)]) as (host, _, offers),
    ):
        # The call fails at the event's bound (1 MiB), long before its timeout, and only
        # that call: the session serves the next one
        echo = offers.get("mcp__h__echo")
        with trio.fail_after(PATIENCE / 2):
            result = await run(context(box), echo, {"text": "x"})
        assert result.error_code == "mcp_unavailable", result
        again = await run(context(box), echo, {"text": "again"})
        assert (again.ok, again.output) == (True, "again"), again
        assert host.status["h"] == "ready"


async def test_attack_a_stream_of_comments_without_an_answer_is_the_calls_timeout(
    box: Box,
) -> None:
    async with (
        raw("trickle", free_port()) as server,
        hosting(box, [over_raw(server, timeout_secs=2.0)]) as (host, _, offers),
    ):
        result = await run(context(box), offers.get("mcp__h__echo"), {"text": "x"})
        assert result.error_code == "mcp_timeout", result
        assert host.status["h"] == "ready"  # the session itself is fine
