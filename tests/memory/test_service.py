"""Memory through a real daemon: agents over the router, operators over the CLI."""

from __future__ import annotations

import json
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bus.test_router import plan, result_of
from tests.conftest import PATIENCE
from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]


def memory_config(root: Path, **daemon: Any) -> dict[str, Any]:
    doc = make_config(
        root, {"writer": agent_entry(), "beta": agent_entry(), "gamma": agent_entry()}
    )
    doc["agents"]["gamma"]["memory"] = {"read_memory_from": ["writer"]}
    doc["daemon"].update(daemon)
    return doc


def exported(daemon: Daemon, agent: str) -> list[dict[str, Any]]:
    result = daemon.cli("memory", "export", "--agent", agent)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_a_body_naming_another_namespace_only_touches_the_callers(
    root: Path, daemons: DaemonFactory
) -> None:
    plan(root, "writer", do="memwrite", count=5, writers=2, claim="beta")
    daemon = daemons(memory_config(root)).start()
    assert result_of(root, "writer")["errors"] == []
    mine = exported(daemon, "writer")
    assert len(mine) == 10 and {r["agent"] for r in mine} == {"writer"}
    assert exported(daemon, "beta") == []


def test_tiny_map_grows_without_errors_reaching_the_agent(
    root: Path, daemons: DaemonFactory
) -> None:
    plan(root, "writer", do="memwrite", count=40, writers=8, content="y" * 1000)
    daemon = daemons(memory_config(root, memory_map_size=64 * 1024)).start()
    assert result_of(root, "writer")["errors"] == []
    stats = json.loads(daemon.cli("memory", "stats", "-a", "writer", "--json").stdout)
    assert stats["namespaces"]["writer"]["records"] == 320
    assert stats["map_growths"] > 0
    assert stats["commits"] < stats["committed_ops"]  # concurrent writers shared commits


def test_every_acknowledged_store_survives_sigkill(root: Path, daemons: DaemonFactory) -> None:
    plan(root, "writer", do="memwrite", writers=8)
    doc = memory_config(root)
    daemon = daemons(doc).start()
    acked_log = root / "state" / "agents" / "writer" / "workspace" / "acked.log"
    deadline = time.monotonic() + PATIENCE
    while not acked_log.exists() or acked_log.stat().st_size < 2000:  # some stores acked
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(random.uniform(0.0, 0.5))  # a random moment mid-stream
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    acked = {line for line in acked_log.read_text().splitlines() if line}
    assert len(acked) > 50
    (root / "state" / "agents" / "writer" / "workspace" / "plan.json").unlink()
    again = daemons(doc).start()  # the environment opens cleanly after the kill
    stored = {r["key"] for r in exported(again, "writer")}
    missing = acked - stored
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"


def test_cli_with_and_without_daemon(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(memory_config(root))
    offline = daemon.cli("memory", "store", "-a", "writer", "launch", "the launch code is fish")
    assert offline.returncode == 0, offline.stderr
    assert "no daemon answers on" in offline.stderr and "opened the store at" in offline.stderr
    daemon.start()
    online = daemon.cli("memory", "recall", "-a", "writer", "launch", "--json")
    assert online.returncode == 0 and "no daemon" not in online.stderr
    assert [h["key"] for h in json.loads(online.stdout)["hits"]] == ["launch"]
    assert daemon.cli("memory", "store", "-a", "writer", "lunch", "at noon").returncode == 0
    assert daemon.cli("memory", "get", "-a", "writer", "lunch").returncode == 0
    assert daemon.cli("memory", "get", "-a", "beta", "lunch").returncode == 1
    assert daemon.cli("memory", "forget", "-a", "beta", "lunch").returncode == 1
    assert daemon.cli("memory", "purge", "-a", "writer").returncode == 2  # needs --yes
    assert daemon.cli("memory", "store", "-a", "zeta", "k", "v").returncode == 2
    daemon.stop()
    daemon.proc = None
    listing = daemon.cli("memory", "list", "-a", "writer", "--json")
    assert listing.returncode == 0
    assert {r["key"] for r in json.loads(listing.stdout)["records"]} == {"launch", "lunch"}
    purge = daemon.cli("memory", "purge", "-a", "writer", "--yes", "--json")
    assert purge.returncode == 0 and json.loads(purge.stdout)["purged"] == 2


def test_cli_errors_without_daemon_are_clean(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(memory_config(root))  # never started
    unknown = daemon.cli("memory", "get", "-a", "zeta", "k")
    assert unknown.returncode == 2 and "unknown_agent" in unknown.stderr
    bad = daemon.cli("memory", "list", "-a", "writer", "--limit", "0")
    assert bad.returncode == 2 and "--limit" in bad.stderr  # refused by the CLI itself
    for result in (unknown, bad):
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr
