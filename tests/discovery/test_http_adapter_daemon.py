"""An HTTP adapter through a real daemon (ADR 0054): a manifest in adapters/ is found and
registered, an agent's turn calls it with `invoke_adapter` (the offline grammar), the
daemon POSTs to a real service on loopback with the bearer token from its own environment
— which no agent process holds — and the token reaches no log, event or `--json`."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE, REPO
from tests.discovery.test_discovery_daemon import chat, follow_discovery
from tests.known_secrets import ADAPTER_KEY
from tests.supervisor.harness import Daemon, agent_entry, make_config

KEY_ENV = "ZC_ADAPTER_KEY"


@pytest.fixture
def service() -> Iterator[int]:
    """tests/discovery/http_service.py in a process of its own; its port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.discovery.http_service"],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO), "ZC_HTTP_SERVICE_KEY": ADAPTER_KEY},
        cwd=REPO,
    )
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], PATIENCE)
        assert ready, "the HTTP service never said its port"
        yield int(process.stdout.readline())
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


@pytest.fixture
def running(root: Path, daemons: Any, service: int) -> tuple[Daemon, dict[str, str]]:
    base = f"http://127.0.0.1:{service}"
    (root / "adapters").mkdir()
    manifests = {
        "api": f"endpoint: {base}/ok\napi_key_env: {KEY_ENV}\n",
        "busy": f"endpoint: {base}/status/503\n",
    }
    for name, body in manifests.items():
        (root / "adapters" / f"{name}.yaml").write_text(
            f"id: {name}\ntransport: http\n{body}capabilities: [chat.reply]\n"
        )
    doc = make_config(
        root,
        {
            "alpha": agent_entry(adapters=["api", "busy"], risk_profile="net"),
            "beta": agent_entry(adapters=["api"]),  # supervised, no endpoint listed
        },
    )
    doc["risk_profiles"]["net"] = {"level": "full", "allowed_endpoints": [f"127.0.0.1:{service}"]}
    doc["discovery"] = {"probe_model_ports": False, "scan_user_dirs": False}
    home = root / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    daemon = daemons(doc, faults=False)
    daemon.start(**env, **{KEY_ENV: ADAPTER_KEY})
    follow_discovery(daemon, env, "added", "api")
    return daemon, env


def test_an_agent_calls_an_http_adapter_and_the_daemon_holds_the_token(
    running: tuple[Daemon, dict[str, str]],
) -> None:
    daemon, env = running
    answer = chat(daemon, "alpha", "invoke api: look at main.py")
    [call] = answer["tool_calls"]
    assert call["name"] == "invoke_adapter" and call["ok"], answer
    # the service's reply, compactly: it got the capability, the input and the token
    assert json.loads(answer["reply"]) == {
        "capability": "chat.reply",
        "input": "look at main.py",
        "authorized": True,
    }
    busy = chat(daemon, "alpha", "invoke busy: x")
    assert busy["tool_calls"][0]["error_code"] == "http_status"
    assert "HTTP 503" in busy["reply"]
    refused = chat(daemon, "beta", "invoke api: x")
    assert refused["tool_calls"][0]["error_code"] == "endpoint_not_allowed"
    assert "allowed_endpoints" in refused["reply"]
    # Nothing the operator sees holds the token (the daemons fixture greps the log too).
    outputs = [json.dumps(a) for a in (answer, busy, refused)]
    for args in (
        ("events", "--json"),
        ("status", "--json"),
        ("discover", "explain", "api", "--json"),
        ("discover", "audit", "--json"),
    ):
        result = subprocess.run(
            [*daemon.cli_argv(), *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), **env, KEY_ENV: ADAPTER_KEY},
            cwd=REPO,
            check=False,
        )
        assert result.returncode == 0, (args, result.stderr)
        outputs.append(result.stdout + result.stderr)
    assert not [text for text in outputs if ADAPTER_KEY in text]
    assert ADAPTER_KEY not in daemon.log_text()


def test_no_agent_process_holds_the_adapters_token(
    running: tuple[Daemon, dict[str, str]],
) -> None:
    daemon, _ = running
    status = daemon.wait_for(lambda s: all(a["pid"] for a in s["agents"]))
    for agent in status["agents"]:
        try:
            environ = Path(f"/proc/{agent['pid']}/environ").read_bytes()
        except PermissionError:  # not root: an agent is not dumpable, its environ is closed
            pytest.skip("reading an agent's environment needs root here")
        names = {entry.split(b"=", 1)[0] for entry in environ.split(b"\0") if entry}
        assert KEY_ENV.encode() not in names, agent["alias"]
        assert ADAPTER_KEY.encode() not in environ, agent["alias"]
