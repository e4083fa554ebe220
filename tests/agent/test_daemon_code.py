"""Issue 24, found 7 (ADR 0044), against a real daemon: a `full` agent's `file_write` of a
`.pth` into the venv's site-packages, or of a file into the package's directory (the source
checkout of this editable install), is refused by the tool; the operator's next command,
the installed console script, runs nothing planted. The same writes as direct syscalls
from inside an agent process are the conformance table's daemon_code kernel cells."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent.test_chat_daemon import chat
from tests.agent.test_chat_inprocess import codes
from tests.conftest import REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.policy import abi_version

DaemonFactory = Callable[..., Daemon]
needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])


@needs_landlock
def test_a_full_agent_plants_nothing_the_operators_next_command_runs(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(root, {"full": agent_entry(risk_profile="wide")})
    doc["risk_profiles"]["wide"] = {"level": "full", "sandbox": "auto"}
    daemon = daemons(doc, faults=False).start()
    marker = root / "the-planted-code-ran"
    name = f"zc-planted-{root.name}"
    pth = SITE_PACKAGES / f"{name}.pth"
    module = REPO / "zeroclaw" / f"{name}.py"
    try:
        line = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
        workspace = root / "state" / "agents" / "full" / "workspace"
        # ..-relative from the workspace: the same place, spelled another way
        relative = Path(*[".."] * (len(workspace.parts) - 1)) / pth.relative_to("/")
        replies = [chat(daemon, "full", f"write {t}: {line}") for t in (pth, module, relative)]
        # The operator's next commands, through `python -m` from the checkout and through
        # the console script the README installs (from elsewhere): nothing planted runs.
        status = daemon.cli("status")
        script = Path(sys.executable).parent / "zeroclaw"
        installed = subprocess.run(
            [str(script), "--config", str(daemon.config_path), "status"],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=60,
            check=False,
        )
        assert not marker.exists(), "a file the agent wrote ran as the operator"
        for reply in replies:
            assert codes(reply) == [("file_write", "forbidden_path")], reply
            assert "daemon's own code" in reply["reply"]
        assert not pth.exists() and not module.exists()
        assert status.returncode == 0, status.stderr
        assert installed.returncode == 0, installed.stderr
    finally:
        pth.unlink(missing_ok=True)
        module.unlink(missing_ok=True)


def test_python_m_from_the_directory_holding_the_workspaces_is_refused(
    root: Path, daemons: DaemonFactory
) -> None:
    """`python -m zeroclaw` puts its cwd on sys.path, so the cwd is the daemon's code: a
    workspace inside it could never be written. The daemon refuses to start (a config
    error, exit 2) and the in-process chat refuses before it runs anything; `-P` keeps the
    cwd off sys.path and both work."""
    daemon = daemons(make_config(root, {"a": agent_entry()}), faults=False)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "zeroclaw", "--config", str(daemon.config_path)]
    started = subprocess.run(
        [*argv, "daemon"], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 2, started.stderr
    assert "inside the daemon's own code" in started.stderr and "-P" in started.stderr
    chatted = subprocess.run(
        [*argv, "--agent", "a", "chat", "-m", "hi"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert chatted.returncode == 2, chatted.stderr
    assert "inside this command's own code" in chatted.stderr
    assert not (root / "state" / "agents" / "a" / "workspace").exists()
    safe = subprocess.run(
        [sys.executable, "-P", *argv[1:], "--agent", "a", "chat", "-m", "hi", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert safe.returncode == 0, safe.stderr
