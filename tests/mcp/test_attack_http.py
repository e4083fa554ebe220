"""The attack pass on MCP over streamable HTTP through a real daemon (issue 26): what a
`headers_env` value, a redirect or a server's stream can make the agent do or say.

The server is the SDK's own (tests/mcp/http_server.py) or a raw socket of ours
(`RawServer`) that answers what a hostile server would; the header's value is a known test
secret, so the `daemons` fixture fails if any log holds it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE
from tests.known_secrets import MCP_HEADER
from tests.mcp._servers import free_port
from tests.supervisor.harness import Daemon, agent_entry, make_config

SERVER = Path(__file__).with_name("http_server.py")


@pytest.fixture
def sdk_server() -> Iterator[str]:
    """The SDK's server on a free port: its URL, once it says it listens."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stderr is not None
    heard = b""
    while b"Uvicorn running on" not in heard:
        line = process.stderr.readline()
        assert line, f"the server exited: {heard!r}"
        heard += line
    drain = threading.Thread(target=lambda: process.stderr and process.stderr.read(), daemon=True)
    drain.start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()
        drain.join(PATIENCE)
        process.stderr.close()


def http_doc(root: Path, url: str, **server: Any) -> dict[str, Any]:
    port = url.split(":")[2].split("/")[0]
    doc = make_config(root, {"alpha": agent_entry(mcp=["h"])})
    doc["risk_profiles"]["sup"]["allowed_endpoints"] = [f"127.0.0.1:{port}"]
    doc["mcp_servers"] = {
        "h": {
            "url": url,
            "headers_env": {"Authorization": "MCP_AUTH"},
            "tools": ["echo"],
            "timeout_secs": 5.0,
            **server,
        }
    }
    return doc


def echo(daemon: Daemon, text: str) -> dict[str, Any]:
    message = "mcp h echo " + json.dumps({"text": text})
    result = daemon.cli("--agent", "alpha", "chat", "-m", message, "--json", timeout=PATIENCE)
    assert result.returncode == 0, result.stderr + daemon.log()
    turn: dict[str, Any] = json.loads(result.stdout)
    return turn


def live_detail(daemon: Daemon, *statuses: str) -> str:
    """The server's live detail in `mcp list --json`, once the agent reported one of
    `statuses`."""
    found: list[str] = []

    def reported(_: dict[str, Any]) -> bool:
        listing = daemon.cli("mcp", "list", "--json")
        assert listing.returncode == 0, listing.stderr
        for server in json.loads(listing.stdout)["servers"]:
            for live in server["live"]:
                if live["status"] in statuses:
                    found.append(live["detail"])
        return bool(found)

    daemon.wait_for(reported)
    return found[-1]


@pytest.mark.parametrize(
    "value",
    [
        MCP_HEADER + "\r\nX-Injected: 1",  # a header of the variable's own
        MCP_HEADER + "\n",  # an env file's trailing newline
        " " + MCP_HEADER,  # leading whitespace h11 refuses
    ],
    ids=["crlf", "newline", "space"],
)
def test_attack_a_header_value_a_request_cannot_carry_is_refused_by_name_never_shown(
    root: Path, daemons: Any, sdk_server: str, value: str
) -> None:
    # The hole: httpx refused the request with "Illegal header value b'<the value>'", and
    # that message became the server's state: the secret went to the agent's log, the
    # daemon's `mcp list`, `zeroclaw events` and every retry's warning.
    daemon = daemons(http_doc(root, sdk_server), faults=False).start(MCP_AUTH=value)
    turn = echo(daemon, "hello")
    assert turn["tool_calls"][0]["error_code"] == "mcp_unavailable", turn
    # restarting, or failed for good once its starts ran out (a slow machine looks late)
    detail = live_detail(daemon, "restarting", "failed")
    assert "MCP_AUTH" in detail and "a header cannot carry" in detail, detail
    secret = MCP_HEADER.split()[1]
    for shown in (
        daemon.cli("mcp", "list", "--json").stdout,
        daemon.cli("mcp", "show", "h", "--json").stdout,
        daemon.cli("events", "--kind", "mcp", "--json").stdout,
        daemon.cli("status", "--json").stdout,
        json.dumps(turn),
    ):
        assert secret not in shown, shown
