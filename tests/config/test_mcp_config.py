"""[mcp_servers] and [agents] mcp (issue 26, ADR 0053): each config breaks only one rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.config.test_rules import ENV, only
from zeroclaw.config import mcp_tool_name, validate_document
from zeroclaw.supervisor._spec import mcp_env, mcp_server_specs

TIME = {"command": "mcp-server-time", "tools": ["get_current_time"], "env": ["TZ"]}
REMOTE = {"url": "http://127.0.0.1:9000/mcp", "headers_env": {"Authorization": "MCP_AUTH"}}


def with_servers(doc: dict[str, Any], **servers: dict[str, Any]) -> dict[str, Any]:
    doc["mcp_servers"] = servers
    doc["agents"]["alpha"]["mcp"] = list(servers)
    return doc


def allow(doc: dict[str, Any], *endpoints: str) -> dict[str, Any]:
    profile = doc["agents"]["alpha"]["risk_profile"]
    doc["risk_profiles"][profile]["allowed_endpoints"] = list(endpoints)
    return doc


def test_a_stdio_and_an_http_server_load_and_reach_the_agents_spec(doc: dict[str, Any]) -> None:
    doc = allow(with_servers(doc, time=TIME, remote=REMOTE), "127.0.0.1:9000")
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    time, remote = config.mcp_servers["time"], config.mcp_servers["remote"]
    assert (time.transport, remote.transport) == ("stdio", "http")
    assert remote.tools == ()  # absent: no tool at all
    specs = mcp_server_specs(config, config.agents["alpha"])
    assert [s.name for s in specs] == ["time", "remote"]
    assert specs[0].command == "mcp-server-time" and specs[0].tools == ("get_current_time",)
    # the variables the agent's process must carry for its servers, and only those
    assert mcp_env(specs) == ("TZ", "MCP_AUTH")
    assert mcp_server_specs(config, config.agents["beta"]) == ()


@pytest.mark.parametrize(
    ("server", "why"),
    [
        ({}, "either command (stdio) or url"),
        ({**TIME, **REMOTE}, "either command (stdio) or url"),
        ({"url": "http://127.0.0.1:9/mcp", "args": ["x"]}, "args and env are for a stdio"),
        ({"command": "x", "headers_env": {"A": "B"}}, "headers_env is for an HTTP"),
        ({"command": "x", "tools": ["a", "a"]}, "listed more than once"),
        ({"command": "x", "tools": ["no spaces"]}, "is not an MCP tool name"),
        (
            {"url": "http://127.0.0.1:9/mcp", "headers_env": {"X\r\nInjected": "MCP_AUTH"}},
            "is not an HTTP header name",
        ),
        ({"command": "x", "env": ["not-a-name"]}, ""),
        ({"command": "x", "timeout_secs": 0}, ""),
        ({"command": "x", "unknown": 1}, ""),
    ],
)
def test_a_server_entry_that_is_not_one_transport_is_refused(
    doc: dict[str, Any], server: dict[str, Any], why: str
) -> None:
    key, message = only(with_servers(doc, bad=server))
    assert key.startswith("mcp_servers.bad"), key  # and not again at the agent's reference
    assert why in message


def test_an_agent_uses_only_configured_servers(doc: dict[str, Any]) -> None:
    doc = with_servers(doc, time=TIME)
    doc["agents"]["alpha"]["mcp"] = ["time", "tme"]
    key, message = only(doc)
    assert key == "agents.alpha.mcp[1]"
    assert "unknown MCP server 'tme'" in message and "did you mean 'time'" in message


def test_a_server_name_has_the_alias_syntax(doc: dict[str, Any]) -> None:
    doc["mcp_servers"] = {"Time": TIME}
    key, message = only(doc)
    assert key.replace('"', "") == "mcp_servers.Time" and "not an MCP server name" in message


def test_peers_and_senders_may_be_granted_an_allowed_mcp_tool_by_its_offered_name(
    doc: dict[str, Any],
) -> None:
    doc = with_servers(doc, time=TIME)
    granted = mcp_tool_name("time", "get_current_time")
    assert granted == "mcp__time__get_current_time"
    doc["agents"]["alpha"]["peer_tools"] = [granted]
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    # a tool outside the server's allowlist, or of a server the agent does not use: unknown
    for name in ("mcp__time__convert_time", "mcp__git__git_log"):
        doc["agents"]["alpha"]["peer_tools"] = [name]
        key, message = only(doc)
        assert key == "agents.alpha.peer_tools[0]" and f"unknown tool {name!r}" in message


def test_an_http_server_is_reached_only_at_an_endpoint_the_agents_profile_allows(
    doc: dict[str, Any],
) -> None:
    doc = with_servers(doc, remote=REMOTE)
    key, message = only(doc)
    assert key == "agents.alpha.mcp[0]"
    assert "127.0.0.1:9000" in message and "allowed_endpoints" in message
    allow(doc, "127.0.0.1:9001")  # another port of the host is not this endpoint
    assert only(doc)[0] == "agents.alpha.mcp[0]"
    doc["mcp_servers"]["remote"]["url"] = "https://mcp.example.org/mcp"
    allow(doc, "mcp.example.org:443")  # the scheme's port when the URL names none
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


@pytest.mark.parametrize("bad", ["localhost", ":80", "host:", "host:0", "host:65536", "h:x"])
def test_an_allowed_endpoint_is_host_and_port(doc: dict[str, Any], bad: str) -> None:
    key, message = only(allow(doc, bad))
    assert key.endswith("allowed_endpoints") and "is not 'host:port'" in message


@pytest.mark.parametrize(
    ("command", "resolved"),
    [
        ("mcp-server-time", "mcp-server-time"),  # a name: looked up on PATH at start
        ("../.venv/bin/mcp-server-time", "/srv/.venv/bin/mcp-server-time"),
        ("bin/server", "/srv/zc/bin/server"),
        ("/opt/mcp/server", "/opt/mcp/server"),
        ("~/bin/server", str(Path("~/bin/server").expanduser())),
    ],
)
def test_a_relative_server_path_is_relative_to_the_config_files_directory(
    doc: dict[str, Any], command: str, resolved: str
) -> None:
    doc = with_servers(doc, time={**TIME, "command": command})
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    assert config.mcp_servers["time"].command == resolved
