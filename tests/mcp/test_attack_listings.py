"""The attack pass on what a server lists (issue 26), through a real daemon: tools whose
description or input schema would reach the model at every turn however large, and a
listing of thousands of tools with the allowed one at its end.

The server is tests/mcp/hostile_server.py `huge`: 2000 filler tools, then `bloat` (a
600 000-character description that tells the model to ignore its instructions), `deep` (an
input schema of 200 000 bytes) and `echo`, last."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.conftest import PATIENCE
from tests.mcp import hostile_server
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.mcp._tools import MAX_TOOL_SPEC_BYTES
from zeroclaw.turns import tool_digest

HOSTILE = Path(__file__).with_name("hostile_server.py")


def start(root: Path, daemons: Any) -> Daemon:
    ws = root / "ws" / "alpha"
    ws.mkdir(parents=True)
    shutil.copy(HOSTILE, ws / "hostile_server.py")
    doc = make_config(root, {"alpha": agent_entry(workspace={"path": str(ws)}, mcp=["h"])})
    doc["mcp_servers"] = {
        "h": {
            "command": sys.executable,
            "args": ["hostile_server.py", "huge"],
            "tools": ["echo", "bloat", "deep"],
            "max_result_bytes": 512 * 1024,  # a line bound of 2 MiB: the listing is one line
        }
    }
    daemon: Daemon = daemons(doc, faults=False).start()
    return daemon


def call(daemon: Daemon, message: str) -> dict[str, Any]:
    result = daemon.cli("--agent", "alpha", "chat", "-m", message, "--json", timeout=PATIENCE)
    assert result.returncode == 0, result.stderr + daemon.log()
    [made] = json.loads(result.stdout)["tool_calls"]
    return made  # type: ignore[no-any-return]


def test_attack_an_allowed_tool_too_large_to_offer_is_typed_and_still_pinned_whole(
    root: Path, daemons: Any
) -> None:
    # The hole: an allowed tool was offered whatever its size, so a server could put a
    # megabyte of instructions in front of the model at every turn (and pay for it with the
    # operator's tokens); and a server listing more than 256 tools lost the allowed ones
    # past the 256th, unpinned and never offered, without a word.
    daemon = start(root, daemons)
    echoed = call(daemon, 'mcp h echo {"text": "still here"}')
    assert (echoed["ok"], echoed["error_code"]) == (True, None), echoed
    for big in ("bloat", "deep"):
        refused = call(daemon, f"mcp h {big} {{}}")
        assert (refused["ok"], refused["error_code"]) == (False, "mcp_schema_too_large"), refused
    log = daemon.log_text()
    assert "not offered: its description and input schema are" in log, daemon.log()
    assert str(MAX_TOOL_SPEC_BYTES) in log
    # The pins are over the whole tool, as listed: a later change of any byte is seen.
    shown = daemon.cli("mcp", "tools", "--agent", "alpha", "--json")
    assert shown.returncode == 0, shown.stderr
    pins = {t["tool"]: t for t in json.loads(shown.stdout)["tools"]}
    listed = {t["name"]: t for t in hostile_server.huge_tools()}
    for name in ("bloat", "deep", "echo"):
        tool = listed[name]
        digest = tool_digest(name, str(tool["description"]), tool["inputSchema"])
        assert pins[name]["digest"] == digest, name
    assert len(pins["bloat"]["description"]) == 200  # the operator's listing keeps the start
