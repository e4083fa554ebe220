"""Metrics of a real daemon: `zeroclaw metrics` and a scrape of `[daemon] metrics_listen`,
both read with prometheus_client's own text parser, after real turns, probes, memory
operations and a kill -9."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import tomli_w

from tests.cli.helpers import run_cli
from tests.known_secrets import METRICS_TOKEN
from tests.ops.test_metrics import Samples, free_port, samples, value
from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]
OPS = {"ops": {"channel": "cli", "agents": ["alpha", "beta"]}}


def config(root: Path, listen: str | None) -> dict[str, Any]:
    doc = make_config(
        root,
        {"alpha": agent_entry(), "beta": agent_entry(), "gamma": agent_entry()},
        groups=OPS,
    )
    if listen is not None:
        doc["daemon"]["metrics_listen"] = listen
        doc["daemon"]["metrics_token_env"] = TOKEN_ENV
    return doc


TOKEN_ENV = "ZEROCLAW_METRICS_TOKEN"
TOKEN = METRICS_TOKEN
AUTH = {"authorization": f"Bearer {TOKEN}"}


def cli_metrics(daemon: Daemon) -> Samples:
    result = daemon.cli("metrics")
    assert result.returncode == 0, result.stderr
    return samples(result.stdout)


def test_a_scrape_and_zeroclaw_metrics_count_what_the_daemon_did(
    root: Path, daemons: DaemonFactory
) -> None:
    port = free_port()
    daemon = daemons(config(root, f"127.0.0.1:{port}")).start(**{TOKEN_ENV: TOKEN})
    url = f"http://127.0.0.1:{port}/metrics"
    assert httpx.get(url, timeout=30).status_code == 401  # no token, no metrics
    scraped = httpx.get(url, timeout=30, headers=AUTH)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=")
    parsed = samples(scraped.text)
    assert value(parsed, "zeroclaw_agents", state="running") == 3
    assert value(parsed, "zeroclaw_agents", state="fatal") == 0
    assert value(parsed, "zeroclaw_metrics_listener_up", listen=f"127.0.0.1:{port}") == 1
    assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30, headers=AUTH).status_code == 404

    # A chat turn: counted, and its duration in the turn histogram.
    chat = daemon.cli("-a", "alpha", "chat", "-m", "hi")
    assert chat.returncode == 0, chat.stderr
    # A refusal by code: gamma shares no peer group with alpha.
    assert daemon.cli("route", "probe", "--from", "alpha", "--to", "gamma").returncode == 1
    # Memory operations through the daemon.
    assert daemon.cli("memory", "store", "-a", "beta", "k", "v").returncode == 0
    assert daemon.cli("memory", "get", "-a", "beta", "k").returncode == 0
    # A kill -9: an exit by signal, then an automatic restart.
    old = daemon.agent("alpha")["pid"]
    os.kill(old, signal.SIGKILL)
    daemon.wait_for(
        lambda s: any(
            a["alias"] == "alpha" and a["state"] == "running" and a["pid"] != old
            for a in s["agents"]
        )
    )

    parsed = cli_metrics(daemon)
    turns = "zeroclaw_turns_total"
    assert value(parsed, turns, agent="alpha", channel="cli.local", outcome="ok") == 1
    assert value(parsed, "zeroclaw_turn_duration_seconds_count", agent="alpha") == 1
    assert value(parsed, "zeroclaw_turn_duration_seconds_bucket", agent="alpha", le="+Inf") == 1
    assert (value(parsed, "zeroclaw_turn_duration_seconds_sum", agent="alpha") or 0) > 0
    assert value(parsed, "zeroclaw_router_messages_total", outcome="not_peers") == 1
    assert value(parsed, "zeroclaw_memory_operations_total", op="store", outcome="ok") == 1
    assert value(parsed, "zeroclaw_memory_operations_total", op="get", outcome="ok") == 1
    assert (value(parsed, "zeroclaw_memory_commit_batch_size_count") or 0) >= 1
    assert value(parsed, "zeroclaw_agent_exits_total", alias="alpha", cause="signal") == 1
    assert value(parsed, "zeroclaw_agent_restarts_total", alias="alpha") == 1
    assert value(parsed, "zeroclaw_agents", state="running") == 3
    # The listener serves what the control socket prints.
    scraped_after = samples(httpx.get(url, timeout=30, headers=AUTH).text)
    assert value(scraped_after, "zeroclaw_agent_exits_total", alias="alpha", cause="signal") == 1

    as_json = daemon.cli("metrics", "--json")
    assert as_json.returncode == 0, as_json.stderr
    wrapped = json.loads(as_json.stdout)
    assert wrapped["schema_version"] >= 1
    assert value(samples(wrapped["text"]), "zeroclaw_agents", state="running") == 3

    daemon.stop()
    gone = daemon.cli("metrics")
    assert gone.returncode == 3 and "no zeroclaw daemon" in gone.stderr


def wait_metrics(daemon: Daemon, predicate: Callable[[Samples], bool], timeout: float = 20) -> None:
    """Re-read `zeroclaw metrics` whenever the daemon reports a change, until it holds."""
    deadline = time.monotonic() + timeout
    while not predicate(parsed := cli_metrics(daemon)):
        assert time.monotonic() < deadline, f"not reached in {timeout}s: {parsed}"
        daemon.next_notification(0.2)


def test_a_taken_metrics_port_does_not_kill_the_daemon_and_a_reload_moves_it(
    root: Path, daemons: DaemonFactory
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        listen = f"127.0.0.1:{holder.getsockname()[1]}"
        daemon = daemons(config(root, listen)).start(**{TOKEN_ENV: TOKEN})
        parsed = cli_metrics(daemon)
        assert value(parsed, "zeroclaw_metrics_listener_up", listen=listen) == 0
        assert value(parsed, "zeroclaw_agents", state="running") == 3
        assert "metrics listener cannot bind" in daemon.log_text()
        daemon.assert_alive()
        # A reload that names a free port moves the listener there.
        moved = f"127.0.0.1:{free_port()}"
        daemon.write_config(config(root, moved))
        assert daemon.cli("reload").returncode == 0
        wait_metrics(daemon, lambda p: value(p, "zeroclaw_metrics_listener_up", listen=moved) == 1)
        scraped = httpx.get(f"http://{moved}/metrics", timeout=30, headers=AUTH)
        assert value(samples(scraped.text), "zeroclaw_agents", state="running") == 3


def test_a_non_loopback_metrics_listen_is_refused(root: Path) -> None:
    path = root / "zeroclaw.toml"
    doc = config(root, "0.0.0.0:9464")
    path.write_text(tomli_w.dumps(doc))
    result = run_cli("--config", path, "config", "validate")
    assert result.returncode == 2
    assert "metrics_listen" in result.stdout + result.stderr
    assert "metrics_allow_remote" in result.stdout + result.stderr
    doc["daemon"]["metrics_allow_remote"] = True
    path.write_text(tomli_w.dumps(doc))
    assert run_cli("--config", path, "config", "validate").returncode == 0


def test_a_metrics_listen_without_a_token_variable_is_refused(root: Path) -> None:
    path = root / "zeroclaw.toml"
    doc = config(root, "127.0.0.1:9464")
    del doc["daemon"]["metrics_token_env"]
    path.write_text(tomli_w.dumps(doc))
    result = run_cli("--config", path, "config", "validate")
    assert result.returncode == 2
    assert "metrics_token_env" in result.stdout + result.stderr
