"""What `gather` sees of a skill on a real filesystem, and what `decide_skill` makes of
it: symlinks in and out, hard links, FIFOs, scripts, huge and deep trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zeroclaw.skills import (
    MAX_SKILL_DEPTH,
    MAX_SKILL_ENTRIES,
    MAX_SKILL_MD_BYTES,
    LoadedSkill,
    ProfileFacts,
    SkillRefusal,
    SkillRefused,
    decide_skill,
    gather,
)

SUP = ProfileFacts("sup", "supervised", frozenset({"git"}))


def write_skill(root: Path, name: str, front: str = "", body: str = "body\n") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n{front}---\n{body}")
    return folder


def outcome(roots: list[Path], name: str = "notes") -> LoadedSkill | SkillRefusal:
    decided = decide_skill(gather([str(r) for r in roots], name), SUP)
    return decided.code if isinstance(decided, SkillRefused) else decided


def test_a_skill_is_found_and_loaded_under_its_real_path(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills", "notes")
    (folder / "docs").mkdir()
    (folder / "docs" / "guide.md").write_text("guide")
    loaded = outcome([tmp_path / "skills"])
    assert isinstance(loaded, LoadedSkill) and loaded.folder == str(folder.resolve())
    facts = gather([str(tmp_path / "skills")], "notes")
    assert {e.path for e in facts.entries} == {"SKILL.md", "docs", "docs/guide.md"}


def test_the_first_dir_holding_a_name_wins(tmp_path: Path) -> None:
    first = write_skill(tmp_path / "a", "notes")
    write_skill(tmp_path / "b", "notes")
    loaded = outcome([tmp_path / "missing", tmp_path / "a", tmp_path / "b"])
    assert isinstance(loaded, LoadedSkill) and loaded.folder == str(first)
    # An entry of that name that is broken still decides: it is not skipped for the next.
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes").write_text("a file")
    assert outcome([tmp_path / "c", tmp_path / "a"]) == "skill_not_found"


def test_a_symlinked_skill_inside_its_dir_loads(tmp_path: Path) -> None:
    real = write_skill(tmp_path / "skills", "real-notes")
    (real / "SKILL.md").write_text("---\nname: notes\ndescription: d\n---\n")
    os.symlink("real-notes", tmp_path / "skills" / "notes")
    loaded = outcome([tmp_path / "skills"])
    assert isinstance(loaded, LoadedSkill) and loaded.folder == str(real)


def test_a_symlinked_skills_dir_is_judged_by_where_it_leads(tmp_path: Path) -> None:
    write_skill(tmp_path / "real", "notes")
    os.symlink(tmp_path / "real", tmp_path / "skills")
    assert isinstance(outcome([tmp_path / "skills"]), LoadedSkill)


def test_a_symlink_escaping_the_dir_is_path_not_allowed(tmp_path: Path) -> None:
    write_skill(tmp_path / "elsewhere", "notes")
    (tmp_path / "skills").mkdir()
    os.symlink(tmp_path / "elsewhere" / "notes", tmp_path / "skills" / "notes")
    assert outcome([tmp_path / "skills"]) == "path_not_allowed"
    os.symlink("..", tmp_path / "skills" / "up")
    assert outcome([tmp_path / "skills"], "up") == "path_not_allowed"
    os.symlink("/nonexistent-zc/notes", tmp_path / "skills" / "dangling")
    assert outcome([tmp_path / "skills"], "dangling") == "path_not_allowed"


@pytest.mark.parametrize("kind", ["symlink in", "symlink out", "hard link", "fifo"])
def test_anything_but_files_and_folders_inside_is_path_not_allowed(
    tmp_path: Path, kind: str
) -> None:
    folder = write_skill(tmp_path / "skills", "notes")
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (folder / "docs").mkdir()
    if kind == "symlink in":
        os.symlink("../SKILL.md", folder / "docs" / "again.md")
    elif kind == "symlink out":
        os.symlink(secret, folder / "docs" / "secret.md")
    elif kind == "hard link":
        os.link(secret, folder / "docs" / "secret.md")
    else:
        os.mkfifo(folder / "docs" / "pipe")
    assert outcome([tmp_path / "skills"]) == "path_not_allowed"


def test_skill_md_as_a_symlink_or_a_folder_is_no_skill_md(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "notes"
    folder.mkdir(parents=True)
    (tmp_path / "real.md").write_text("---\nname: notes\ndescription: d\n---\n")
    os.symlink(tmp_path / "real.md", folder / "SKILL.md")
    assert outcome([tmp_path / "skills"]) == "path_not_allowed"
    (folder / "SKILL.md").unlink()
    (folder / "SKILL.md").mkdir()
    assert outcome([tmp_path / "skills"]) == "skill_not_found"


@pytest.mark.parametrize("how", ["execute bit", "shebang", "nested shebang"])
def test_a_script_needs_a_declared_shell(tmp_path: Path, how: str) -> None:
    folder = write_skill(tmp_path / "skills", "notes")
    script = folder / ("scripts/run" if how == "nested shebang" else "run.sh")
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\necho hi\n" if "shebang" in how else "echo hi\n")
    if how == "execute bit":
        script.chmod(0o755)
    assert outcome([tmp_path / "skills"]) == "undeclared_script"
    write_skill(tmp_path / "skills", "notes", "permissions: {commands: [git]}\n")
    assert isinstance(outcome([tmp_path / "skills"]), LoadedSkill)


def test_a_huge_skill_md_is_read_one_byte_past_its_cap(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "notes", body="x" * (8 * MAX_SKILL_MD_BYTES))
    facts = gather([str(tmp_path / "skills")], "notes")
    assert facts.skill_md is not None and len(facts.skill_md) == MAX_SKILL_MD_BYTES + 1
    assert outcome([tmp_path / "skills"]) == "skill_too_large"


def test_a_wide_tree_is_listed_one_entry_past_its_cap(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills", "notes")
    for i in range(3 * MAX_SKILL_ENTRIES):
        (folder / f"f{i:04}").write_text("")
    facts = gather([str(tmp_path / "skills")], "notes")
    assert len(facts.entries) == MAX_SKILL_ENTRIES + 1
    assert outcome([tmp_path / "skills"]) == "skill_too_large"


def test_a_deep_tree_is_not_walked_past_its_cap(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills", "notes")
    deep = folder.joinpath(*[f"d{i}" for i in range(MAX_SKILL_DEPTH + 5)])
    deep.mkdir(parents=True)
    (deep / "run.sh").write_text("#!/bin/sh\n")
    facts = gather([str(tmp_path / "skills")], "notes")
    assert facts.too_deep and not any(e.path.endswith("run.sh") for e in facts.entries)
    assert outcome([tmp_path / "skills"]) == "skill_too_large"
    # At the cap itself it loads.
    (folder / "d0").rename(tmp_path / "gone")
    folder.joinpath(*[f"d{i}" for i in range(MAX_SKILL_DEPTH - 1)]).mkdir(parents=True)
    assert isinstance(outcome([tmp_path / "skills"]), LoadedSkill)


def test_an_unreadable_folder_is_not_listed(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder regardless of mode")
    folder = write_skill(tmp_path / "skills", "notes")
    folder.chmod(0)
    try:
        assert outcome([tmp_path / "skills"]) == "skill_not_found"
    finally:
        folder.chmod(0o700)
