"""The cache's verdict as a pure function, and the file itself: atomic, locked, repaired."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.discovery.helpers import Project
from zeroclaw._version import __version__
from zeroclaw.config import load_config
from zeroclaw.discovery import (
    SCHEMA_VERSION,
    CacheFile,
    CacheLocked,
    DiscoveryCache,
    Inputs,
    Outcome,
    Summary,
    discover,
    scan_context,
    verdict,
)
from zeroclaw.discovery import Snapshot as Snap

EMPTY = Snap(
    generated_at=0.0,
    workspace="/p",
    sources=(),
    entries=(),
    summary=Summary(0, 0, 0, 0, 0),
)
INPUTS = Inputs("c", "r", {"/p/adapters": (1, 2, 3)})


BASE = CacheFile(
    schema_version=SCHEMA_VERSION,
    program_version=__version__,
    config_hash="c",
    registry_hash="r",
    sources={"/p/adapters": (1, 2, 3)},
    written_at=100.0,
    snapshot=EMPTY,
)


def cached(**changes: Any) -> CacheFile:
    return msgspec.structs.replace(BASE, **changes)


def test_the_verdict_names_the_first_thing_that_changed() -> None:
    assert verdict(None, INPUTS, 100, 60) == "missing"
    assert verdict(cached(), INPUTS, 150, 60) == "fresh"
    assert verdict(cached(schema_version=SCHEMA_VERSION + 1), INPUTS, 100, 60) == "incompatible"
    assert verdict(cached(program_version="0.0.0"), INPUTS, 100, 60) == "program_changed"
    assert verdict(cached(config_hash="x"), INPUTS, 100, 60) == "config_changed"
    assert verdict(cached(registry_hash="x"), INPUTS, 100, 60) == "registry_changed"
    assert verdict(cached(sources={}), INPUTS, 100, 60) == "sources_changed"
    assert verdict(cached(), INPUTS, 161, 60) == "health_expired"


def run(project: Project, **kwargs: Any) -> Outcome:
    config = load_config(project.write_config())
    ctx = scan_context(config, project.config_path, project.env())

    async def main() -> Outcome:
        state = project.base / "state"
        return await discover(ctx, project.config_path.read_bytes(), state, **kwargs)

    return trio.run(main)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path)
    project.program("codex")
    project.file(
        "adapters/a.yaml", "id: a\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n"
    )
    return project


def cache_path(project: Project) -> Path:
    return project.base / "state" / "discovery-cache.json"


def test_a_scan_writes_the_cache_and_the_next_run_uses_it(project: Project) -> None:
    first = run(project)
    assert (first.from_cache, first.cache_note) == (False, "written")
    assert oct(cache_path(project).stat().st_mode & 0o777) == "0o600"
    second = run(project)
    assert second.from_cache and second.verdict == "fresh"


def test_a_changed_manifest_invalidates_the_cache(project: Project) -> None:
    run(project)
    project.file(
        "adapters/b.yaml", "id: b\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n"
    )
    again = run(project)
    assert not again.from_cache and again.verdict == "sources_changed"
    assert again.snapshot.find("cli_adapter:b")


def test_a_changed_config_invalidates_the_cache(project: Project) -> None:
    run(project)
    project.discovery["commands"] = ["codex"]
    assert run(project).verdict == "config_changed"


def test_a_corrupt_cache_is_moved_aside_and_rebuilt(project: Project) -> None:
    run(project)
    cache_path(project).write_text('{"schema_version": 1, "snapshot": tru')
    outcome = run(project)
    assert outcome.verdict.startswith("corrupt")
    assert not outcome.from_cache and outcome.cache_note == "written"
    assert list(cache_path(project).parent.glob("discovery-cache.json.bad-*"))
    assert json.loads(cache_path(project).read_text())["schema_version"] == SCHEMA_VERSION


def test_an_incompatible_cache_is_never_used_to_register(project: Project) -> None:
    run(project)
    document = json.loads(cache_path(project).read_text())
    document["schema_version"] = SCHEMA_VERSION + 1
    document["snapshot"]["entries"] = []  # if it were used, nothing would be found
    cache_path(project).write_text(json.dumps(document))
    outcome = run(project)
    assert outcome.verdict == "incompatible" and not outcome.from_cache
    assert outcome.snapshot.find("cli_adapter:a")


def test_a_second_writer_gets_cache_locked_and_a_dry_run_still_works(project: Project) -> None:
    lock = DiscoveryCache(project.base / "state").lock()
    lock.acquire()
    try:
        with pytest.raises(CacheLocked) as refused:
            run(project, refresh=True, must_write=True)
        assert f"pid {os.getpid()}" in str(refused.value)
        dry = run(project, refresh=True, dry_run=True)
        assert dry.cache_note == "not written (dry run)"
        implicit = run(project)
        assert implicit.cache_note == f"not written (locked by pid {os.getpid()})"
    finally:
        lock.release()
    assert not cache_path(project).exists()


def test_partial_and_unprobed_scans_never_replace_the_cache(project: Project) -> None:
    assert run(project, sources=["adapters"]).cache_note.startswith("not written")
    assert not cache_path(project).exists()


def test_the_cache_holds_no_secret(project: Project) -> None:
    project.file(
        "adapters/s.yaml",
        "id: s\ntransport: http\nendpoint: https://h.test\ntoken: hunter2-SECRET\n",
    )
    run(project)
    assert "hunter2-SECRET" not in cache_path(project).read_text()
    decoded = msgspec.json.decode(cache_path(project).read_bytes(), type=CacheFile)
    assert decoded.snapshot.find("http_adapter:s")


def test_a_cache_that_holds_a_secret_is_never_used_and_is_replaced(project: Project) -> None:
    """A cache an older version wrote, with a secret in an argument: not shown, rescanned."""
    project.file(
        "adapters/leaky.yaml",
        "id: leaky\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n"
        'args: ["--api-key=SECRETold1cache"]\n',
    )
    project.program("codex")
    first = run(project)
    assert not first.from_cache
    path = cache_path(project)
    text = path.read_text()
    assert "SECRETold1cache" not in text
    path.write_text(text.replace("--api-key=<redacted>", "--api-key=SECRETold1cache"))
    again = run(project)
    assert not again.from_cache and again.verdict == "incompatible"
    assert "SECRETold1cache" not in path.read_text()
