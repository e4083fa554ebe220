"""The zygote loads what the configured providers need before it forks (ADR 0036): a
networked agent finds httpx and its provider module already imported (shared with every
other agent), an offline-only daemon never loads httpx at all."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO, VALID_DOC
from tests.supervisor.harness import agent_entry, make_config
from tests.supervisor.test_daemon import DaemonFactory
from zeroclaw.config import validate_document
from zeroclaw.supervisor._zygote import preload_kinds

NETWORK_MODULES = (
    "httpx",
    "httpcore",
    "h11",
    "certifi",
    "zeroclaw.providers._http",
    "zeroclaw.providers._openai",
    "zeroclaw.providers._anthropic",
)

# An agent entry point that writes down, at its first instruction after the fork (so what
# the zygote had loaded), which of the network modules it already has; then the real agent.
PROBE_MODULE = f"""
import json, os, sys

from zeroclaw.agent import agent_main

NETWORK_MODULES = {NETWORK_MODULES!r}


def main(spec, link_fd):
    loaded = [name for name in NETWORK_MODULES if name in sys.modules]
    with open(os.path.join(spec.workspace, "preloaded.json"), "w") as out:
        json.dump(loaded, out)
    return agent_main(spec, link_fd)
"""


def test_the_zygote_preloads_the_kinds_enabled_agents_use() -> None:
    doc = copy.deepcopy(VALID_DOC)
    doc["providers"]["openai"] = {"local": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    doc["providers"]["anthropic"] = {"main": {"model": "claude"}}
    doc["agents"]["alpha"]["model_provider"] = "openai.local"
    doc["agents"]["beta"]["model_provider"] = "anthropic.main"
    doc["agents"]["beta"]["enabled"] = False
    config = validate_document(doc, base_dir=Path("/srv"), env={"HOME": "/home/op"})
    kinds = preload_kinds(config)
    assert "openai" in kinds
    assert "anthropic" not in kinds  # only a disabled agent uses it
    doc["agents"]["beta"]["enabled"] = True
    assert "anthropic" in preload_kinds(validate_document(doc, env={"HOME": "/home/op"}))


def _preloaded(root: Path, daemons: DaemonFactory, providers: dict[str, Any], use: str) -> Any:
    # In a directory of its own: one on sys.path is the daemon's code, and a workspace
    # inside it is refused (ADR 0044).
    lib = root / "lib"
    lib.mkdir()
    (lib / "preload_probe.py").write_text(PROBE_MODULE)
    doc = make_config(root, {"alpha": agent_entry(model_provider=use)})
    doc["providers"].update(providers)
    daemon = daemons(doc, faults=False)
    daemon.start(PYTHONPATH=f"{REPO}:{lib}", ZEROCLAW_AGENT_ENTRYPOINT="preload_probe:main")
    report = root / "state" / "agents" / "alpha" / "workspace" / "preloaded.json"
    daemon.wait_for(lambda s: s["agents"][0]["state"] == "running")
    return json.loads(report.read_text())


def test_a_networked_agent_finds_httpx_loaded_by_the_zygote(
    root: Path, daemons: DaemonFactory
) -> None:
    openai = {"openai": {"local": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}}
    assert _preloaded(root, daemons, openai, "openai.local") == list(NETWORK_MODULES)


def test_an_offline_only_daemon_never_loads_httpx(root: Path, daemons: DaemonFactory) -> None:
    assert _preloaded(root, daemons, {}, "offline.default") == []


def test_preloading_a_network_kind_opens_no_socket_and_starts_no_thread() -> None:
    """What the zygote may do before it forks: import and build, nothing that lives on."""
    code = (
        "import os, sys, threading\n"
        "from zeroclaw.providers import preload_providers\n"
        "preload_providers(['openai', 'anthropic'])\n"
        "sockets = 0\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        sockets += os.readlink(f'/proc/self/fd/{fd}').startswith('socket:')\n"
        "    except OSError:\n"
        "        pass  # the listing's own descriptor, closed by now\n"
        "print(threading.active_count(), sockets, 'httpcore' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.split() == ["1", "0", "True"]
