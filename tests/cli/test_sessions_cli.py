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


def test_a_compacted_session_shows_its_summary_and_the_range_it_covers(tmp_path: Path) -> None:
    """In-process chat (ADR 0059): the session outgrows alpha's history budget, alpha's
    offline provider summarises the older turns, `sessions show` prints the summary (escaped)
    with the turns it covers, and the `note:` turn is a record of category compacted."""
    config = tmp_path / "zeroclaw.toml"
    doc = make_config(tmp_path, {"alpha": agent_entry()})
    doc["agents"]["alpha"]["memory"] = {"history_budget_tokens": 64}
    config.write_text(tomli_w.dumps(doc))
    for text in ["note: the bell \x07 rings at noon", *(f"message {i} \x07" for i in range(6))]:
        said = run_cli("--config", config, "-a", "alpha", "chat", "-m", text, "--session", "s")
        assert said.returncode == 0, said.stderr
    shown = run_cli("--config", config, "sessions", "show", "s", "-a", "alpha", "--json")
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)["summary"]
    assert summary["first_seq"] == 0 and summary["turns"] == summary["through_seq"] + 1
    assert "\x07" in summary["summary"]  # as the turns said it
    text = run_cli("--config", config, "sessions", "show", "s", "-a", "alpha")
    assert f"summary of turns 0-{summary['through_seq']}" in text.stdout
    assert "\x07" not in text.stdout and "\\x07" in text.stdout
    facts = run_cli(
        "--config", config, "memory", "list", "-a", "alpha", "--category", "compacted", "--json"
    )
    assert [r["content"] for r in json.loads(facts.stdout)["records"]] == [
        "the bell \x07 rings at noon"
    ]
