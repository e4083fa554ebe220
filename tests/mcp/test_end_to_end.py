"""An MCP tool through a real daemon: the agent starts `mcp-server-time` inside its sandbox,
offers its allowed tool, and a chat turn calls it; an agent whose profile allows the
endpoint reaches server-everything over streamable HTTP. The daemon may have no pin service
yet (it refuses MCP_PIN unknown_service): then nothing is withheld."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PATIENCE, REPO
from tests.known_secrets import MCP_HEADER
from tests.supervisor.harness import agent_entry, make_config

TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))

EVERYTHING = REPO / ".venv" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
needs_time = pytest.mark.skipif(TIME_SERVER is None, reason="mcp-server-time is not installed")


@needs_time
def test_a_chat_turn_calls_an_mcp_tool_of_the_agents_server(root: Path, daemons) -> None:  # type: ignore[no-untyped-def]
    doc = make_config(root, {"alpha": agent_entry(mcp=["time", "dies", "hangs"])})
    doc["mcp_servers"] = {
        "time": {"command": TIME_SERVER, "tools": ["get_current_time"]},
        # Two broken servers beside it: the agent keeps serving with the good one.
        "dies": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]},
        "hangs": {
            "command": sys.executable,
            "args": ["-c", "import time; time.sleep(3600)"],
            "timeout_secs": 1.0,
            # Its start is what fails; the default bound (30 s) would only make this wait.
            "startup_timeout_secs": 2.0,
            "tools": ["anything"],
        },
    }
    daemon = daemons(doc, faults=False).start()
    message = 'mcp time get_current_time {"timezone": "UTC"}'
    result = daemon.cli("--agent", "alpha", "chat", "-m", message, "--json", timeout=PATIENCE)
    assert result.returncode == 0, result.stderr + daemon.log()
    turn = json.loads(result.stdout)
    assert turn["tool_calls"] == [
        {
            "name": "mcp__time__get_current_time",
            "args": {"timezone": "UTC"},
            "ok": True,
            "error_code": None,
        }
    ], turn
    assert '"timezone":"UTC"' in turn["reply"] and "day_of_week" in turn["reply"]
    # A tool the config does not allow is not offered, and a call of it is refused so.
    other = daemon.cli(
        "--agent", "alpha", "chat", "-m", "mcp time convert_time {}", "--json", timeout=PATIENCE
    )
    refused = json.loads(other.stdout)["tool_calls"][0]
    assert (refused["ok"], refused["error_code"]) == (False, "mcp_tool_not_allowed"), refused
    hung = daemon.cli("--agent", "alpha", "chat", "-m", "mcp hangs anything", "--json")
    # Allowed, but its server never got ready.
    assert json.loads(hung.stdout)["tool_calls"][0]["error_code"] == "mcp_unavailable"
    assert daemon.agent("alpha")["state"] == "running"
    log = daemon.log_text()
    assert "no answer to initialize" in log and "exit status 3" in log


@needs_time
def test_the_kernel_confines_an_mcp_server_the_daemons_agent_starts(root: Path, daemons) -> None:  # type: ignore[no-untyped-def]
    from zeroclaw.policy import abi_version

    if abi_version() < 1:
        pytest.skip("this kernel has no Landlock")
    ws = root / "ws" / "alpha"
    ws.mkdir(parents=True)
    shutil.copy(Path(__file__).with_name("hostile_server.py"), ws / "hostile_server.py")
    doc = make_config(
        root, {"alpha": agent_entry(workspace={"path": str(ws)}, mcp=["h"], risk_profile="free")}
    )
    doc["risk_profiles"]["free"] = {
        "level": "supervised",
        "require_approval_for_medium_risk": False,
    }
    doc["mcp_servers"] = {
        "h": {
            "command": sys.executable,
            "args": ["hostile_server.py", "ok"],
            "tools": ["write", "read"],
        }
    }
    daemon = daemons(doc, faults=False).start()

    def call(tool: str, path: Path | str) -> dict[str, object]:
        message = f"mcp h {tool} " + json.dumps({"path": str(path)})
        result = daemon.cli("--agent", "alpha", "chat", "-m", message, "--json")
        assert result.returncode == 0, result.stderr + daemon.log()
        turn = json.loads(result.stdout)
        assert turn["tool_calls"][0]["ok"] is True, turn
        return turn

    assert call("write", "inside.txt")["reply"] == "written"
    assert (ws / "inside.txt").read_text() == "pwned"
    outside = root / "outside.txt"
    assert call("write", outside)["reply"] == "refused: EACCES"
    assert not outside.exists()
    assert call("read", daemon.config_path)["reply"] == "refused: EACCES"  # the daemon's
    assert call("read", "inside.txt")["reply"] == "pwned"


@pytest.mark.skipif(
    shutil.which("node") is None or not EVERYTHING.exists(),
    reason="node or server-everything (make install) is missing",
)
def test_the_daemons_agent_reaches_an_http_server_its_profile_allows(root: Path, daemons) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [str(EVERYTHING), "streamableHttp"],
        env={"PATH": os.environ["PATH"], "PORT": str(port), "HOME": str(root)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert server.stderr is not None
        assert "listening on port" in server.stderr.readline().decode()
        doc = make_config(root, {"alpha": agent_entry(mcp=["ev"])})
        doc["risk_profiles"]["sup"]["allowed_endpoints"] = [f"127.0.0.1:{port}"]
        doc["mcp_servers"] = {
            "ev": {
                "url": f"http://127.0.0.1:{port}/mcp",
                "headers_env": {"Authorization": "MCP_AUTH"},
                "tools": ["echo"],
            }
        }
        # The header's value is a known secret: the fixture fails if any log holds it.
        daemon = daemons(doc, faults=False).start(MCP_AUTH=MCP_HEADER)
        message = 'mcp ev echo {"message": "over http"}'
        result = daemon.cli("--agent", "alpha", "chat", "-m", message, "--json", timeout=PATIENCE)
        assert result.returncode == 0, result.stderr + daemon.log()
        turn = json.loads(result.stdout)
        assert turn["tool_calls"][0]["ok"] is True, turn
        assert "over http" in turn["reply"]
    finally:
        server.kill()
        server.wait()
        if server.stderr is not None:
            server.stderr.close()


def test_an_in_process_chat_starts_no_mcp_server_and_says_so(tmp_path: Path) -> None:
    """Without a daemon nobody holds the pins (the rug-pull defence), so the in-process chat
    deliberately runs without the agent's MCP servers: it says so, on stderr and in the JSON
    `fallback`, and their tools answer mcp_unavailable; the rest of the turn works."""
    import tomli_w

    from tests.cli.helpers import run_cli

    marker = tmp_path / "started"
    doc = make_config(tmp_path, {"alpha": agent_entry(mcp=["time", "probe"])})
    doc["mcp_servers"] = {
        "time": {"command": TIME_SERVER, "tools": ["get_current_time"]},
        # Would leave a mark if anything started it.
        "probe": {
            "command": sys.executable,
            "args": ["-c", f"open({str(marker)!r}, 'w').close()"],
            "tools": ["x"],
        },
    }
    config = tmp_path / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(doc))
    message = 'mcp time get_current_time {"timezone": "UTC"}'
    result = run_cli("--config", config, "-a", "alpha", "chat", "-m", message, "--json")
    assert result.returncode == 0, result.stderr
    said = "its MCP servers (time, probe) are not started without the daemon"
    assert said in result.stderr, result.stderr
    data = json.loads(result.stdout)
    assert data["fallback"]["mcp_not_started"] == "time,probe"
    [call] = data["tool_calls"]
    assert (call["name"], call["ok"], call["error_code"]) == (
        "mcp__time__get_current_time",
        False,
        "mcp_unavailable",
    )
    assert not marker.exists()
    # An agent without servers is told nothing of MCP.
    doc["agents"]["alpha"]["mcp"] = []
    config.write_text(tomli_w.dumps(doc))
    plain = run_cli("--config", config, "-a", "alpha", "chat", "-m", "hello")
    assert plain.returncode == 0 and "MCP" not in plain.stderr, plain.stderr
