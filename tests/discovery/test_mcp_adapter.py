"""A registered MCP server called through the adapter service (issue 26 §5): admitted by
its tools allowlist, what its metadata probe listed and the tool's read-only annotation,
then run by the daemon's real runner — the real `mcp-server-time`, started for the call
inside the calling agent's sandbox and stopped after it. Failures are typed and say
whether asking again may help."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bodies import raw
from tests.discovery.helpers import Project
from zeroclaw._ops import decode_body
from zeroclaw.bus import Request
from zeroclaw.config import load_config
from zeroclaw.discovery import DiscoveryService
from zeroclaw.events import EventSink
from zeroclaw.supervisor._adapters import adapter_runner
from zeroclaw.supervisor._spec import build_specs
from zeroclaw.turns import AdapterAdmission, AdapterResult, adapter_retryable

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
pytestmark = pytest.mark.skipif(
    not TIME_SERVER.exists(), reason="mcp-server-time is in the dev extras"
)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path)
    project.file(
        "mcp/time.yaml",
        f"id: time\ntransport: stdio\ncommand: {TIME_SERVER}\ntimeout_ms: 20000\n"
        "tools: [get_current_time, not_offered]\n",
    )
    agent: dict[str, Any] = {
        "model_provider": "offline.default",
        "runtime_profile": "default",
        "channels": ["cli.local"],
        "adapters": ["time"],
    }
    project.extra["risk_profiles"] = {"sup": {"level": "supervised"}, "ro": {"level": "readonly"}}
    project.extra["agents"] = {
        "alpha": {
            **agent,
            "risk_profile": "sup",
            "workspace": {"path": str(tmp_path / "ws-alpha")},
        },
        "reader": {
            **agent,
            "risk_profile": "ro",
            "workspace": {"path": str(tmp_path / "ws-reader")},
        },
    }
    (tmp_path / "ws-alpha").mkdir()
    (tmp_path / "ws-reader").mkdir()
    project.write_config()
    return project


def service(project: Project) -> DiscoveryService:
    config = load_config(project.config_path)
    env = project.env()
    specs = build_specs(config, env, project.root, config_path=project.config_path)
    return DiscoveryService(
        config, project.config_path, EventSink(), env, runner=adapter_runner(lambda: specs, env)
    )


def request(op: str, **body: Any) -> Request:
    return Request(id="r1", service="adapter", op=op, body=raw(body))


async def test_an_allowlisted_read_only_tool_runs_for_a_readonly_agent(project: Project) -> None:
    svc = service(project)
    await svc.rescan(refresh=True)
    admitted = await svc.serve("reader", request("admit", adapter="time", tool="get_current_time"))
    assert admitted.ok, admitted
    admission = decode_body(admitted.body, AdapterAdmission)
    # mcp-server-time annotates it read-only: no approval, allowed under readonly
    assert (admission.capability, admission.side_effect) == ("mcp.tool.call", "read_only_external")
    assert not admission.needs_approval and admission.tool == "get_current_time"
    done = await svc.serve(
        "reader",
        request("invoke", adapter="time", tool="get_current_time", input='{"timezone": "Etc/UTC"}'),
    )
    assert done.ok, done
    result = decode_body(done.body, AdapterResult)
    assert result.exit_code == 0 and not result.error, result
    assert json.loads(result.output.splitlines()[-1])["timezone"] == "Etc/UTC"


async def test_a_tool_outside_the_allowlist_or_the_servers_listing_is_refused_typed(
    project: Project,
) -> None:
    svc = service(project)
    await svc.rescan(refresh=True)
    for tool, code in (
        ("convert_time", "mcp_tool_not_allowed"),  # offered, but not in the allowlist
        ("not_offered", "mcp_tool_not_allowed"),  # allowlisted, but the probe did not see it
        (None, "bad_arguments"),
    ):
        body: dict[str, Any] = {"adapter": "time"}
        if tool is not None:
            body["tool"] = tool
        refused = await svc.serve("alpha", request("admit", **body))
        assert (refused.ok, refused.error) == (False, code), tool
        assert not adapter_retryable(refused.error)
    bad = await svc.serve(
        "alpha", request("invoke", adapter="time", tool="get_current_time", input="[1, 2]")
    )
    assert bad.error == "bad_arguments"


async def test_the_servers_own_error_is_a_tool_error_and_not_retryable(project: Project) -> None:
    svc = service(project)
    await svc.rescan(refresh=True)
    done = await svc.serve(
        "alpha",
        request(
            "invoke", adapter="time", tool="get_current_time", input='{"timezone": "Nowhere/X"}'
        ),
    )
    assert done.ok, done
    result = decode_body(done.body, AdapterResult)
    assert result.error == "mcp_tool_error" and result.retryable is False
    assert "Nowhere/X" in result.output


def test_only_transient_failures_are_retryable() -> None:
    for code in ("mcp_timeout", "mcp_unavailable", "timeout", "internal_error"):
        assert adapter_retryable(code)
    for code in ("mcp_tool_error", "mcp_tool_not_allowed", "bad_arguments", None, ""):
        assert not adapter_retryable(code)
