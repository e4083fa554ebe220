"""The MCP metadata probe (issue 26 §5): which manifests are started, the conversation as a
pure machine, how its end folds into the item, and real runs under the probe sandbox —
the real `mcp-server-time` and hostile servers that hang, flood, print garbage or exit at
once, none of which holds up another source."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec
import pytest

from tests.discovery.helpers import Project
from zeroclaw.discovery._cache import Inputs, cache_file, tool_hashes, verdict
from zeroclaw.discovery._mcp_probe import (
    MAX_GARBAGE,
    McpDialogue,
    McpProbeEnd,
    merge_probe,
    should_probe,
    tools_hash,
)
from zeroclaw.discovery._model import (
    DiscoveredItem,
    McpMetadata,
    RegistrationDecision,
    Source,
    Summary,
)
from zeroclaw.discovery._scan import Entry, Snapshot
from zeroclaw.policy import abi_version
from zeroclaw.turns import tool_digest

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


def _server_item(**fields: object) -> DiscoveredItem:
    base: dict[str, object] = {
        "kind": "mcp_server",
        "id": "srv",
        "source": Source("project_manifest", "mcp", "/p/mcp/srv.yaml", "mcp/srv.yaml"),
        "trust": "project",
        "program": "srv",
        "command": "/usr/bin/srv",
        "capabilities": ("mcp.tool.call",),
        "allowlists": {"tools": ("echo",)},
    }
    base.update(fields)
    return msgspec.convert(base, DiscoveredItem)


def _sent(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _reply(ident: object, result: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode() + b"\n"


# --- what is started ----------------------------------------------------------------------


def test_only_an_explicit_valid_stdio_manifest_is_probed() -> None:
    assert should_probe(_server_item())
    user = Source("user_dir", "mcp", "/h/.config/zeroclaw/mcp/s.yaml", "~/s.yaml")
    assert not should_probe(_server_item(source=user, trust="user_local"))
    assert not should_probe(_server_item(endpoint="http://127.0.0.1:9/mcp", command=""))
    assert not should_probe(_server_item(enabled=False))
    assert not should_probe(_server_item(command=""))  # its program did not resolve
    broken = {"level": "error", "kind": "schema_invalid", "message": "bad"}
    assert not should_probe(_server_item(diagnostics=(broken,)))


# --- the conversation ---------------------------------------------------------------------


def test_the_dialogue_initializes_then_pages_through_every_announced_list() -> None:
    d = McpDialogue()
    (init,) = _sent(d.opening())
    assert init["method"] == "initialize"
    answer = d.receive(
        _reply(
            init["id"],
            {
                "protocolVersion": "2025-06-18",
                "serverInfo": {"name": "demo", "version": "1.0"},
                "capabilities": {"tools": {}, "prompts": {}},
            },
        )
    )
    note, tools = _sent(answer)
    assert note["method"] == "notifications/initialized" and "id" not in note
    assert tools["method"] == "tools/list"
    # A page with a cursor, split across two chunks, then the last page.
    page = _reply(tools["id"], {"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "c2"})
    assert d.receive(page[:10]) == b""
    (second,) = _sent(d.receive(page[10:]))
    assert second["method"] == "tools/list" and second["params"] == {"cursor": "c2"}
    (prompts,) = _sent(d.receive(_reply(second["id"], {"tools": [{"name": "b"}]})))
    assert prompts["method"] == "prompts/list"  # resources were not announced: not asked
    assert not d.done
    d.receive(_reply(prompts["id"], {"prompts": [{"name": "greet"}]}))
    assert d.done and not d.failure
    assert d.server == "demo 1.0"
    assert [t["name"] for t in d.tools] == ["a", "b"] and d.prompts == ["greet"]


def test_the_dialogue_answers_a_ping_and_ignores_notifications_and_stray_ids() -> None:
    d = McpDialogue()
    d.opening()
    ping = b'{"jsonrpc":"2.0","id":"p1","method":"ping"}\n'
    (pong,) = _sent(d.receive(ping))
    assert pong == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    (refused,) = _sent(d.receive(b'{"jsonrpc":"2.0","id":7,"method":"roots/list"}\n'))
    assert refused["error"]["code"] == -32601  # type: ignore[index]
    assert d.receive(b'{"jsonrpc":"2.0","method":"notifications/message"}\n') == b""
    assert d.receive(_reply(99, {})) == b""
    assert not d.finished


def test_garbage_an_initialize_error_or_an_endless_line_ends_the_dialogue() -> None:
    d = McpDialogue()
    d.opening()
    d.receive(b"not json\n" * (MAX_GARBAGE + 1))
    assert "JSON-RPC" in d.failure
    refused = McpDialogue()
    refused.opening()
    refused.receive(b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}\n')
    assert refused.failure == "initialize refused: no"
    long = McpDialogue(max_line=100)
    long.opening()
    long.receive(b"x" * 101)
    assert "line over 100" in long.failure


# --- what the probe's end makes of the item -------------------------------------------------


def _done_dialogue(tools: list[dict[str, object]]) -> McpDialogue:
    d = McpDialogue()
    d.opening()
    d.receive(
        _reply(1, {"serverInfo": {"name": "s", "version": "2"}, "capabilities": {"tools": {}}})
    )
    d.receive(_reply(2, {"tools": tools}))
    assert d.done
    return d


def test_a_finished_probe_records_tools_with_schemas_digests_and_the_allowlist() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    d = _done_dialogue(
        [
            {"name": "echo", "description": "says", "inputSchema": schema},
            {"name": "rm", "annotations": {"readOnlyHint": False}},
        ]
    )
    item = merge_probe(
        _server_item(), d, McpProbeEnd("stopped"), now=1.0, timeout_secs=1, output_cap=9
    )
    assert item.health.status == "available" and item.health.version == "s 2"
    assert item.mcp is not None
    echo, rm = item.mcp.tools
    assert echo.digest == tool_digest("echo", "says", schema)
    assert echo.input_schema == schema and echo.allowed and not rm.allowed
    assert item.mcp.tools_hash == tools_hash(item.mcp.tools)
    assert any("not in the tools allowlist" in n.message for n in item.diagnostics)


def test_an_allowlisted_tool_the_server_lacks_is_a_warning() -> None:
    d = _done_dialogue([{"name": "other"}])
    item = merge_probe(
        _server_item(), d, McpProbeEnd("stopped"), now=1.0, timeout_secs=1, output_cap=9
    )
    assert any(n.level == "warning" and "echo" in n.message for n in item.diagnostics)


@pytest.mark.parametrize(
    ("end", "health", "kind"),
    [
        (McpProbeEnd("timeout"), "unavailable", "command_timeout"),
        (McpProbeEnd("stopped", truncated=True), "unavailable", "output_too_large"),
        (McpProbeEnd("exit 3"), "unavailable", "health_check_failed"),
        (McpProbeEnd("exec_refused 13"), "permission_denied", "permission_denied"),
        (McpProbeEnd(cannot_start="sandbox failed"), "unavailable", "health_check_failed"),
    ],
)
def test_a_probe_that_did_not_finish_says_why(end: McpProbeEnd, health: str, kind: str) -> None:
    d = McpDialogue()
    d.opening()
    item = merge_probe(_server_item(), d, end, now=1.0, timeout_secs=0.5, output_cap=64)
    assert item.health.status == health and item.mcp is None
    assert item.errors(kind)  # type: ignore[arg-type]


def test_the_tool_schema_hash_is_order_free_and_changes_with_any_schema() -> None:
    a = _done_dialogue([{"name": "a", "inputSchema": {}}, {"name": "b"}])
    b = _done_dialogue([{"name": "b"}, {"name": "a", "inputSchema": {}}])
    c = _done_dialogue([{"name": "b"}, {"name": "a", "inputSchema": {"type": "object"}}])
    hashes = [
        merge_probe(_server_item(), d, McpProbeEnd(), now=0, timeout_secs=1, output_cap=9).mcp
        for d in (a, b, c)
    ]
    assert all(h is not None for h in hashes)
    assert hashes[0].tools_hash == hashes[1].tools_hash != hashes[2].tools_hash  # type: ignore[union-attr]


def test_a_changed_tool_schema_hash_makes_the_cache_stale(tmp_path: Path) -> None:
    item = msgspec.structs.replace(_server_item(), mcp=McpMetadata(tools_hash="h1"))
    decision = msgspec.convert(
        {
            "key": item.key,
            "target": "adapter_registry",
            "action": "registered",
            "reason": "registered",
            "policy": "p",
        },
        type=RegistrationDecision,
    )
    snap = Snapshot(
        generated_at=0.0,
        workspace=str(tmp_path),
        sources=(),
        entries=(Entry(item, decision),),
        summary=Summary(1, 1, 0, 0, 0),
    )
    inputs = Inputs("c", "r", {})
    cached = cache_file(snap, inputs, now=0.0)
    assert tool_hashes(snap) == {"mcp_server:srv": "h1"}
    assert verdict(cached, inputs, 1.0, 60, None) == "fresh"
    assert verdict(cached, inputs, 1.0, 60, {"mcp_server:srv": "h1"}) == "fresh"
    assert verdict(cached, inputs, 1.0, 60, {"mcp_server:srv": "h2"}) == "tools_changed"
    assert verdict(cached, inputs, 1.0, 60, {"mcp_server:new": "h"}) == "tools_changed"


# --- real runs under the probe sandbox ----------------------------------------------------

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="needs Landlock")


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


@needs_landlock
@pytest.mark.skipif(not TIME_SERVER.exists(), reason="mcp-server-time is in the dev extras")
def test_the_real_time_server_is_probed_and_its_allowlisted_tools_recorded(
    project: Project,
) -> None:
    project.file(
        "mcp/time.yaml",
        f"id: time\ntransport: stdio\ncommand: {TIME_SERVER}\ntimeout_ms: 20000\n"
        "tools: [get_current_time]\n",
    )
    snap = project.scan(["mcp", "capabilities"])
    entry = snap.find("mcp_server:time")[0]
    item = entry.item
    assert item.health.status == "available", item.diagnostics
    assert item.mcp is not None and item.mcp.server.startswith("mcp-time")
    tools = {t.name: t for t in item.mcp.tools}
    assert set(tools) == {"get_current_time", "convert_time"}
    now = tools["get_current_time"]
    assert now.allowed and not tools["convert_time"].allowed
    assert now.digest == tool_digest(now.name, now.description, now.input_schema)
    assert "timezone" in now.input_schema["properties"]  # type: ignore[operator]
    assert entry.decision.registered


HANG = """
import sys, time
sys.stdin.readline()
time.sleep(600)
"""
FLOOD = """
import sys
while True:
    sys.stdout.write("x" * 65536)
    sys.stdout.flush()
"""
GARBAGE = """
import sys
sys.stdin.readline()
for _ in range(100):
    print("hello, I am not JSON-RPC", flush=True)
import time
time.sleep(600)
"""
EXIT = "import sys\nsys.exit(3)"


@needs_landlock
def test_hostile_servers_fail_their_probe_typed_and_never_hold_up_another_source(
    project: Project,
) -> None:
    for name, body in (("hang", HANG), ("flood", FLOOD), ("garbage", GARBAGE), ("quit", EXIT)):
        program = project.python_program(f"{name}-mcp", body)
        project.file(
            f"mcp/{name}.yaml",
            f"id: {name}\ntransport: stdio\ncommand: {program}\ntimeout_ms: 1500\n"
            "tools: [anything]\n",
        )
    project.program("codex")
    project.discovery.update(commands=["codex"], max_command_output_bytes=200_000)
    snap = project.scan(["mcp", "path", "capabilities"])
    reports = {r.name: r for r in snap.sources}
    assert reports["mcp"].status == "ok" and reports["path"].status == "ok"
    assert snap.find("cli_adapter:codex")[0].item.health.status == "available"
    expected = {
        "hang": "command_timeout",
        "flood": "output_too_large",
        "garbage": "health_check_failed",
        "quit": "health_check_failed",
    }
    for name, kind in expected.items():
        entry = snap.find(f"mcp_server:{name}")[0]
        assert entry.item.health.status == "unavailable", (name, entry.item.health)
        assert entry.item.errors(kind), (name, entry.item.diagnostics)  # type: ignore[arg-type]
        assert entry.decision.reason == "health_unavailable"
    quit_item = snap.find("mcp_server:quit")[0].item
    assert "exit 3" in quit_item.health.message
