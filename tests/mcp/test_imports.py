"""The daemon and an agent without MCP servers never load the MCP SDK (ADR 0053, issue 31)."""

from __future__ import annotations

import subprocess
import sys

CHECK = (
    "import sys, zeroclaw.supervisor, zeroclaw.agent, zeroclaw.mcp; "
    "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))); "
    "print(loaded)"
)


def test_importing_the_daemon_the_agent_and_zeroclaw_mcp_loads_no_mcp_sdk() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout
