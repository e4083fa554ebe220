"""`zeroclaw sessions list|show` with no daemon: straight on the store, as `memory` does,
with the same exit codes as through the daemon."""

from __future__ import annotations

import json
from pathlib import Path

import tomli_w

from tests.cli.helpers import run_cli
from tests.supervisor.harness import agent_entry, make_config


def test_without_a_daemon_sessions_read_the_store(tmp_path: Path) -> None:
    config = tmp_path / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(make_config(tmp_path, {"alpha": agent_entry()})))
    said = run_cli("--config", config, "-a", "alpha", "chat", "-m", "said \x1b[2Jcleared")
    assert said.returncode == 0, said.stderr
    listed = run_cli("--config", config, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["fallback"]["mode"] == "store"
    [session] = data["sessions"]
    assert (session["agent"], session["kind"], session["session"]) == (
        "alpha",
        "operator",
        "default",
    )
    shown = run_cli("--config", config, "sessions", "show", "default", "-a", "alpha")
    assert shown.returncode == 0 and "said \\x1b[2Jcleared" in shown.stdout, shown.stderr
    assert "\x1b" not in shown.stdout
    missing = run_cli("--config", config, "sessions", "show", "nope", "-a", "alpha", "--json")
    assert missing.returncode == 2
    assert json.loads(missing.stdout)["error"]["code"] == "session_not_found"
    unknown = run_cli("--config", config, "sessions", "list", "-a", "zeta")
    assert unknown.returncode == 2 and "unknown_agent" in unknown.stderr
