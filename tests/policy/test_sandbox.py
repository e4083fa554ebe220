"""Landlock in real agent processes: the kernel refuses what the tool layer never saw."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.bus.test_router import plan, result_of
from tests.conftest import REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.policy import abi_version, cap_last_cap, drop_capabilities

DaemonFactory = Callable[..., Daemon]
needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")


def workspace(base: Path, alias: str) -> Path:
    return base / "state" / "agents" / alias / "workspace"


@needs_landlock
def test_agent_cannot_open_another_workspace(root: Path, daemons: DaemonFactory) -> None:
    secret = workspace(root, "victim") / "secret.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text("victim's")
    # For a /proc/<pid>/cwd route. Without capabilities, as agents are (ADR 0043): else
    # reaching a process that holds more than they do is refused whatever the sandbox.
    squatter = subprocess.Popen(
        ["sleep", "60"],
        cwd=secret.parent,
        preexec_fn=lambda: drop_capabilities(range(cap_last_cap() + 1)),
    )
    targets = [str(secret), f"/proc/self/root{secret}", f"/proc/{squatter.pid}/cwd/secret.txt"]
    try:
        for alias in ("snoop", "open"):
            plan(root, alias, do="snoop", targets=targets)
        doc = make_config(
            root,
            {
                "victim": agent_entry(),
                "snoop": agent_entry(),
                "open": agent_entry(risk_profile="bare"),
            },
        )
        doc["risk_profiles"]["bare"] = {"level": "supervised", "sandbox": "none"}
        daemons(doc).start()
        confined = result_of(root, "snoop")
        assert confined == {t: "denied" for t in targets}
        assert (workspace(root, "snoop") / "own.txt").exists()
        # The same code without the file sandbox reads them directly: the kernel is what
        # said no. Another process's /proc stays closed to it: `sandbox = "none"` keeps the
        # process scopes (ADR 0043), and a Landlock domain may not reach a process outside.
        opened = {t: "read" for t in targets}
        opened[targets[2]] = "denied"
        assert result_of(root, "open") == opened
    finally:
        squatter.kill()
        squatter.wait()


@needs_landlock
def test_the_kernel_keeps_the_daemons_files_out_of_a_granted_tree(
    root: Path, daemons: DaemonFactory, tmp_path: Path
) -> None:
    """Finding 8, in the kernel: the daemon's files may lie under a path Landlock grants
    read-only (/etc, /opt, the Python path). Here the Python path includes the directory
    holding the config file, state and runtime dirs; the agent reads around them only.
    Its workspace really lies elsewhere (a symlink): one inside a sys.path entry, the
    daemon's code, is refused at start (ADR 0044)."""
    (workspace(root, "snoop")).parent.mkdir(parents=True)
    workspace(root, "snoop").symlink_to(tmp_path)
    (root / "readable.txt").write_text("not the daemon's")
    targets = [
        str(root / "zeroclaw.toml"),
        str(root / "state" / "memory" / "data.mdb"),
        str(root / "run" / "zeroclaw.lock"),
        str(root / "readable.txt"),
    ]
    plan(root, "snoop", do="snoop", targets=targets)
    doc = make_config(root, {"snoop": agent_entry(risk_profile="wide")})
    doc["risk_profiles"]["wide"] = {"level": "full", "forbidden_paths": []}
    daemons(doc).start(PYTHONPATH=f"{REPO}:{root}")  # the agents' sys.path holds `root`
    assert result_of(root, "snoop") == {
        **{t: "denied" for t in targets[:3]},
        targets[3]: "read",  # `root` is granted, entry by entry around the daemon's files
    }
