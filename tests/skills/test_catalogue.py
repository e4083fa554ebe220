"""Every enabled agent's skills from a config: one decision per agent and skill, refusals
keyed at the agent's `skills` entry with their reason code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.skills.test_gather import write_skill
from zeroclaw.config import validate_document
from zeroclaw.skills import FIXES, SKILL_REFUSALS, load_catalogue


def catalogue_of(tmp_path: Path, doc: dict[str, Any]) -> Any:
    config = validate_document(doc, base_dir=tmp_path, env={})
    return load_catalogue(config, tmp_path / "zeroclaw.toml")


def test_one_skill_suits_one_profile_and_exceeds_another(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    write_skill(tmp_path / "skills", "notes")
    write_skill(tmp_path / "skills", "writer", "permissions: {workspace_write: true}\n")
    doc["risk_profiles"]["ro"] = {"level": "readonly"}
    doc["agents"]["alpha"]["skills"] = ["writer", "notes"]
    doc["agents"]["beta"].update(risk_profile="ro", skills=["notes", "writer", "ghost"])
    found = catalogue_of(tmp_path, doc)
    assert [s.name for s in found.loaded["alpha"]] == ["writer", "notes"]  # its order
    assert [s.name for s in found.loaded["beta"]] == ["notes"]
    issues = found.issues()
    assert [(i.key, i.code) for i in issues] == [
        ("agents.beta.skills[1]", "permissions_exceed_profile"),
        ("agents.beta.skills[2]", "skill_not_found"),
    ]
    assert "risk profile 'ro' is readonly" in issues[0].message
    assert str(tmp_path / "skills") in issues[1].message  # where it looked
    assert issues[1].as_json()["code"] == "skill_not_found"


def test_disabled_agents_and_agents_without_skills_are_not_looked_at(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    doc["agents"]["beta"].update(enabled=False, skills=["ghost"])
    found = catalogue_of(tmp_path, doc)
    assert found.loaded == {} and found.issues() == []


def test_skills_dirs_are_searched_in_order_relative_to_the_config(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    write_skill(tmp_path / "team", "notes")
    write_skill(tmp_path / "mine", "notes")
    doc["skills"] = {"dirs": ["mine", "team"]}
    doc["agents"]["alpha"]["skills"] = ["notes"]
    found = catalogue_of(tmp_path, doc)
    assert found.loaded["alpha"][0].folder == str(tmp_path / "mine" / "notes")


def test_every_refusal_says_what_to_do() -> None:
    assert set(FIXES) == set(SKILL_REFUSALS)
