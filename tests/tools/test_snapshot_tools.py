"""A sub-agent runtime's two tools: `skill_read` stays inside the snapshot, and
`subagent_submit_result` is told the output schema and hands back what was submitted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.subagents import load_bundle, materialise
from zeroclaw.tools import (
    SKILL_READ_SPEC,
    SUBMIT_RESULT,
    skill_read,
    submit_result,
    submit_spec,
    wraps_result,
)

ETC = Path(__file__).resolve().parents[2] / "etc" / "subagents"
SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    """content-analyst's real snapshot (read-only, as materialise leaves it), with a
    secret beside it and a symlink planted inside pointing at it."""
    bundle = load_bundle(ETC / "content-analyst", providers=frozenset({"offline.default"}))
    assert not hasattr(bundle, "problems")
    root = materialise(bundle, tmp_path / "revisions")  # type: ignore[arg-type]
    (tmp_path / "revisions" / "secret.txt").write_text("the daemon's own")
    os.chmod(root, 0o755)
    os.symlink("../secret.txt", root / "link.txt")
    os.symlink("..", root / "up")
    os.chmod(root, 0o555)
    return root


def test_a_skill_file_of_the_snapshot_is_read(snapshot: Path) -> None:
    result = skill_read(str(snapshot), "skills/analysis-method/SKILL.md")
    assert result.ok and "Six steps" in result.output
    assert skill_read(str(snapshot), "./SYSTEM.md").output.startswith("You are content-analyst")


def test_a_directory_lists_its_entries(snapshot: Path) -> None:
    result = skill_read(str(snapshot), "skills")
    assert result.ok and result.output == "analysis-method"


@pytest.mark.parametrize(
    "path",
    [
        "../secret.txt",
        "skills/../../secret.txt",
        "/etc/passwd",
        str(Path("/") / "etc" / "hostname"),
        "link.txt",
        "up/secret.txt",
        "",
        "  ",
        "a\x00b",
        None,
        42,
    ],
)
def test_anything_resolving_outside_the_snapshot_is_refused(snapshot: Path, path: object) -> None:
    result = skill_read(str(snapshot), path)
    assert not result.ok
    assert result.error_code == "subagent_skill_path_not_allowed"
    assert "the daemon's own" not in result.output


def test_a_missing_file_is_not_found(snapshot: Path) -> None:
    result = skill_read(str(snapshot), "skills/nope/SKILL.md")
    assert (result.ok, result.error_code) == (False, "not_found")


def test_what_is_read_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_text("x" * 5000)
    result = skill_read(str(tmp_path), "big.md", limit=100)
    assert result.ok and result.output == "x" * 100 + "\n[truncated at 100 bytes]"


def test_the_submit_tool_is_told_the_output_schema_itself() -> None:
    spec = submit_spec(SCHEMA)
    assert spec.name == SUBMIT_RESULT and spec.parameters == SCHEMA
    assert SKILL_READ_SPEC.parameters["required"] == ["path"]


def test_without_an_object_schema_the_result_is_wrapped() -> None:
    assert wraps_result(None) and wraps_result({"type": "string"}) and not wraps_result(SCHEMA)
    free = submit_spec(None).parameters
    assert free["properties"] == {"result": {"type": "object"}} and free["required"] == ["result"]
    assert submit_spec({"type": "string"}).parameters["properties"]["result"] == {"type": "string"}


def test_submit_hands_back_the_arguments_unchecked_against_the_schema() -> None:
    # Not validated here: the daemon is the trust boundary and checks the output schema.
    assert submit_result(SCHEMA, {"other": 1}).result == {"other": 1}
    assert submit_result(None, {"result": {"a": 1}}).result == {"a": 1}
    assert submit_result({"type": "string"}, {"result": "s"}).result == "s"


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_submit_refuses_arguments_that_are_not_an_object(args: object) -> None:
    result = submit_result(SCHEMA, args)
    assert (result.ok, result.error_code) == (False, "bad_arguments")


def test_submit_without_schema_needs_an_object_result() -> None:
    assert submit_result(None, {"result": [1]}).error_code == "bad_arguments"
    assert submit_result(None, {"other": {}}).error_code == "bad_arguments"
