"""The config side of skills (ADR 0056): names, where skills live, skill_read as a
grantable tool, and a skills dir kept apart from every workspace and the daemon's files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.config.test_rules import ENV, only, problems
from zeroclaw.config import daemon_refusals, skills_dirs, validate_document

BASE = Path("/srv/zc")
CONFIG = BASE / "zeroclaw.toml"


def load(doc: dict[str, Any]) -> Any:
    return validate_document(doc, base_dir=BASE, env=ENV)


@pytest.mark.parametrize("bad", ["Notes", "1x", "a/b", "..", "", "a" * 65, "n o"])
def test_a_skill_name_is_a_plain_folder_name(doc: dict[str, Any], bad: str) -> None:
    doc["agents"]["alpha"]["skills"] = [bad]
    key, message = only(doc)
    assert key == "agents.alpha.skills" and "not a skill name" in message


def test_a_skill_is_listed_once(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["skills"] = ["notes", "notes"]
    assert "listed more than once" in only(doc)[1]


def test_skills_dirs_default_beside_the_config_and_only_when_used(doc: dict[str, Any]) -> None:
    assert skills_dirs(load(doc), CONFIG) == ()
    doc["agents"]["beta"]["skills"] = ["notes"]
    assert skills_dirs(load(doc), CONFIG) == (BASE / "skills",)
    doc["skills"] = {"dirs": ["mine", "/opt/team-skills", "~/skills"]}
    assert skills_dirs(load(doc), CONFIG) == (
        BASE / "mine",
        Path("/opt/team-skills"),
        Path(os.path.expanduser("~/skills")),
    )
    doc["agents"]["beta"]["enabled"] = False
    assert skills_dirs(load(doc), CONFIG) == ()


def test_skill_read_is_grantable_only_to_an_agent_with_skills(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["peer_tools"] = ["skill_read"]
    doc["peer_groups"]["ops"]["tools"] = ["skill_read"]
    found = problems(doc)
    assert set(found) == {"agents.alpha.peer_tools[0]", "peer_groups.ops.tools[0]"}
    assert "unknown tool 'skill_read'" in found["agents.alpha.peer_tools[0]"]
    doc["agents"]["alpha"]["skills"] = ["notes"]
    load(doc)  # a member of ops has skills: the group may grant the tool


def test_a_facade_cannot_be_named_skill_read(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["facades"] = {"skill_read": "summarizer"}
    assert "already the skill tool" in only(doc)[1]


def refusals(doc: dict[str, Any], resolve: Any = os.path.normpath) -> dict[str, str]:
    """The skills dirs' refusals, by key (their messages joined)."""
    found: dict[str, str] = {}
    for issue in daemon_refusals(load(doc), {**ENV, "HOOK_SECRET": "x"}, CONFIG, resolve=resolve):
        found[issue.key] = f"{found.get(issue.key, '')}\n{issue.message}".strip()
    return found


@pytest.mark.parametrize(
    ("dirs", "why"),
    [
        (["ws/alpha/skills"], "alpha's workspace"),
        (["ws"], "alpha's workspace"),
        (["ws/beta"], "beta's workspace"),
        (["."], "config file"),
        (["state"], "state_dir"),
        (["/"], "runtime_dir"),
    ],
)
def test_a_skills_dir_shares_no_tree_with_a_workspace_or_the_daemon(
    doc: dict[str, Any], dirs: list[str], why: str
) -> None:
    doc["agents"]["alpha"]["skills"] = ["notes"]
    doc["skills"] = {"dirs": ["skills", *dirs]}
    found = refusals(doc)
    assert list(found) == ["skills.dirs[1]"] and why in found["skills.dirs[1]"]


def test_a_skills_dir_is_judged_by_where_its_symlink_leads(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["skills"] = ["notes"]

    def resolve(path: str) -> str:  # skills/ is a symlink into beta's workspace
        return path.replace("/srv/zc/skills", "/srv/zc/ws/beta/skills")

    found = refusals(doc, resolve)
    assert list(found) == ["skills"] and "beta's workspace" in found["skills"]


def test_no_skill_listed_no_skills_dir_judged(doc: dict[str, Any]) -> None:
    doc["skills"] = {"dirs": ["ws"]}
    assert refusals(doc) == {}
    doc["agents"]["alpha"]["skills"] = ["notes"]
    assert refusals(doc)
