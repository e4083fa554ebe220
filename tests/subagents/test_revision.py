"""Revision snapshots: exactly what was digested, read-only, written whole or reused."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from zeroclaw.subagents import Bundle, SnapshotDamaged, load_bundle, load_snapshot, materialise
from zeroclaw.subagents._revision import remove_leftovers

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


def _writable(top: Path) -> None:
    for here in [top, *top.rglob("*")]:
        if not here.is_symlink():
            here.chmod(0o700 if here.is_dir() else 0o600)


def test_a_snapshot_with_skills_reads_back_as_its_digest(source: Path, tmp_path: Path) -> None:
    bundle = loaded(source)
    assert bundle.manifest.skills == ("./skills/analysis-method",)
    again = load_snapshot(materialise(bundle, tmp_path / "revisions"))
    assert again == bundle


def _emptied(snapshot: Path) -> None:
    _writable(snapshot)
    for child in list(snapshot.iterdir()):
        shutil.rmtree(child) if child.is_dir() else child.unlink()


def _edited(snapshot: Path) -> None:
    _writable(snapshot)
    (snapshot / "SYSTEM.md").write_text("FLOOD-RUNTIME 5 10\n")


def _skill_lost(snapshot: Path) -> None:
    _writable(snapshot)
    shutil.rmtree(snapshot / "skills")


def _fifo(snapshot: Path) -> None:
    _writable(snapshot)
    (snapshot / "SYSTEM.md").unlink()
    os.mkfifo(snapshot / "SYSTEM.md")


def _a_file(snapshot: Path) -> None:
    _writable(snapshot)
    shutil.rmtree(snapshot)
    snapshot.write_text("not a directory")


@pytest.mark.parametrize("damage", [_emptied, _edited, _skill_lost, _fifo, _a_file])
def test_a_damaged_snapshot_is_removed_and_written_again_from_the_bundle(
    source: Path, tmp_path: Path, damage: Any
) -> None:
    bundle = loaded(source)
    revisions = tmp_path / "revisions"
    damage(materialise(bundle, revisions))
    with pytest.raises(SnapshotDamaged):
        load_snapshot(revisions / bundle.digest)
    (source / "SYSTEM.md").write_text("edited since")  # the bundle in memory is written
    snapshot = materialise(bundle, revisions)
    assert load_snapshot(snapshot) == bundle
    assert stat.S_IMODE(os.stat(snapshot / "SYSTEM.md").st_mode) == 0o444
    assert [p.name for p in revisions.iterdir()] == [bundle.digest]  # nothing left aside


def test_another_revision_under_this_digest_is_replaced_and_the_other_kept(
    source: Path, tmp_path: Path
) -> None:
    revisions = tmp_path / "revisions"
    bundle = loaded(source)
    (source / "SYSTEM.md").write_text("another revision")
    other = materialise(loaded(source), revisions)
    # A copy of another revision renamed to this digest, and then a symlink to it.
    shutil.copytree(other, revisions / bundle.digest)
    assert materialise(bundle, revisions) == revisions / bundle.digest
    assert load_snapshot(revisions / bundle.digest) == bundle
    _writable(revisions / bundle.digest)
    shutil.rmtree(revisions / bundle.digest)
    (revisions / bundle.digest).symlink_to(other)
    snapshot = materialise(bundle, revisions)
    assert not snapshot.is_symlink() and load_snapshot(snapshot) == bundle
    assert (other / "SYSTEM.md").read_text() == "another revision"  # never touched


def test_leftovers_of_a_killed_writer_are_removed_and_nothing_else(
    source: Path, tmp_path: Path
) -> None:
    revisions = tmp_path / "revisions"
    assert remove_leftovers(revisions) == []  # no directory yet: nothing to do
    bundle = loaded(source)
    snapshot = materialise(bundle, revisions)
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o755)
    (outside / "keep.txt").write_text("keep")
    # Half-written snapshots as a killed materialise leaves them (read-only, or not yet).
    half = revisions / f".{bundle.digest[:12]}-k1ll3d"
    shutil.copytree(snapshot, half)
    (half / "escape").symlink_to(outside)
    os.chmod(half, 0o555)
    aside = revisions / f".{bundle.digest[:12]}-damaged-x"
    (aside / "old").mkdir(parents=True)
    (revisions / "operator-notes.txt").write_text("not ours to remove")
    removed = remove_leftovers(revisions)
    assert sorted(removed) == sorted([half, aside])
    assert sorted(p.name for p in revisions.iterdir()) == [bundle.digest, "operator-notes.txt"]
    assert load_snapshot(snapshot) == bundle
    assert (outside / "keep.txt").read_text() == "keep"
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755
