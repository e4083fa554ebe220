"""A hostile program on PATH, probed by a real `zeroclaw discover scan`: it cannot write or
read outside its sandbox, what it starts (a grandchild in a session of its own) ends with
the probe, and none of the secrets it prints or the manifests hold reaches the cache or
any `--json` output (ADR 0047)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE, REPO
from tests.discovery.helpers import Project
from tests.discovery.planted import Planted, leaked
from tests.supervisor.harness import wait_gone
from zeroclaw.policy import abi_version

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="needs Landlock")


def cli(planted: Planted, *args: str) -> subprocess.CompletedProcess[str]:
    project = planted.project
    return subprocess.run(
        [sys.executable, "-m", "zeroclaw", "--config", str(project.config_path), *args],
        capture_output=True,
        text=True,
        env={**project.env(), "PYTHONPATH": str(REPO)},
        cwd=REPO,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Planted, dict[str, Any]]]:
    project = Project(tmp_path_factory.mktemp("hostile"))
    project.discovery.update(scan_user_dirs=False)
    project.write_config()
    planted = Planted(project)
    result = cli(planted, "discover", "scan", "--json")
    try:
        assert result.returncode == 0, result.stderr
        yield planted, json.loads(result.stdout)
    finally:
        for pid in planted.leftovers():  # only ever without the fix: never leave them
            os.kill(pid, 9)


def _gemini(out: dict[str, Any]) -> dict[str, Any]:
    [item] = [i for i in out["items"] if i["key"] == "cli_adapter:gemini"]
    return item


def test_the_probe_ran_and_says_it_could_fork_but_not_write_or_read(
    scanned: tuple[Planted, dict[str, Any]],
) -> None:
    planted, out = scanned
    health = _gemini(out)["health"]
    # forked.wrote.read.read_etc: the grandchild started; every file access was denied
    assert health["version"] == "1.0.0.0", health
    assert health["status"] == "available"
    assert not planted.outside.exists()


def test_what_the_probe_started_in_its_own_session_ends_with_it(
    scanned: tuple[Planted, dict[str, Any]],
) -> None:
    planted, _ = scanned
    left = planted.leftovers()
    assert wait_gone(left, timeout=PATIENCE) == [], f"the probe's grandchild outlived it: {left}"


def test_no_secret_reaches_the_cache_or_scan_list_or_explain_json(
    scanned: tuple[Planted, dict[str, Any]],
) -> None:
    planted, out = scanned
    state = Path(planted.project.base / "state")
    outputs = {
        "scan --json": json.dumps(out),
        "cache file": (state / "discovery-cache.json").read_text(),
        "list --json": cli(planted, "discover", "list", "--json").stdout,
        "explain leaky --json": cli(planted, "discover", "explain", "leaky", "--json").stdout,
        "explain remote --json": cli(planted, "discover", "explain", "remote", "--json").stdout,
    }
    assert "cli_adapter:leaky" in outputs["list --json"]
    # redaction is idempotent: the cache the scan wrote is the one list reads back
    assert json.loads(outputs["list --json"])["cache"]["used"] is True
    for surface, text in outputs.items():
        assert not leaked(text), f"{surface} holds {leaked(text)}"
        assert "\x1b" not in text and "\\u001b" not in text, surface


def test_an_adapter_whose_arguments_held_a_secret_is_refused_with_why(
    scanned: tuple[Planted, dict[str, Any]],
) -> None:
    _, out = scanned
    [leaky] = [i for i in out["items"] if i["key"] == "cli_adapter:leaky"]
    assert leaky["decision"]["action"] == "rejected"
    assert leaky["decision"]["reason"] == "policy_denied"
    assert any(d["kind"] == "secret_redacted" for d in leaky["diagnostics"])
    assert "<redacted>" in leaky["args"]
