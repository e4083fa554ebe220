"""The daemon loads an HTTP client only when an HTTP adapter is called (ADR 0054): importing
the daemon, its adapter runner and the discovery service loads neither httpx (the HTTP
adapter's client) nor httpx2 (the MCP SDK's)."""

from __future__ import annotations

import subprocess
import sys

CHECK = (
    "import sys, zeroclaw.supervisor._compose, zeroclaw.supervisor._adapters, "
    "zeroclaw.supervisor._http_adapter, zeroclaw.discovery._service, "
    "zeroclaw.discovery._http_adapter; "
    "print(sorted(m for m in sys.modules if m.split('.')[0] in "
    "('httpx', 'httpx2', 'httpcore', 'httpcore2', 'mcp')))"
)


def test_importing_the_daemon_and_its_adapter_runner_loads_no_http_client() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout
