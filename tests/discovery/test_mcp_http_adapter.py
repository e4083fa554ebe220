"""A registered MCP server over streamable HTTP (an `mcp/` manifest with `transport: http`)
called through the adapter service (ADR 0054): the daemon opens one session for the call
(connect, call the tool, end it) with the real runner, against the SDK's own server on
loopback (tests/mcp/http_server.py) — only at an endpoint the caller's risk profile
lists, admitted like any MCP adapter's tool."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.bodies import raw
from tests.discovery.helpers import Project, decision
from tests.mcp._servers import free_port, start_listening
from zeroclaw._ops import decode_body
from zeroclaw.bus import Request
from zeroclaw.config import load_config
from zeroclaw.discovery import DiscoveryService
from zeroclaw.events import EventSink
from zeroclaw.supervisor._adapters import adapter_runner
from zeroclaw.supervisor._spec import build_specs
from zeroclaw.turns import AdapterAdmission, AdapterResult, adapter_approval_question

SERVER = Path(__file__).parents[1] / "mcp" / "http_server.py"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    port = free_port()
    process = await start_listening([sys.executable, str(SERVER), str(port)], b"Uvicorn running on")

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
    assert process.stderr is not None
    await process.stderr.aclose()


def service(tmp_path: Path, url: str) -> DiscoveryService:
    project = Project(tmp_path)
    endpoint = url.split("/")[2]
    project.file(
        "mcp/remote.yaml",
        f"id: remote\ntransport: http\nendpoint: {url}\ntimeout_ms: 20000\ntools: [echo]\n",
    )
    down = free_port()  # nothing listens there
    project.file(
        "mcp/down.yaml",
        f"id: down\ntransport: http\nendpoint: http://127.0.0.1:{down}/mcp\ntools: [echo]\n",
    )
    listed = [endpoint, f"127.0.0.1:{down}"]
    project.extra["risk_profiles"] = {
        "ro": {"level": "readonly", "allowed_endpoints": listed},
        "sup": {"level": "supervised", "allowed_endpoints": listed},
        "full": {"level": "full", "allowed_endpoints": listed},
        "closed": {"level": "full"},
    }
    entry: dict[str, Any] = {
        "model_provider": "offline.default",
        "runtime_profile": "default",
        "channels": ["cli.local"],
        "adapters": ["remote", "down"],
    }
    project.extra["agents"] = {
        alias: {**entry, "risk_profile": alias, "workspace": {"path": str(tmp_path / alias)}}
        for alias in ("ro", "sup", "full", "closed")
    }
    for alias in project.extra["agents"]:
        (tmp_path / alias).mkdir()
    project.write_config()
    config = load_config(project.config_path)
    env = project.env()
    specs = build_specs(config, env, project.root, config_path=project.config_path)
    return DiscoveryService(
        config, project.config_path, EventSink(), env, runner=adapter_runner(lambda: specs, env)
    )


def request(op: str, **body: Any) -> Request:
    return Request(id="r1", service="adapter", op=op, body=raw(body))


async def test_a_tool_of_an_http_mcp_server_is_called_in_one_session(
    tmp_path: Path, url: str
) -> None:
    svc = service(tmp_path, url)
    await svc.rescan(refresh=True)
    call = {"adapter": "remote", "tool": "echo", "input": '{"text": "over http"}'}
    done = await svc.serve("full", request("invoke", **call))
    got = decode_body(done.body, AdapterResult)
    # the text, then the structured content (zeroclaw.mcp.render_result)
    assert (got.exit_code, got.error) == (0, ""), got
    assert got.output.splitlines() == ["over http", '{"result":"over http"}']
    # supervised: asked first (nothing says the tool is read-only), the question names
    # the endpoint; the call runs with that yes only
    admitted = decode_body(
        (await svc.serve("sup", request("admit", adapter="remote", tool="echo"))).body,
        AdapterAdmission,
    )
    assert admitted.needs_approval and admitted.command == url
    question = adapter_approval_question(admitted, call["input"])
    denied = await svc.serve("sup", request("invoke", turn="t1", **call))
    assert denied.error == "approval_denied"
    svc.approvals.record("sup", "t1", question)
    done = await svc.serve("sup", request("invoke", turn="t1", **call))
    assert decode_body(done.body, AdapterResult).output.startswith("over http\n")


async def test_the_endpoint_and_the_profile_decide_before_any_session(
    tmp_path: Path, url: str
) -> None:
    svc = service(tmp_path, url)
    await svc.rescan(refresh=True)
    for agent, tool, code in (
        ("closed", "echo", "endpoint_not_allowed"),  # its profile lists no endpoint
        ("ro", "echo", "mcp_tool_not_allowed"),  # not annotated read-only: not for readonly
        ("full", "grow", "mcp_tool_not_allowed"),  # outside the manifest's allowlist
    ):
        refused = await svc.serve(agent, request("admit", adapter="remote", tool=tool))
        assert (refused.ok, refused.error) == (False, code), (agent, tool)


async def test_a_server_that_is_not_there_is_unavailable_and_retryable(
    tmp_path: Path, url: str
) -> None:
    svc = service(tmp_path, url)
    await svc.rescan(refresh=True)
    done = await svc.serve(
        "full", request("invoke", adapter="down", tool="echo", input='{"text": "x"}')
    )
    got = decode_body(done.body, AdapterResult)
    assert (got.error, got.retryable) == ("mcp_unavailable", True), got
    assert "cannot reach 127.0.0.1:" in got.detail and "ECONNREFUSED" in got.detail


def test_an_mcp_manifest_names_a_program_or_an_endpoint_for_its_transport(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path)
    project.file(
        "mcp/both.yaml", "id: both\ntransport: http\nendpoint: http://h.test/\ncommand: x\n"
    )
    project.file("mcp/none.yaml", "id: none\ntransport: http\ntools: [a]\n")
    project.file("mcp/stdio.yaml", "id: stdio\ntransport: stdio\nendpoint: http://h.test/\n")
    snapshot = project.scan(["mcp"])
    for ident in ("both", "none", "stdio"):
        assert decision(snapshot, f"mcp_server:{ident}").reason == "schema_invalid", ident
