"""`--log-level` reaches the daemon and its agents (issue 14): at debug the router logs each
routing decision and the agents their tool decisions and Landlock rules; at the config's
info none of that is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.supervisor.harness import Daemon, agent_entry, make_config
from tests.supervisor.test_daemon import DaemonFactory


def config(root: Path) -> dict[str, Any]:
    doc = make_config(
        root,
        {"alpha": agent_entry(), "beta": agent_entry()},
        groups={"pair": {"channel": "cli", "agents": ["alpha", "beta"]}},
    )
    doc["daemon"]["log_level"] = "info"
    return doc


def entries(log: str) -> list[dict[str, Any]]:
    found = []
    for line in log.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue  # a CLI line, or a traceback
    return found


def probe_and_stop(daemon: Daemon) -> list[dict[str, Any]]:
    """One routed message alpha -> beta, then the daemon's whole log (it is stopped first,
    so every agent's lines are in)."""
    result = daemon.cli("route", "probe", "--from", "alpha", "--to", "beta", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    daemon.stop()
    found = entries(daemon.log_path.read_text())
    daemon.log_path.unlink()
    return found


def routing(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in found if e["logger"] == "zeroclaw.router" and e["level"] == "debug"]


def test_log_level_debug_overrides_the_config_for_daemon_and_agents(
    root: Path, daemons: DaemonFactory
) -> None:
    quiet = probe_and_stop(daemons(config(root)).start())
    assert not [e for e in quiet if e["level"] == "debug"], "the config says info"
    assert [e for e in quiet if "joined the bus" in e["msg"]]

    loud = probe_and_stop(daemons(config(root)).start(options=("--log-level", "debug")))
    [forwarded] = [e for e in routing(loud) if e.get("kind") == "probe"]
    assert (forwarded["from"], forwarded["to"], forwarded["outcome"]) == (
        "alpha",
        "beta",
        "forwarded",
    )
    # Each agent logged the rules it restricted itself with (by the agents' logger).
    rules = [e for e in loud if e["logger"] == "zeroclaw.landlock"]
    assert len(rules) == 2 and all(e["rules"] > 0 for e in rules)
    assert "all but execute" in rules[0]["msg"]  # its workspace: everything but exec


def test_log_level_after_the_daemon_command_does_the_same(
    root: Path, daemons: DaemonFactory
) -> None:
    loud = probe_and_stop(daemons(config(root)).start(daemon_options=("--log-level", "debug")))
    assert [e for e in routing(loud) if e.get("kind") == "probe"]


def test_under_journald_every_line_of_daemon_and_agents_carries_its_priority(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(config(root))
    daemon.log_path.touch()
    info = daemon.log_path.stat()  # the harness's stderr file stands in for the journal
    daemon.start(JOURNAL_STREAM=f"{info.st_dev}:{info.st_ino}")
    daemon.stop()
    lines = [line for line in daemon.log_path.read_text().splitlines() if line.startswith("<")]
    by_logger: dict[str, set[str]] = {}
    for line in lines:
        priority, _, rest = line[1:].partition(">")
        entry = json.loads(rest)
        assert priority == {"info": "6", "warning": "4", "error": "3"}[entry["level"]], line
        by_logger.setdefault(entry["logger"], set()).add(entry["msg"])
    # The agents wrote prefixed lines too, though only the daemon sees JOURNAL_STREAM.
    assert any("sandbox in force" in msg for msg in by_logger["zeroclaw.agent"])
    assert "zeroclaw daemon started" in by_logger["zeroclaw.daemon"]
    assert not [line for line in daemon.log_path.read_text().splitlines() if line[:1] == "{"]
