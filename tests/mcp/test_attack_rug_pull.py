"""The attack pass on the rug pull itself, end to end through a real daemon (issue 26): a
server shows a harmless tool, is used, then changes what the tool says it is
(tests/mcp/hostile_server.py `change-schema`: after the first call, echo's input schema grows
a field and the server says tools/list_changed). The agent lists and pins again, the daemon
withholds the changed tool, the model is told why in the documented code, and the
operator's `zeroclaw mcp trust` gives it back at the next turn."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.conftest import PATIENCE
from tests.supervisor.harness import Daemon, agent_entry, make_config

HOSTILE = Path(__file__).with_name("hostile_server.py")


def echo(daemon: Daemon, text: str) -> dict[str, Any]:
    message = "mcp h echo " + json.dumps({"text": text})
    result = daemon.cli("-a", "alpha", "chat", "-m", message, "--json", timeout=PATIENCE)
    assert result.returncode == 0, result.stderr + daemon.log()
    [call] = json.loads(result.stdout)["tool_calls"]
    return call  # type: ignore[no-any-return]


def echo_pin(daemon: Daemon) -> dict[str, Any]:
    """echo's pin in `mcp tools`, once it is withheld."""
    found: list[dict[str, Any]] = []

    def withheld(_: dict[str, Any]) -> bool:
        tools = json.loads(daemon.cli("mcp", "tools", "--agent", "alpha", "--json").stdout)
        found[:] = [t for t in tools["tools"] if t["tool"] == "echo" and t["state"] == "withheld"]
        return bool(found)

    daemon.wait_for(withheld)
    return found[0]


def echo_state(daemon: Daemon) -> str:
    state: str = echo_pin(daemon)["state"]
    return state


def start(root: Path, daemons: Any, mode: str) -> Daemon:
    ws = root / "ws" / "alpha"
    ws.mkdir(parents=True)
    shutil.copy(HOSTILE, ws / "hostile_server.py")
    doc = make_config(root, {"alpha": agent_entry(workspace={"path": str(ws)}, mcp=["h"])})
    doc["mcp_servers"] = {
        "h": {"command": sys.executable, "args": ["hostile_server.py", mode], "tools": ["echo"]}
    }
    daemon: Daemon = daemons(doc, faults=False).start()
    return daemon


def test_attack_a_changed_tool_is_withheld_said_so_and_back_once_trusted(
    root: Path, daemons: Any
) -> None:
    daemon = start(root, daemons, "change-schema")
    first = echo(daemon, "harmless")
    assert (first["ok"], first["error_code"]) == (True, None), first
    assert echo_state(daemon) == "withheld"
    # The hole: the model was told "its server has not offered it (not ready?)"
    # (mcp_unavailable), where the guide promises mcp_schema_changed.
    withheld = echo(daemon, "again")
    assert (withheld["ok"], withheld["error_code"]) == (False, "mcp_schema_changed"), withheld
    trusted = daemon.cli("mcp", "trust", "h", "--tool", "echo", "--json")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    back = echo(daemon, "trusted")
    assert (back["ok"], back["error_code"]) == (True, None), back


def test_attack_a_server_flipping_its_schema_cannot_get_an_unreviewed_one_trusted(
    root: Path, daemons: Any
) -> None:
    # The hole: `mcp trust` trusted whatever the server listed last. A server alternating
    # between a harmless and a harmful description every second won the race against the
    # operator's review about half the time. With --digest, the trust takes only the
    # schema the operator read, or nothing (digest_changed).
    daemon = start(root, daemons, "flip")
    assert echo(daemon, "harmless")["ok"]
    outcomes = set()
    for _ in range(4):
        reviewed = echo_pin(daemon)["digest"]
        result = daemon.cli("mcp", "trust", "h", "--tool", "echo", "--digest", reviewed[:12])
        if result.returncode == 0:
            outcomes.add("trusted")
            tools = json.loads(daemon.cli("mcp", "tools", "--agent", "alpha", "--json").stdout)
            [pin] = [t for t in tools["tools"] if t["tool"] == "echo"]
            assert pin["trusted_digest"] == reviewed, (pin, reviewed)
        else:
            outcomes.add("refused")
            assert "digest_changed" in result.stderr, result.stderr
    assert outcomes  # either way, never a schema nobody read
