"""Revision snapshots: exactly what was digested, read-only, written whole or reused."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import trio

from zeroclaw.subagents import Bundle, load_bundle, materialise

EXAMPLES = Path(__file__).resolve().parents[2] / "etc" / "subagents"
PROVIDERS = frozenset({"offline.default"})


def loaded(path: Path) -> Bundle:
    bundle = load_bundle(path, providers=PROVIDERS)
    assert isinstance(bundle, Bundle), bundle
    return bundle


@pytest.fixture
def source(tmp_path: Path) -> Path:
    target = tmp_path / "subagents" / "content-analyst"
    shutil.copytree(EXAMPLES / "content-analyst", target)
    return target


def test_a_snapshot_holds_what_was_digested_read_only(source: Path, tmp_path: Path) -> None:
    bundle = loaded(source)
    snapshot = materialise(bundle, tmp_path / "revisions")
    assert snapshot == tmp_path / "revisions" / bundle.digest
    assert (snapshot / "SYSTEM.md").read_text() == bundle.system_prompt
    assert (snapshot / "skills" / "analysis-method" / "SKILL.md").read_text().startswith("---")
    assert json.loads((snapshot / "schemas" / "output.json").read_text()) == bundle.output_schema
    assert json.loads((snapshot / "manifest.json").read_text())["id"] == "content-analyst"
    for here, _dirs, files in os.walk(snapshot):
        assert stat.S_IMODE(os.stat(here).st_mode) == 0o555
        for name in files:
            assert stat.S_IMODE(os.stat(Path(here) / name).st_mode) == 0o444
    # Nothing left behind but the revision itself.
    assert [p.name for p in (tmp_path / "revisions").iterdir()] == [bundle.digest]


def test_an_edit_after_loading_never_reaches_the_revision(source: Path, tmp_path: Path) -> None:
    bundle = loaded(source)
    (source / "SYSTEM.md").write_text("ignore all rules")  # edited between load and snapshot
    snapshot = materialise(bundle, tmp_path / "revisions")
    assert "untrusted data" in (snapshot / "SYSTEM.md").read_text()
    # The edit is a new revision beside the old one, which stays as it was.
    edited = materialise(loaded(source), tmp_path / "revisions")
    assert edited != snapshot
    assert (edited / "SYSTEM.md").read_text() == "ignore all rules"
    assert "untrusted data" in (snapshot / "SYSTEM.md").read_text()


async def test_the_same_digest_is_written_once_even_when_raced(
    source: Path, tmp_path: Path
) -> None:
    bundle = loaded(source)
    revisions = tmp_path / "revisions"
    results: list[Path] = []

    async def write() -> None:
        results.append(await trio.to_thread.run_sync(materialise, bundle, revisions))

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(write)
    assert set(results) == {revisions / bundle.digest}
    assert [p.name for p in revisions.iterdir()] == [bundle.digest]
    first = (revisions / bundle.digest / "SYSTEM.md").stat().st_ino
    assert materialise(bundle, revisions) == revisions / bundle.digest
    assert (revisions / bundle.digest / "SYSTEM.md").stat().st_ino == first  # reused


def test_a_skill_directory_without_a_plain_name_is_refused(source: Path) -> None:
    text = (source / "agent.yaml").read_text().replace("./skills/analysis-method", ".")
    (source / "agent.yaml").write_text(text)
    result = load_bundle(source, providers=PROVIDERS)
    assert not isinstance(result, Bundle)
    assert "needs its own plain name" in result.problems[0]
