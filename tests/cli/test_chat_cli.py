"""`zeroclaw chat` never fails silently, says when it runs the agent in-process and why, and
an interactive session's history survives the terminal closing (SIGHUP)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import tomli_w

from tests.cli.helpers import run_cli
from tests.conftest import REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.policy import abi_version

DaemonFactory = Callable[..., Daemon]
UNSET = "ZC_TEST_UNSET_KEY"
# The in-process agent runs under the daemon's agent's ruleset where Landlock exists.
HOW = "under Landlock" if abi_version() >= 1 else "without a sandbox"


def nokey_config(root: Path) -> dict[str, Any]:
    """alpha's provider needs a key variable nobody set: it cannot be built."""
    doc = make_config(root, {"alpha": agent_entry()})
    doc["providers"]["openai"] = {"main": {"api_key_env": UNSET, "model": "m"}}
    doc["agents"]["alpha"]["model_provider"] = "openai.main"
    return doc


def write(root: Path, doc: dict[str, Any]) -> Path:
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def test_in_process_a_provider_that_cannot_be_built_is_an_error(tmp_path: Path) -> None:
    config = write(tmp_path, nokey_config(tmp_path))
    env = {UNSET: ""}
    plain = run_cli("--config", config, "-a", "alpha", "chat", "-m", "hi", env=env)
    assert plain.returncode == 1
    assert f"environment variable {UNSET} is not set" in plain.stderr, plain.stderr
    assert "zeroclaw: error: agent alpha cannot run" in plain.stderr
    as_json = run_cli("--config", config, "-a", "alpha", "chat", "-m", "hi", "--json", env=env)
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "provider_unavailable" and UNSET in error["message"]


def test_through_the_daemon_a_provider_that_cannot_be_built_is_an_error(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(nokey_config(root), faults=False).start()
    daemon.wait_for(lambda s: s["agents"][0]["state"] == "fatal")
    plain = daemon.cli("--agent", "alpha", "chat", "-m", "hi")
    assert plain.returncode == 1
    assert "unavailable" in plain.stderr and f"{UNSET} is not set" in plain.stderr, plain.stderr
    assert "in-process" not in plain.stderr
    as_json = daemon.cli("chat", "-m", "hi", "--agent", "alpha", "--json")
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "unavailable" and f"{UNSET} is not set" in error["message"]


def test_in_process_chat_says_so_with_the_store_and_why(tmp_path: Path) -> None:
    config = write(tmp_path, make_config(tmp_path, {"alpha": agent_entry()}))
    line = (
        f"no daemon answers on {tmp_path / 'run'}; running alpha in-process {HOW} "
        f"with the store at {tmp_path / 'state' / 'memory'} (peers and sub-agents unavailable)"
    )
    plain = run_cli("--config", config, "-a", "alpha", "chat", "-m", "remember: tea at four")
    assert plain.returncode == 0, plain.stderr
    assert plain.stderr.count(line) == 1, plain.stderr  # once, though it opens the store too
    as_json = run_cli("--config", config, "-a", "alpha", "chat", "-m", "hello", "--json")
    data = json.loads(as_json.stdout)
    assert "ok" not in data and data["reply"]  # the turn's shape: `ok` only on a failure
    assert data["fallback"]["mode"] == "in_process" and data["fallback"]["message"] == line
    assert line in as_json.stderr


def test_through_the_daemon_chat_reads_the_file_lightly_and_names_agents_as_before(
    root: Path, daemons: DaemonFactory
) -> None:
    """ADR 0035: the daemon runs the config it validated, so a file edited into an invalid
    one since does not stop a chat through it; an alias the file does not enable still gets
    the full config's answer (the enabled agents, exit 2)."""
    doc = make_config(root, {"alpha": agent_entry(), "beta": agent_entry(enabled=False)})
    daemon = daemons(doc, faults=False).start()
    unknown = daemon.cli("--agent", "beta", "chat", "-m", "hi")
    assert unknown.returncode == 2
    assert "no enabled agent 'beta'; agents: alpha" in unknown.stderr, unknown.stderr
    daemon.config_path.write_text(daemon.config_path.read_text() + "\nnot_a_setting = 1\n")
    answered = daemon.cli("--agent", "alpha", "chat", "-m", "hi", "--json")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["reply"]
    assert "in-process" not in answered.stderr
    invalid = daemon.cli("--agent", "beta", "chat", "-m", "hi")
    assert invalid.returncode == 2 and "not_a_setting" in invalid.stderr, invalid.stderr


def test_interactive_history_is_saved_when_the_terminal_hangs_up(tmp_path: Path) -> None:
    config = write(tmp_path, make_config(tmp_path, {"alpha": agent_entry()}))
    history = tmp_path / "xdg" / "zeroclaw" / "chat_history"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "zeroclaw", "--config", str(config), "-a", "alpha", "chat"],
        cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO), "XDG_STATE_HOME": str(tmp_path / "xdg")},
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect_exact("alpha> ")
        child.sendline("remember: the hangup line")
        child.expect_exact("alpha> ")  # the turn ran; the line is in readline's history
        assert not history.exists()
        child.kill(signal.SIGHUP)
        child.expect(pexpect.EOF)
        child.close()
        assert child.signalstatus is None and child.exitstatus == 128 + signal.SIGHUP
        assert "remember: the hangup line" in history.read_text()
        assert history.stat().st_mode & 0o777 == 0o600
    finally:
        child.close(force=True)
