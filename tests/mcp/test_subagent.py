"""A sub-agent bundle's `mcp` binding through a real daemon (issue 26): the revision's runtime
starts the bound servers (the real `mcp-server-time`, and the hostile server of these tests)
as its own children, inside its read-only sandbox, and is offered exactly the bound tools the
server's allowlist also names and the server annotates read-only. A binding to an unknown
server, or to a tool outside the server's allowlist, refuses the bundle."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.subagents.helpers import DaemonFactory, dispatch, subagent_config, write_bundle

TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
HOSTILE = Path(__file__).with_name("hostile_server.py").read_text()

pytestmark = pytest.mark.skipif(TIME_SERVER is None, reason="mcp-server-time is not installed")


def _config(root: Path) -> dict[str, Any]:
    doc = subagent_config(root)
    doc["mcp_servers"] = {
        "time": {"command": TIME_SERVER, "tools": ["get_current_time", "convert_time"]},
        # The source inline: a sub-agent's server reads what its runtime reads, and the
        # tests directory is none of that.
        "h": {
            "command": sys.executable,
            "args": ["-c", HOSTILE, "ok"],
            "tools": ["echo", "write", "read", "env"],
        },
    }
    return doc


def _summary(daemon: Any, task: str) -> str:
    code, data = dispatch(daemon, "clock", task)
    record = data["invocation"]
    assert (code, record["state"]) == (0, "succeeded"), (data, daemon.log())
    summary: str = record["output"]["summary"]
    return summary


def test_a_sub_agent_gets_exactly_the_bound_read_only_tools_of_its_servers(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(
        root / "subagents",
        "clock",
        callers=("cli",),
        mcp=[
            {"server": "time", "tools": ["get_current_time"]},
            {"server": "h", "tools": ["echo", "write", "read"]},
        ],
    )
    daemon = daemons(_config(root), faults=False).start()
    now = _summary(daemon, 'mcp time get_current_time {"timezone": "UTC"}')
    assert '"timezone":"UTC"' in now and "day_of_week" in now
    assert _summary(daemon, 'mcp h echo {"text": "hello"}') == "hello"
    # In the server's allowlist but not bound; bound but not read-only; neither.
    for task in ("mcp time convert_time {}", 'mcp h write {"path": "x"}', "mcp h env"):
        assert "refused: mcp_tool_not_allowed" in _summary(daemon, task), task
    # The server is the runtime's child, inside its sandbox: the daemon's files stay shut.
    read = _summary(daemon, "mcp h read " + json.dumps({"path": str(daemon.config_path)}))
    from zeroclaw.policy import abi_version

    if abi_version() >= 1:
        assert read == "refused: EACCES"
    # The daemon pinned the runtime's tools under its sub-agent (not its revision).
    pins = json.loads(daemon.cli("mcp", "tools", "--json").stdout)
    owners = {(p["agent"], p["server"], p["tool"]) for p in pins["tools"]}
    assert ("sub:clock", "time", "get_current_time") in owners, pins


def test_a_binding_to_an_unknown_server_or_a_tool_outside_the_allowlist_refuses_the_bundle(
    root: Path, daemons: DaemonFactory
) -> None:
    subagents = root / "subagents"
    write_bundle(subagents, "ghost", mcp=[{"server": "nope", "tools": ["x"]}])
    write_bundle(
        subagents, "greedy", mcp=[{"server": "time", "tools": ["get_current_time", "set_time"]}]
    )
    write_bundle(subagents, "fine", mcp=[{"server": "time", "tools": ["get_current_time"]}])
    daemon = daemons(_config(root), faults=False).start()
    listing = json.loads(daemon.cli("subagents", "list", "--json").stdout)
    assert {s["id"] for s in listing["subagents"]} == {"fine"}
    problems = {Path(r["path"]).name: " ".join(r["problems"]) for r in listing["refused"]}
    assert "'nope' is not in [mcp_servers]" in problems["ghost"]
    assert "'set_time' not in [mcp_servers.time] tools" in problems["greedy"]


def test_config_validate_warns_of_a_bundle_bound_outside_the_configs_servers(
    tmp_path: Path,
) -> None:
    import tomli_w

    from tests.pins.test_cli import validate

    doc = _config(tmp_path)
    subagents = tmp_path / "subagents"
    write_bundle(subagents, "ghost", mcp=[{"server": "nope", "tools": ["x"]}])
    write_bundle(subagents, "greedy", mcp=[{"server": "time", "tools": ["set_time"]}])
    write_bundle(subagents, "fine", mcp=[{"server": "time", "tools": ["get_current_time"]}])
    config_path = tmp_path / "zeroclaw.toml"
    config_path.write_text(tomli_w.dumps(doc))
    result = validate(config_path)
    assert result.returncode == 0, result.stderr
    warnings = {w["path"]: w["message"] for w in json.loads(result.stdout)["warnings"]}
    assert set(warnings) == {"subagents.ghost", "subagents.greedy"}, warnings
    assert "'nope' is not in [mcp_servers]" in warnings["subagents.ghost"]
    assert "'set_time' not in [mcp_servers.time] tools" in warnings["subagents.greedy"]
