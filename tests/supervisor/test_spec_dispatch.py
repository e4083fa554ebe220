"""build_specs and sub-agents (issue 12): an agent some loaded sub-agent lets call, or one
with facades, is started with the dispatch tools; everyone else is not; facades come from
the config; and a change of who may call restarts exactly the agents it concerns."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.conftest import VALID_DOC
from zeroclaw.agent import AgentSpec
from zeroclaw.config import validate_document
from zeroclaw.supervisor import build_specs, diff_specs

ENV = {"HOME": "/home/op"}


def specs(doc: dict[str, Any], callers: frozenset[str] = frozenset()) -> dict[str, AgentSpec]:
    config = validate_document(doc, base_dir=Path("/srv"), env=ENV)
    return build_specs(config, ENV, Path("/srv"), dispatch_callers=callers)


def test_by_default_no_agent_gets_dispatch_tools() -> None:
    for spec in specs(copy.deepcopy(VALID_DOC)).values():
        assert not spec.dispatch_tools and spec.facades == {}


def test_an_allowed_caller_gets_dispatch_tools_and_no_one_else() -> None:
    built = specs(copy.deepcopy(VALID_DOC), frozenset({"alpha", "cli", "gone"}))
    assert built["alpha"].dispatch_tools and not built["beta"].dispatch_tools


def test_facades_come_from_the_config_and_grant_the_dispatch_tools() -> None:
    doc = copy.deepcopy(VALID_DOC)
    doc["agents"]["beta"]["facades"] = {"summarize": "summarizer", "analyse": "content-analyst"}
    beta = specs(doc)["beta"]
    assert beta.dispatch_tools
    assert list(beta.facades.items()) == [
        ("analyse", "content-analyst"),
        ("summarize", "summarizer"),
    ]


def test_a_change_of_callers_restarts_exactly_the_agents_it_concerns() -> None:
    doc = copy.deepcopy(VALID_DOC)
    before = specs(doc)
    after = specs(doc, frozenset({"beta"}))
    diff = diff_specs(before, after)
    assert diff.changed == ("beta",) and diff.unchanged == ("alpha",)


def test_a_bundles_mcp_binding_gives_its_runtime_the_bound_tools_the_server_allows() -> None:
    from zeroclaw.supervisor._spec import bound_server_specs
    from zeroclaw.turns import McpBinding

    doc = copy.deepcopy(VALID_DOC)
    doc["mcp_servers"] = {
        "time": {"command": "mcp-server-time", "tools": ["convert_time", "get_current_time"]},
        "keyed": {"command": "srv", "env": ["SRV_TOKEN"], "tools": ["a"]},
    }
    config = validate_document(doc, base_dir=Path("/srv"), env=ENV)
    bindings = [
        McpBinding("time", ("get_current_time", "set_time")),
        McpBinding("keyed", ()),
        McpBinding("gone", ("x",)),  # the loader refuses such a bundle; never started
    ]
    time, keyed = bound_server_specs(config, bindings)
    assert (time.name, time.tools) == ("time", ("get_current_time",))
    assert (keyed.name, keyed.tools, keyed.env) == ("keyed", (), ("SRV_TOKEN",))
