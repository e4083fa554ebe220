"""`[agents.<alias>.facades]` (issue 12): tool name = sub-agent id. Each rule broken alone
is one issue at its key path; peer_tools accepts the sub-agent tools and the agent's own
facades, and nothing else."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest

from tests.config.test_rules import ENV, only
from zeroclaw.config import validate_document


def valid(doc: dict[str, Any]) -> Any:
    return validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


def test_facades_default_to_none_and_load_as_written(doc: dict[str, Any]) -> None:
    assert valid(doc).agents["alpha"].facades == {}
    doc["agents"]["alpha"]["facades"] = {
        "summarize": "summarizer",
        "analyse_content": "content-analyst",
        "x" + "y" * 63: "s" + "t" * 63,  # both at their longest
    }
    assert valid(doc).agents["alpha"].facades["summarize"] == "summarizer"


@pytest.mark.parametrize("name", ["Summarize", "1sum", "sum-up", "sum.up", "x" * 65, "", "é"])
def test_a_facade_tool_name_has_the_tool_name_syntax(doc: dict[str, Any], name: str) -> None:
    doc["agents"]["alpha"]["facades"] = {name: "summarizer"}
    key, message = only(doc)
    assert key.startswith("agents.alpha.facades.") and "[a-z][a-z0-9_]{0,63}" in message


@pytest.mark.parametrize(
    ("name", "what"),
    [("shell", "a built-in tool"), ("file_read", "a built-in tool")]
    + [(n, "a sub-agent tool") for n in ("agent_catalog", "agent_dispatch")],
)
def test_a_facade_cannot_take_the_name_of_another_tool(
    doc: dict[str, Any], name: str, what: str
) -> None:
    doc["agents"]["alpha"]["facades"] = {name: "summarizer"}
    key, message = only(doc)
    assert key == f"agents.alpha.facades.{name}"
    assert f"'{name}' is already {what}" in message


@pytest.mark.parametrize("target", ["Summarizer", "9lives", "sum/marizer", "a" * 65, "", "s.x"])
def test_a_facade_names_a_well_formed_sub_agent_id(doc: dict[str, Any], target: str) -> None:
    doc["agents"]["alpha"]["facades"] = {"summarize": target}
    key, message = only(doc)
    assert key == "agents.alpha.facades.summarize"
    assert f"{target!r} is not a sub-agent id" in message and "{0,63}" in message


def test_a_facade_target_must_be_a_string(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["facades"] = {"summarize": 3}
    key, _ = only(doc)
    assert key == "agents.alpha.facades.summarize"


def test_an_unknown_sub_agent_is_not_a_config_error(doc: dict[str, Any]) -> None:
    """Bundles are not config: the dispatch service refuses an unknown id when it is used."""
    doc["agents"]["alpha"]["facades"] = {"summarize": "no-such-bundle"}
    valid(doc)


def test_peer_tools_accept_sub_agent_tools_and_own_facades(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["facades"] = {"summarize": "summarizer"}
    doc["agents"]["alpha"]["peer_tools"] = ["agent_catalog", "agent_dispatch", "summarize"]
    assert valid(doc).agents["alpha"].peer_tools == (
        "agent_catalog",
        "agent_dispatch",
        "summarize",
    )


def test_peer_tools_refuse_another_agents_facade(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["facades"] = {"summarize": "summarizer"}
    doc["agents"]["beta"]["peer_tools"] = ["file_read", "summarize"]
    key, message = only(doc)
    assert key == "agents.beta.peer_tools[1]"
    assert "unknown tool 'summarize'" in message and "agent_dispatch" in message


def test_peer_tools_suggest_the_near_name(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["facades"] = {"summarize": "summarizer"}
    doc["agents"]["alpha"]["peer_tools"] = ["sumarize"]
    _, message = only(doc)
    assert "did you mean 'summarize'?" in message


def test_the_config_names_the_tools_the_tools_package_has() -> None:
    from zeroclaw.config._models import DispatchToolName
    from zeroclaw.tools import DISPATCH_TOOL_NAMES

    assert typing.get_args(DispatchToolName) == DISPATCH_TOOL_NAMES


def test_the_sub_agent_id_syntax_is_the_bundles() -> None:
    from zeroclaw.config._rules import SUBAGENT_ID_SYNTAX
    from zeroclaw.subagents._bundle import ID_SYNTAX

    assert SUBAGENT_ID_SYNTAX.pattern == ID_SYNTAX.pattern


def test_the_schema_describes_facades() -> None:
    from zeroclaw.config import Config

    agent = Config.model_json_schema(mode="validation")["$defs"]["AgentConfig"]
    facades = agent["properties"]["facades"]
    assert facades["type"] == "object" and facades["additionalProperties"] == {"type": "string"}
    assert "summarize" in facades["description"]
    assert "agent_dispatch" in agent["properties"]["peer_tools"]["description"]


def test_the_demo_config_gives_alpha_a_summarize_facade() -> None:
    from tests.conftest import REPO
    from zeroclaw.config import load_config

    config = load_config(REPO / "etc" / "zeroclaw.toml", ENV)
    assert config.agents["alpha"].facades == {"summarize": "summarizer"}
    assert (REPO / "etc" / "subagents" / "summarizer" / "agent.yaml").is_file()
