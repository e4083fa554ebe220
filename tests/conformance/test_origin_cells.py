"""The origin cells (ADR 0042), driven through the product's own decision: the daemon's
grant for the origin (PeerPolicy.origin_grant over a real config), the toolset the agent
builds from it (TurnEngine.origin_toolset's Toolset.only, the peer_toolset for a peer,
the runtime's own tools for a dispatch), and the engine's gate (`not_granted`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conformance._matrix import ORIGIN_MCP_TOOL, Cell, Observed, cells_on
from tests.conformance._table import record
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw import tools
from zeroclaw.agent._turn import not_granted
from zeroclaw.bus import Origin, PeerPolicy
from zeroclaw.config import AgentConfig, validate_document
from zeroclaw.tools import SKILL_READ, Tool, ToolResult, Toolset
from zeroclaw.tools._snapshot import SUBMIT_RESULT

CELLS = cells_on("origin")


def _mcp_tool() -> Tool[Any]:
    """An MCP server's tool as the agent's host offers it (ADR 0053): server h, tool echo."""
    from zeroclaw.mcp._tools import ListedTool, mcp_tool

    async def call(server: str, tool: str, arguments: dict[str, object]) -> ToolResult:
        return ToolResult(True, "")

    listed = ListedTool("echo", "Echo.", {"type": "object"}, read_only=True)
    made = mcp_tool("h", listed, call, readonly_agent=False)
    assert made.name == ORIGIN_MCP_TOOL
    return made


# Every agent tool, as the toolset of an agent that has them all (facades aside), and one
# tool of an MCP server it uses.
_BUILT_IN = tools.agent_toolset(
    tools.DEFAULT_TOOLSET,
    dispatch_tools=True,
    facades={},
    adapters=True,
    skills=[("some-skill", "/nonexistent-zc-skills/some-skill")],
    reminders=True,
)
FULL = Toolset("full", (*(_BUILT_IN.get(n) for n in _BUILT_IN.names()), _mcp_tool()))


def policy(
    tmp_path: Path,
    group_tools: tuple[str, ...],
    approvals: str,
    schedule_tools: tuple[str, ...] = (),
) -> PeerPolicy:
    doc = make_config(tmp_path, {"alpha": agent_entry(channels=["cli.local", "webhook.ops"])})
    doc["risk_profiles"]["sup"]["reminders"] = {}  # the reminder tools are known tools
    # its schedule's runs get exactly its tools (issue 28)
    doc["agents"]["alpha"]["schedules"] = {
        "probe": {"every": "1h", "text": "x", "tools": list(schedule_tools)}
    }
    doc["agents"]["alpha"]["adapters"] = ["some-adapter"]  # invoke_adapter is a known tool
    doc["agents"]["alpha"]["mcp"] = ["h"]  # and so is an allowed tool of its MCP server
    doc["agents"]["alpha"]["skills"] = ["some-skill"]  # and skill_read
    doc["mcp_servers"] = {"h": {"command": "mcp-server-h", "tools": ["echo"]}}
    doc["channels"]["webhook"] = {"ops": {"listen": "127.0.0.1:8787", "secret_env": "K"}}
    doc["gateway"] = {  # a gateway token's sender: the `api` origin (issue 29)
        "tokens": {"ci": {"token_env": "ZC_CI", "sender": "stranger", "agents": ["alpha"]}}
    }
    for name, channel in (("hooks", "webhook.ops"), ("api", "api.ci")):
        doc["peer_groups"][name] = {
            "channel": channel,
            "agents": ["alpha"],
            "external_peers": ["*"],
            "tools": list(group_tools),
            "approvals": approvals,
        }
    return PeerPolicy(validate_document(doc))


def origin_of(kind: str) -> Origin:
    if kind == "operator":
        return Origin("cli.local")
    if kind == "api":
        return Origin.api("ci", "stranger")
    if kind == "schedule":
        return Origin.schedule("alpha", "probe")
    return Origin("webhook.ops", "stranger")


def turn_toolset(tmp_path: Path, kind: str, grant: tuple[str, ...]) -> Toolset:
    if kind == "subagent":  # a runtime's engine: its two tools, nothing of the agent's
        return Toolset("runtime", ())
    if kind == "peer":
        peer_tools = grant or AgentConfig().peer_tools  # the config's default
        return FULL.only(peer_tools, "peer_tools")
    if kind == "schedule":
        names = (
            policy(tmp_path, (), "operator", grant)
            .origin_grant("alpha", Origin.schedule("alpha", "probe"))
            .tool_names()
        )
        return FULL if names is None else FULL.only(names, "origin_tools")
    names = policy(tmp_path, grant, "operator").origin_grant("alpha", origin_of(kind)).tool_names()
    return FULL if names is None else FULL.only(names, "origin_tools")


def gate(toolset: Toolset, known: Toolset, name: str) -> Observed:
    """The engine's first check (TurnEngine._run_tool): granted, else why not."""
    if toolset.get(name) is not None:
        return Observed("allowed")
    if name in known:
        refused = not_granted(name, toolset)
        return Observed("refused", refused.error_code, refused.detail)
    return Observed("refused", "bad_arguments", f"no tool {name!r}")


def route(tmp_path: Path, kind: str, approvals: str) -> str:
    if kind in ("peer", "subagent"):
        # A peer's turn runs without an approver (agent runtime `_run_peer_turn`); a
        # runtime's channel cannot ask: both deny.
        return "none"
    # a schedule's run: the group's setting is not the schedule's, the operator answers
    return policy(tmp_path, (), approvals).origin_grant("alpha", origin_of(kind)).approvals


@pytest.mark.parametrize("cell", CELLS, ids=[c.key for c in CELLS])
def test_origin(cell: Cell, tmp_path: Path) -> None:
    extra: dict[str, Any] = cell.extra
    kind = extra["kind"]
    if cell.boundary == "origin_tools":
        assert cell.tool is not None
        known = Toolset("runtime", ()) if kind == "subagent" else FULL
        observed = gate(turn_toolset(tmp_path, kind, extra["grant"]), known, cell.tool)
    else:
        observed = Observed("allowed", route(tmp_path, kind, extra["approvals"]))
    record(cell, observed)


def test_a_runtime_has_no_agent_tool() -> None:
    """A runtime's two tools are its own: submit is no agent's, and its skill_read (over
    its snapshot) is not the agent's of the same name (over the agent's skills)."""
    assert SUBMIT_RESULT not in FULL.names()
    agents = FULL.get(SKILL_READ)
    assert agents is not None and set(agents.spec.parameters["properties"]) == {"skill", "path"}
    assert tools.SKILL_READ_SPEC.parameters["required"] == ["path"]
