"""The attack pass on what outlives an MCP server (issue 26), through a real daemon: a stdio
server that ignores SIGTERM and stdin's end, with a child in its own session and a
double-forked grandchild re-parented away from it (tests/mcp/stubborn_server.py). Killing
the agent with SIGKILL, the daemon with SIGKILL, or restarting the agent leaves nothing of
them running."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE
from tests.supervisor.harness import Daemon, agent_entry, make_config, process_alive, wait_gone

STUBBORN = Path(__file__).with_name("stubborn_server.py")


class Stubborn:
    """The daemon, its agent's workspace, and every pid the test saw (killed at the end, if
    a test failed)."""

    def __init__(self, daemon: Daemon, ws: Path) -> None:
        self.daemon = daemon
        self.ws = ws
        self.seen: list[int] = []

    def server_and_descendants(self) -> list[int]:
        """The running server's pid and the two it left outside its session and group."""
        message = 'mcp s echo {"text": "up"}'
        result = self.daemon.cli("-a", "alpha", "chat", "-m", message, "--json")
        assert result.returncode == 0, result.stderr + self.daemon.log()
        assert json.loads(result.stdout)["reply"] == "up", result.stdout
        server = self.live_pid()
        pids = [int(p) for p in (self.ws / f"stubborn-{server}.pids").read_text().split()]
        found = [server, *pids]
        assert all(process_alive(pid) for pid in found), found
        self.seen += found
        return found

    def live_pid(self) -> int:
        pids: list[int] = []

        def ready(_: dict[str, Any]) -> bool:
            listing = json.loads(self.daemon.cli("mcp", "list", "--json").stdout)
            pids[:] = [
                live["pid"]
                for server in listing["servers"]
                for live in server["live"]
                if live["status"] == "ready" and live["pid"]
            ]
            return bool(pids)

        self.daemon.wait_for(ready)
        return pids[-1]


@pytest.fixture
def stubborn(root: Path, daemons: Any) -> Iterator[Stubborn]:
    ws = root / "ws" / "alpha"
    ws.mkdir(parents=True)
    shutil.copy(STUBBORN, ws / "stubborn_server.py")
    doc = make_config(root, {"alpha": agent_entry(workspace={"path": str(ws)}, mcp=["s"])})
    doc["mcp_servers"] = {
        "s": {"command": sys.executable, "args": ["stubborn_server.py"], "tools": ["echo"]}
    }
    world = Stubborn(daemons(doc, faults=False).start(), ws)
    yield world
    for pid in world.seen:  # only if a test failed
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_attack_kill_9_of_the_agent_leaves_no_part_of_its_mcp_server(
    stubborn: Stubborn,
) -> None:
    found = stubborn.server_and_descendants()
    agent = stubborn.daemon.agent("alpha")["pid"]
    os.kill(agent, signal.SIGKILL)
    assert wait_gone([agent, *found], timeout=PATIENCE) == []


def test_attack_kill_9_of_the_daemon_leaves_no_part_of_an_mcp_server(
    stubborn: Stubborn,
) -> None:
    found = stubborn.server_and_descendants()
    daemon = stubborn.daemon
    agent = daemon.agent("alpha")["pid"]
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    assert wait_gone([agent, *found], timeout=PATIENCE) == []


def test_attack_an_agent_restart_stops_a_server_that_ignores_sigterm_and_its_leftovers(
    stubborn: Stubborn,
) -> None:
    found = stubborn.server_and_descendants()
    restarted = stubborn.daemon.cli("agents", "restart", "alpha")
    assert restarted.returncode == 0, restarted.stderr
    assert wait_gone(found, timeout=PATIENCE) == []
