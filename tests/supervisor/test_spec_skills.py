"""build_specs and skills (ADR 0056): each agent is started with the skills it loaded; the
skills dirs become the daemon's files (refused to every file tool) once an agent uses
skills; the agent's Landlock ruleset reads its own skills' folders and nothing more; a
changed listing (a description) restarts exactly the agents that use the skill; a
changed body restarts nothing, being read when asked for."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.conftest import VALID_DOC
from tests.skills.test_gather import write_skill
from zeroclaw.agent import AgentSpec, SkillSpec, agent_plan, path_rules
from zeroclaw.config import validate_document
from zeroclaw.policy import READ, check_path
from zeroclaw.skills import load_catalogue
from zeroclaw.supervisor import build_specs, diff_specs

ENV = {"HOME": "/home/op"}


def specs(tmp_path: Path, doc: dict[str, Any]) -> dict[str, AgentSpec]:
    config = validate_document(doc, base_dir=tmp_path, env=ENV)
    path = tmp_path / "zeroclaw.toml"
    catalogue = load_catalogue(config, path)
    assert not catalogue.issues()
    return build_specs(config, ENV, tmp_path, config_path=path, skills=catalogue)


def skilled(tmp_path: Path) -> dict[str, Any]:
    write_skill(tmp_path / "skills", "notes")
    write_skill(tmp_path / "skills", "review")
    doc = copy.deepcopy(VALID_DOC)
    doc["agents"]["alpha"]["skills"] = ["review", "notes"]
    return doc


def test_each_agent_is_started_with_the_skills_it_loaded(tmp_path: Path) -> None:
    built = specs(tmp_path, skilled(tmp_path))
    skills = tmp_path / "skills"
    assert built["alpha"].skills == (
        SkillSpec("review", "d", str(skills / "review")),
        SkillSpec("notes", "d", str(skills / "notes")),
    )
    assert built["beta"].skills == ()


def test_the_skills_dirs_are_the_daemons_once_an_agent_uses_skills(tmp_path: Path) -> None:
    plain = specs(tmp_path, copy.deepcopy(VALID_DOC))
    assert str(tmp_path / "skills") not in plain["beta"].protected_paths
    built = specs(tmp_path, skilled(tmp_path))
    for spec in built.values():  # every agent, with skills or not
        assert str(tmp_path / "skills") in spec.protected_paths
        decision = check_path(path_rules(spec), str(tmp_path / "skills/notes/SKILL.md"), "read")
        assert decision.code == "forbidden_path"


def test_the_sandbox_reads_its_own_skills_folders_only(tmp_path: Path) -> None:
    built = specs(tmp_path, skilled(tmp_path))
    rules = dict(agent_plan(built["alpha"]).rules)
    for name in ("notes", "review"):
        assert rules[str(tmp_path / "skills" / name)] == READ
    assert str(tmp_path / "skills") not in rules
    beta = dict(agent_plan(built["beta"]).rules)
    assert not [p for p in beta if p.startswith(str(tmp_path / "skills"))]


def test_a_changed_skill_restarts_the_agents_that_use_it(tmp_path: Path) -> None:
    doc = skilled(tmp_path)
    doc["agents"]["beta"]["skills"] = ["notes"]
    before = specs(tmp_path, doc)
    (tmp_path / "skills" / "notes" / "SKILL.md").write_text(
        "---\nname: notes\ndescription: d\n---\nA new body: read live, no restart.\n"
    )
    assert diff_specs(before, specs(tmp_path, doc)).changed == ()
    (tmp_path / "skills" / "review" / "SKILL.md").write_text(
        "---\nname: review\ndescription: Review changes.\n---\n"
    )
    assert diff_specs(before, specs(tmp_path, doc)).changed == ("alpha",)
