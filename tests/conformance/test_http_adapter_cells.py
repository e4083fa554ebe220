"""The HTTP adapter cells (ADR 0054) against a daemon of their own: each agent (one per risk
level) invokes adapters the daemon reaches over HTTP — a real service on loopback that says
whether the bearer token came, an MCP server over streamable HTTP (the SDK's own), and an
endpoint no profile lists: a loopback listener nothing accepts, so a connect the daemon
made would wait in its backlog, where the driver looks. The agents' own environments are
reported by the conformance entry point (`h_*` agents write theirs to their workspace)."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conformance._matrix import (
    HTTP_ADAPTER_AGENTS,
    HTTP_ADAPTER_KEY_ENV,
    Cell,
    Observed,
    cells_on,
)
from tests.conformance._table import record
from tests.conformance._world import ENTRYPOINT, World, free_port, observed_from_turn, workspace
from tests.conftest import PATIENCE, REPO
from tests.discovery.test_discovery_daemon import follow_discovery
from tests.known_secrets import ADAPTER_KEY, assert_no_secret_logged
from tests.supervisor import harness

CELLS = cells_on("http_adapter")
MCP_SERVER = REPO / "tests" / "mcp" / "http_server.py"


@dataclass
class HttpWorld:
    world: World
    far: socket.socket  # listening, never accepting

    def connected_far(self) -> bool:
        """Whether anything connected to the endpoint no profile lists."""
        self.far.setblocking(False)
        try:
            conn, _ = self.far.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True


def _service(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.discovery.http_service"],
        stdout=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], PATIENCE)
    assert ready, "the HTTP service never said its port"
    return process, int(process.stdout.readline())


def _mcp_server(port: int) -> subprocess.Popen[bytes]:
    """The SDK's streamable-HTTP server; returns once it says it listens."""
    process = subprocess.Popen(
        [sys.executable, str(MCP_SERVER), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stderr is not None
    heard = b""
    while b"Uvicorn running on" not in heard:
        ready, _, _ = select.select([process.stderr], [], [], PATIENCE)
        assert ready, f"the MCP server said nothing: {heard!r}"
        chunk = os.read(process.stderr.fileno(), 65536)
        assert chunk, f"the MCP server exited: {heard!r}"
        heard += chunk
    return process


def config(root: Path, service: int, mcp: int, far: int) -> dict[str, Any]:
    listed = [f"127.0.0.1:{service}", f"127.0.0.1:{mcp}"]
    doc = harness.make_config(root, {})
    doc["risk_profiles"] = {
        level: {"level": level, "allowed_endpoints": listed}
        for level in ("readonly", "supervised", "full")
    }
    adapters = ["api", "tickets", "far", "remote", "faraway"]
    doc["agents"] = {
        alias: harness.agent_entry(risk_profile=level, adapters=adapters)
        for alias, level in (("h_ro", "readonly"), ("h_sup", "supervised"), ("h_full", "full"))
    }
    doc["discovery"] = {
        "probe_model_ports": False,
        "scan_user_dirs": False,
        "aliases": {
            "remote.echo": {"adapter": "remote", "tool": "echo"},
            "faraway.echo": {"adapter": "faraway", "tool": "echo"},
        },
    }
    base = f"http://127.0.0.1:{service}"
    key = f"api_key_env: {HTTP_ADAPTER_KEY_ENV}\n"
    manifests = {
        "adapters/api.yaml": f"transport: http\nendpoint: {base}/ok\n{key}"
        "capabilities: [chat.reply]\n",
        "adapters/tickets.yaml": f"transport: http\nendpoint: {base}/ok\n{key}"
        "capabilities: [ticket.create]\n",
        "adapters/far.yaml": f"transport: http\nendpoint: http://127.0.0.1:{far}/ok\n{key}"
        "capabilities: [chat.reply]\n",
        "mcp/remote.yaml": f"transport: http\nendpoint: http://127.0.0.1:{mcp}/mcp\n"
        "timeout_ms: 60000\ntools: [echo]\n",
        "mcp/faraway.yaml": f"transport: http\nendpoint: http://127.0.0.1:{far}/mcp\n"
        "tools: [echo]\n",
    }
    for rel, body in manifests.items():
        path = root / rel
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"id: {path.stem}\n{body}")
    (root / "capabilities").mkdir()
    (root / "capabilities" / "ticket.yaml").write_text(
        "name: ticket.create\nside_effect: writes_external\naudit: [agent, adapter]\n"
    )
    return doc


@pytest.fixture(scope="module")
def http_world() -> Iterator[HttpWorld]:
    root = harness.short_root()
    far = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    far.bind(("127.0.0.1", 0))
    far.listen(16)
    env = {**os.environ, "PYTHONPATH": str(REPO), "ZC_HTTP_SERVICE_KEY": ADAPTER_KEY}
    service, port = _service(env)
    mcp_port = free_port()
    mcp = _mcp_server(mcp_port)
    doc = config(root, port, mcp_port, far.getsockname()[1])
    daemon = harness.Daemon(root, doc, faults=False)
    try:
        daemon.start(ZEROCLAW_AGENT_ENTRYPOINT=ENTRYPOINT, **{HTTP_ADAPTER_KEY_ENV: ADAPTER_KEY})
        follow_discovery(daemon, dict(os.environ), "added", "api")
        daemon.wait_for(lambda s: all(a["pid"] for a in s["agents"]))
        yield HttpWorld(World(root, daemon, doc), far)
    finally:
        daemon.stop()
        for process in (service, mcp):
            process.kill()
            process.wait()
        far.close()
        try:
            assert_no_secret_logged(daemon.log_path)  # the adapter's key above all
        finally:
            harness.remove_root(root)


def environment_of(http_world: HttpWorld, alias: str) -> Observed:
    path = workspace(http_world.world.root, alias) / "environ.json"
    environ: dict[str, str] = json.loads(path.read_text())
    held = [name for name, value in environ.items() if name == HTTP_ADAPTER_KEY_ENV]
    held += [name for name, value in environ.items() if ADAPTER_KEY in value]
    if held:
        return Observed("allowed", "in_environment", ", ".join(sorted(set(held))))
    return Observed("refused", "not_in_environment", f"{len(environ)} variables, no key")


def observe(http_world: HttpWorld, cell: Cell) -> Observed:
    alias = HTTP_ADAPTER_AGENTS[cell.profile][0]
    if cell.action == "environ":
        return environment_of(http_world, alias)
    data = http_world.world.chat(cell.profile, cell.action.format(), agents=HTTP_ADAPTER_AGENTS)
    if http_world.connected_far():
        return Observed("allowed", "connected", "the daemon connected to an endpoint not listed")
    observed = observed_from_turn(cell, data)
    reply = str(data.get("reply", ""))
    if observed.kind == "allowed":
        kind = cell.extra["adapter_kind"]
        # the service's reply says whether the daemon sent the adapter's token
        if kind == "http_adapter" and json.loads(reply).get("authorized") is not True:
            return Observed("refused", "token_not_sent", reply[:200])
        if kind == "mcp_server" and not reply.startswith("over http"):
            return Observed("refused", "not_in_reply", reply[:200])
    if ADAPTER_KEY in json.dumps(data):
        return Observed("allowed", "key_shown", "the turn's answer holds the key")
    return observed


@pytest.mark.parametrize("cell", CELLS, ids=[c.key for c in CELLS])
def test_http_adapter(cell: Cell, http_world: HttpWorld) -> None:
    record(cell, observe(http_world, cell))
