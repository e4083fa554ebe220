"""`model_provider` as a fallback chain: a list of validated references (issue 27)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.config.test_rules import only, problems
from zeroclaw.config import validate_document


def test_a_chain_of_known_providers_loads_in_order(doc: dict[str, Any]) -> None:
    doc["providers"]["openai"] = {"main": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}}
    doc["agents"]["alpha"]["model_provider"] = ["openai.main", "offline.default"]
    config = validate_document(doc)
    assert config.agents["alpha"].provider_chain == ("openai.main", "offline.default")
    assert config.agents["beta"].provider_chain == ("offline.default",)


def test_each_link_of_a_chain_is_checked_where_it_stands(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["model_provider"] = ["offline.default", "offline.defualt", "openai"]
    found = problems(doc)
    assert "did you mean 'offline.default'?" in found["agents.alpha.model_provider[1]"]
    assert "'<kind>.<alias>'" in found["agents.alpha.model_provider[2]"]
    assert "agents.alpha.model_provider[0]" not in found


@pytest.mark.parametrize(
    ("chain", "words"),
    [
        ([], "1 to 8"),
        (["offline.default"] * 2, "listed more than once"),
        ([f"offline.p{i}" for i in range(9)], "1 to 8"),
    ],
)
def test_a_chain_is_short_and_names_each_provider_once(
    doc: dict[str, Any], chain: list[str], words: str
) -> None:
    doc["agents"]["alpha"]["model_provider"] = chain
    key, message = only(doc)
    assert key == "agents.alpha.model_provider" and words in message
