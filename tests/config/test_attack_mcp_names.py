"""The attack pass on MCP tool names (issue 26): a tool is offered, granted (`peer_tools`, a
peer group's `tools`) and refused by one flat name, `mcp__<server>__<tool>`, so that name
must stand for one tool of one server, never for a facade, and be one the providers take.

The holes: a server name could hold `__` or end in `_` (server `a` with tool `b__c` and
server `a__b` with tool `c` were both `mcp__a__b__c`: a grant of one was a grant of the
other, and the agent's toolset refused the second with a ValueError that restarted its
server forever); a facade could be named `mcp__time__get_current_time` (its tool shadowed
the MCP one, and took its grants); and an allowed tool name with a `.`, or a name over 64
characters in all, was offered to providers that refuse the whole request for it
(`^[a-zA-Z0-9_-]{1,64}$`): every turn of the agent failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.config.test_mcp_config import TIME, with_servers
from tests.config.test_rules import ENV, only
from zeroclaw.config import mcp_tool_name, validate_document

HOSTILE = {"command": "mcp-server-x"}


@pytest.mark.parametrize("name", ["a__b", "a___b", "time_", "a__"])
def test_attack_a_server_name_that_makes_the_flat_name_ambiguous_is_refused(
    doc: dict[str, Any], name: str
) -> None:
    # `a` with tool `b__c` and `a__b` with tool `c` were one name; so were `a_` + `b` and
    # `a` + `_b`. A server name without `__` and without a final `_` ends at the first `__`.
    doc = with_servers(doc, a={**HOSTILE, "tools": ["b__c", "_b"]}, **{name: HOSTILE})
    key, message = only(doc)
    assert key.replace('"', "") == f"mcp_servers.{name}", key
    assert "not an MCP server name" in message and "'__'" in message


def test_attack_two_servers_can_no_longer_offer_the_same_flat_name(doc: dict[str, Any]) -> None:
    doc = with_servers(doc, a={**HOSTILE, "tools": ["b__c"]}, a__b={**HOSTILE, "tools": ["c"]})
    assert mcp_tool_name("a", "b__c") == mcp_tool_name("a__b", "c")  # why the name is refused
    assert only(doc)[0].replace('"', "") == "mcp_servers.a__b"
    # A tool name may hold `__`: with the server's name ending at the first `__`, the
    # flat name still parses one way.
    del doc["mcp_servers"]["a__b"]
    doc["agents"]["alpha"]["mcp"] = ["a"]
    doc["agents"]["alpha"]["peer_tools"] = ["mcp__a__b__c"]
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


def test_attack_a_facade_cannot_take_an_mcp_tools_name(doc: dict[str, Any]) -> None:
    doc = with_servers(doc, time=TIME)
    doc["agents"]["alpha"]["facades"] = {"mcp__time__get_current_time": "summarizer"}
    key, message = only(doc)
    assert key == "agents.alpha.facades.mcp__time__get_current_time", key
    assert "mcp__" in message and "MCP tools" in message


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("files.read", "'.'"),
        ("t" * 64, "64 characters"),  # mcp__x__ + 64: 72 characters in all
    ],
)
def test_attack_an_allowed_tool_the_providers_would_refuse_by_name_is_refused(
    doc: dict[str, Any], tool: str, why: str
) -> None:
    doc = with_servers(doc, x={**HOSTILE, "tools": ["ok", tool]})
    key, message = only(doc)
    assert key == "mcp_servers.x.tools[1]", key
    assert mcp_tool_name("x", tool) in message and why in message
