"""An agent's `skill_read` (ADR 0056): only its loaded skills, only inside each folder,
never through a symlink or a hard link, whatever is swapped in after the load; bounded.
Each case with openat2 and with the O_NOFOLLOW walk."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import trio

from zeroclaw.policy import rules_for
from zeroclaw.tools import (
    MAX_SKILL_READ_BYTES,
    SKILL_READ,
    ShellSettings,
    ToolContext,
    read_skill_file,
    skill_tool,
)

WALKS = [pytest.param(True, id="openat2"), pytest.param(False, id="walk")]


@pytest.fixture
def skills(tmp_path: Path) -> dict[str, str]:
    """Two loaded skills, a secret beside them, and another agent's skill next door."""
    root = tmp_path / "skills"
    notes = root / "notes"
    (notes / "docs").mkdir(parents=True)
    (notes / "SKILL.md").write_text("---\nname: notes\ndescription: d\n---\nTake notes.\n")
    (notes / "docs" / "guide.md").write_text("the guide")
    (root / "other" / "docs").mkdir(parents=True)
    (root / "other" / "SKILL.md").write_text("another agent's skill")
    (tmp_path / "secret.txt").write_text("the daemon's own")
    return {"notes": str(notes), "empty": str(root / "other" / "docs")}


@pytest.mark.parametrize("openat2", WALKS)
def test_skill_md_by_default_a_file_by_path_and_a_folder_lists(
    skills: dict[str, str], openat2: bool
) -> None:
    read = read_skill_file(skills, "notes", use_openat2=openat2)
    assert read.ok and "Take notes." in read.output and read.data["truncated"] is False
    assert read_skill_file(skills, "notes", "  ", use_openat2=openat2).output == read.output
    guide = read_skill_file(skills, "notes", "./docs/guide.md", use_openat2=openat2)
    assert guide.ok and guide.output == "the guide"
    listing = read_skill_file(skills, "notes", ".", use_openat2=openat2)
    assert listing.ok and listing.output == "SKILL.md\ndocs/"
    assert read_skill_file(skills, "empty", ".", use_openat2=openat2).output == ""


def test_only_its_own_skills_exist(skills: dict[str, str]) -> None:
    for name in ("other", "../other", "NOTES", ""):
        result = read_skill_file(skills, name)
        assert result.error_code == "skill_not_found" and "notes" in result.detail
        assert "another agent" not in result.output


@pytest.mark.parametrize("openat2", WALKS)
@pytest.mark.parametrize(
    "path", ["../other/SKILL.md", "docs/../../other/SKILL.md", "/etc/passwd", "a\x00b", ".."]
)
def test_paths_leading_out_are_refused_before_any_open(
    skills: dict[str, str], path: str, openat2: bool
) -> None:
    result = read_skill_file(skills, "notes", path, use_openat2=openat2)
    assert result.error_code == "skill_path_not_allowed" and not result.output


@pytest.mark.parametrize("openat2", WALKS)
@pytest.mark.parametrize("where", ["docs/secret.md", "up"])
def test_a_symlink_placed_inside_after_the_load_leads_nowhere(
    skills: dict[str, str], tmp_path: Path, where: str, openat2: bool
) -> None:
    folder = Path(skills["notes"])
    os.symlink(tmp_path / "secret.txt" if where != "up" else "..", folder / where)
    path = where if where != "up" else "up/secret.txt"
    result = read_skill_file(skills, "notes", path, use_openat2=openat2)
    assert result.error_code == "skill_path_not_allowed" and "daemon's own" not in result.output
    os.symlink("SKILL.md", folder / "again.md")  # even one pointing inside
    assert read_skill_file(skills, "notes", "again.md").error_code == "skill_path_not_allowed"


@pytest.mark.parametrize("openat2", WALKS)
def test_a_skill_folder_swapped_for_a_symlink_after_the_load_leads_nowhere(
    skills: dict[str, str], tmp_path: Path, openat2: bool
) -> None:
    folder = Path(skills["notes"])
    folder.rename(tmp_path / "moved")
    (tmp_path / "bait" / "docs").mkdir(parents=True)
    (tmp_path / "bait" / "docs" / "guide.md").write_text("the daemon's own")
    os.symlink(tmp_path / "bait", folder)
    result = read_skill_file(skills, "notes", "docs/guide.md", use_openat2=openat2)
    assert result.error_code == "skill_path_not_allowed" and not result.output
    # And a directory inside it swapped so.
    folder.unlink()
    (tmp_path / "moved").rename(folder)
    (folder / "docs" / "guide.md").unlink()
    (folder / "docs").rmdir()
    os.symlink(tmp_path / "bait" / "docs", folder / "docs")
    result = read_skill_file(skills, "notes", "docs/guide.md", use_openat2=openat2)
    assert result.error_code == "skill_path_not_allowed" and not result.output


@pytest.mark.parametrize("openat2", WALKS)
def test_a_hard_link_is_refused(skills: dict[str, str], tmp_path: Path, openat2: bool) -> None:
    os.link(tmp_path / "secret.txt", Path(skills["notes"]) / "linked.md")
    result = read_skill_file(skills, "notes", "linked.md", use_openat2=openat2)
    assert result.error_code == "skill_path_not_allowed" and not result.output


@pytest.mark.parametrize("openat2", WALKS)
def test_a_fifo_is_not_opened(skills: dict[str, str], openat2: bool) -> None:
    os.mkfifo(Path(skills["notes"]) / "pipe")
    result = read_skill_file(skills, "notes", "pipe", use_openat2=openat2)
    assert result.error_code == "not_a_regular_file"


def test_a_missing_file_is_not_found(skills: dict[str, str]) -> None:
    for path in ("nope.md", "docs/nope/x", "SKILL.md/x"):
        assert read_skill_file(skills, "notes", path).error_code == "not_found"
    gone = {"notes": str(Path(skills["notes"]).parent / "deleted")}
    assert read_skill_file(gone, "notes").error_code == "not_found"


def test_what_is_read_is_bounded(skills: dict[str, str]) -> None:
    big = Path(skills["notes"]) / "big.md"
    big.write_bytes(b"x" * (MAX_SKILL_READ_BYTES * 4))
    result = read_skill_file(skills, "notes", "big.md")
    assert result.ok and result.data["truncated"] is True
    assert result.output.endswith(f"[truncated at {MAX_SKILL_READ_BYTES} bytes]")
    assert len(result.output) < MAX_SKILL_READ_BYTES + 100


def test_a_race_of_swaps_never_reads_outside(skills: dict[str, str], tmp_path: Path) -> None:
    """A thread swaps docs/ between a real folder and a symlink to the secret's folder
    while reads run: each read is the guide or a refusal, never the secret."""
    folder = Path(skills["notes"])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "guide.md").write_text("the daemon's own")
    os.symlink(tmp_path / "out", folder / "docs-link")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(folder / "docs", folder / "docs-real")
            os.rename(folder / "docs-link", folder / "docs")
            os.rename(folder / "docs", folder / "docs-link")
            os.rename(folder / "docs-real", folder / "docs")

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        seen = {read_skill_file(skills, "notes", "docs/guide.md").output for _ in range(300)}
    finally:
        stop.set()
        swapper.join()
    assert "the daemon's own" not in seen and seen <= {"the guide", ""}


async def test_the_tool_reads_in_a_thread_as_a_model_calls_it(skills: dict[str, str]) -> None:
    tool = skill_tool(sorted(skills.items()))
    assert tool.name == SKILL_READ
    assert set(tool.spec.parameters["properties"]) == {"skill", "path"}
    assert tool.spec.parameters["required"] == ["skill"]
    ctx = ToolContext(
        rules=rules_for("/nonexistent-ws", workspace_only=True, may_write=False),
        shell=ShellSettings(frozenset(), False, True, 1.0, {}),
        reach=None,  # type: ignore[arg-type]  # skill_read reaches nothing
        asks_approval=False,
    )
    result = await tool.run(ctx, tool.decode({"skill": "notes", "path": "docs/guide.md"}))
    assert result.ok and result.output == "the guide"
    assert (await tool.run(ctx, tool.decode({"skill": "notes"}))).output.endswith("notes.\n")
    await trio.lowlevel.checkpoint()
