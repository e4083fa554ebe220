"""A daemon imports only what its config uses (issue 31, ADR 0067): on a config without
schedules, a gateway, MCP servers, HTTP listeners or chat networks, a real daemon, once
ready and its first discovery scan done, has loaded none of their code, nor the agents' main,
their tools, an HTTP client, PyYAML or jsonschema.

What a daemon loaded is read from the process itself: a `sitecustomize` on its PYTHONPATH
writes `sys.modules` when it exits. That sees every import, eager, lazy (the package
`__getattr__`s, which `-X importtime` does not report) or late (after READY), so an eager
import put back anywhere on the way fails here. The second test is the probe's control: a
config with those entries loads them.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]

# Writes the daemon's modules (not the zygote's: its argv has no "daemon") at its exit.
SITECUSTOMIZE = """
import atexit, os, sys

def _write_modules():
    out = os.environ.get("ZEROCLAW_TEST_MODULES")
    if out and "daemon" in sys.argv:
        with open(out, "w") as f:
            f.write("\\n".join(sorted(sys.modules)))

atexit.register(_write_modules)
"""

# Code a daemon loads only for a config entry (or a found manifest) that needs it.
UNUSED = (
    "zeroclaw.schedules._service",  # a schedule, a heartbeat, reminder tools
    "zeroclaw.schedules._machine",
    "zeroclaw.schedules._reminders",
    "croniter",
    "zeroclaw.gateway",  # [gateway]
    "zeroclaw._asgi",  # any HTTP listener: webhook, gateway, metrics_listen
    "hypercorn",
    "prometheus_client",  # a metrics scrape
    "zeroclaw.ops._exposition",
    "zeroclaw.ops._metrics_http",
    "zeroclaw.mcp",  # MCP servers, an adapter call
    "mcp",
    "zeroclaw.channels._webhook",
    "zeroclaw.channels._telegram",
    "zeroclaw.channels._matrix",
    "nio",
    "zeroclaw.ops._doctor",
    "zeroclaw.agent._process",  # the agents' own code: the zygote's, not the daemon's
    "zeroclaw.agent._turn",
    "zeroclaw.tools",
    "httpx",  # an HTTP adapter call, a model server that answers
    "yaml",  # a manifest, a bundle, a skill
    "jsonschema",
    "asyncio",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def loaded_modules(root: Path, daemons: DaemonFactory, doc: dict[str, Any], **env: str) -> set[str]:
    """Every module a daemon on `doc` had loaded when it stopped, ready and idle."""
    probe = root / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(SITECUSTOMIZE)
    out = root / "modules.txt"
    daemon = daemons(doc, faults=False)
    daemon.start(PYTHONPATH=f"{REPO}:{probe}", ZEROCLAW_TEST_MODULES=str(out), **env)
    daemon.wait_for(lambda s: s["discovery"]["scanned_at"] is not None)  # after READY
    daemon.stop()
    assert daemon.wait_exit() == 0
    return set(out.read_text().split())


def within(modules: set[str], names: tuple[str, ...]) -> set[str]:
    return {m for m in modules for n in names if m == n or m.startswith(f"{n}.")}


def test_a_daemon_loads_no_code_its_config_does_not_use(
    root: Path, daemons: DaemonFactory
) -> None:
    modules = loaded_modules(root, daemons, make_config(root, {"alpha": agent_entry()}))
    assert {"trio", "zeroclaw.supervisor._compose", "zeroclaw.discovery._service"} <= modules
    assert within(modules, UNUSED) == set()


def test_the_probe_sees_what_a_config_with_those_entries_loads(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(
        root, {"alpha": agent_entry(schedules={"daily": {"cron": "0 8 * * *", "text": "hi"}})}
    )
    doc["daemon"]["metrics_listen"] = f"127.0.0.1:{free_port()}"
    doc["daemon"]["metrics_token_env"] = "ZEROCLAW_TEST_METRICS_TOKEN"
    modules = loaded_modules(root, daemons, doc, ZEROCLAW_TEST_METRICS_TOKEN="t")
    used = ("zeroclaw.schedules._service", "croniter", "zeroclaw._asgi", "hypercorn")
    assert within(modules, used) >= set(used)
