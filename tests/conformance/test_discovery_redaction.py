"""The discovery-redaction cells (ADR 0047): one secret of every kind planted where
discovery finds it (manifest arguments, MCP URLs, an environment entry, a probe's output),
one real daemon that scans it at start, then every output surface read as an operator
would: the cache file's bytes, `discover scan|list|explain --json`, `events --json` and the
daemon's debug log."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance._matrix import Cell, Observed, cells_on
from tests.conformance._table import record
from tests.conftest import PATIENCE, REPO
from tests.discovery.helpers import Project
from tests.discovery.planted import Planted, leaked
from tests.discovery.test_discovery_daemon import follow_discovery
from tests.known_secrets import assert_no_secret_logged
from tests.supervisor import harness
from zeroclaw.policy import abi_version

CELLS = cells_on("discovery")


@pytest.fixture(scope="module")
def surfaces() -> Iterator[dict[str, str]]:
    root = harness.short_root()
    # The programs, the home and the hostile program's targets outside the project (a
    # program beside the config would be workspace-local, never probed); the manifests
    # beside the daemon's config, in root.
    outside = Path(tempfile.mkdtemp(prefix="zc-outside-"))
    project = Project(outside)
    project.root = root
    planted = Planted(project)
    doc = harness.make_config(root, {"alpha": harness.agent_entry()})
    doc["discovery"] = {"probe_model_ports": False, "scan_user_dirs": False}
    daemon = harness.Daemon(root, doc, faults=False)
    env = project.env()
    try:
        daemon.start(**env)
        follow_discovery(daemon, env, "key", "cli_adapter:gemini", kind="discovery.decided")

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            # the daemon's PATH and HOME: the same inputs, so the daemon's cache is used
            return subprocess.run(
                [*daemon.cli_argv(), *args],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO), **env},
                cwd=REPO,
                timeout=120,
                check=False,
            )

        def cli(*args: str) -> str:
            result = run(*args)
            assert result.returncode == 0, result.stderr
            return result.stdout

        # The daemon's own probe ran confined, and what it started is gone (before any
        # CLI probe runs).
        seen_left = planted.leftovers()
        assert harness.wait_gone(seen_left, timeout=PATIENCE) == [], seen_left
        cached = json.loads((root / "state" / "discovery-cache.json").read_text())
        [gemini] = [
            e["item"]
            for e in cached["snapshot"]["entries"]
            if e["item"]["kind"] == "cli_adapter" and e["item"]["id"] == "gemini"
        ]
        assert gemini["health"]["version"] == "1.0.0.0", json.dumps(gemini)
        assert not planted.outside.exists()
        seen = {
            "events": cli("events", "--json"),
            # the daemon's scan wrote the cache; read it before a CLI scan rewrites it
            "cache_file": (root / "state" / "discovery-cache.json").read_text(),
            "list_json": cli("discover", "list", "--json"),
            "explain_json": cli("discover", "explain", "leaky", "--json")
            + cli("discover", "explain", "remote", "--json")
            + cli("discover", "explain", "gemini", "--json"),
        }
        scan = run("discover", "scan", "--refresh", "--json")
        seen["scan_json"] = scan.stdout
        assert '"cli_adapter:leaky"' in seen["scan_json"], scan.stderr
        daemon.stop()
        seen["log"] = daemon.log_text()
        assert "discovery:" in seen["log"]
        yield seen
        assert_no_secret_logged(daemon.log_path)
    finally:
        daemon.stop()
        for pid in planted.leftovers():  # only ever without the fix: never leave them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        harness.remove_root(root)
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.skipif(abi_version() < 1, reason="the probe needs Landlock")
@pytest.mark.parametrize("cell", CELLS, ids=[c.case for c in CELLS])
def test_no_planted_secret_reaches_a_discovery_surface(
    cell: Cell, surfaces: dict[str, str]
) -> None:
    text = surfaces[cell.extra["surface"]]
    found = leaked(text, cell.action)  # type: ignore[arg-type]
    record(
        cell,
        Observed("allowed", "secret", json.dumps(found))
        if found
        else Observed("refused", "no_secret"),
    )
