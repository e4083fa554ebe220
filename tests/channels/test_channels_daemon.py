"""Channels in a real daemon: a signed webhook request reaches the channel's owner and its
reply comes back; a listener whose port is taken is reported failed in `status` and retried
while the other channels serve; a reload that rebinds the channel moves it to the new owner."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.known_secrets import HOOK_SECRET
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.channels._webhook_core import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

DaemonFactory = Callable[..., Daemon]
SECRET = HOOK_SECRET


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def webhook_config(root: Path, ports: dict[str, int], owner: str = "alpha") -> dict[str, Any]:
    hooks = [f"webhook.{alias}" for alias in ports]
    agents = {
        "alpha": agent_entry(channels=["cli.local", *(hooks if owner == "alpha" else [])]),
        "beta": agent_entry(channels=["cli.local", *(hooks if owner == "beta" else [])]),
    }
    doc = make_config(root, agents)
    doc["channels"]["webhook"] = {
        alias: {"listen": f"127.0.0.1:{port}", "secret_env": "HOOK_SECRET"}
        for alias, port in ports.items()
    }
    doc["peer_groups"] = {
        f"hooks-{alias}": {
            "channel": f"webhook.{alias}",
            "agents": [owner],
            "external_peers": ["*"],
        }
        for alias in ports
    }
    return doc


def post(port: int, alias: str, body: dict[str, Any]) -> httpx.Response:
    raw = json.dumps(body).encode()
    stamp = str(int(time.time()))
    headers = {
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: sign(SECRET.encode(), stamp, raw),
        "content-type": "application/json",
    }
    url = f"http://127.0.0.1:{port}/v1/channels/{alias}/messages"
    return httpx.post(url, content=raw, headers=headers, timeout=30)


def wait_serving(daemon: Daemon, key: str) -> dict[str, Any]:
    return daemon.wait_for(
        lambda s: any(key in c["keys"] and c["state"] == "serving" for c in s.get("channels", []))
    )


def test_a_signed_webhook_message_gets_the_owners_reply_and_a_reload_moves_the_channel(
    root: Path, daemons: DaemonFactory
) -> None:
    port = free_port()
    daemon = daemons(webhook_config(root, {"ops": port}), faults=False)
    daemon.start(HOOK_SECRET=SECRET)
    wait_serving(daemon, "webhook.ops")
    answer = post(port, "ops", {"sender": "bob", "text": "hello"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["agent"] == "alpha" and "alpha" in answer.json()["reply"]
    daemon.write_config(webhook_config(root, {"ops": port}, owner="beta"))
    assert daemon.cli("reload").returncode == 0, daemon.log()
    wait_serving(daemon, "webhook.ops")
    moved = post(port, "ops", {"sender": "bob", "text": "hello"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["agent"] == "beta"
    refused = post(port, "ops", {"sender": "bob", "text": "hello", "agent": "alpha"})
    assert (refused.status_code, refused.json()["error"]) == (404, "agent_not_bound")
    [channel] = daemon.status()["channels"]
    # Counted per channel since the daemon started: both replies, and the refusal by rule.
    assert (channel["delivered"], channel["refused"]) == (2, {"agent_not_bound": 1})


def test_a_taken_port_is_reported_and_retried_while_the_other_channels_serve(
    root: Path, daemons: DaemonFactory
) -> None:
    taken, free = free_port(), free_port()
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", taken))
    blocker.listen()
    try:
        daemon = daemons(webhook_config(root, {"busy": taken, "ops": free}), faults=False)
        daemon.start(HOOK_SECRET=SECRET)
        wait_serving(daemon, "webhook.ops")
        status = daemon.wait_for(
            lambda s: any(
                "webhook.busy" in c["keys"] and c["state"] == "failed" and c["failures"] >= 1
                for c in s.get("channels", [])
            )
        )
        [busy] = [c for c in status["channels"] if "webhook.busy" in c["keys"]]
        assert "in use" in busy["last_error"] and busy["retry_at"] is not None
        assert "webhook.busy: failed" in daemon.cli("status").stdout
        assert post(free, "ops", {"sender": "bob", "text": "hi"}).status_code == 200
    finally:
        blocker.close()
    # The port is free again: the next retry serves on it.
    wait_serving(daemon, "webhook.busy")
    assert post(taken, "busy", {"sender": "bob", "text": "hi"}).status_code == 200


def test_a_bound_webhook_without_its_secret_variable_is_exit_2_naming_it(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(webhook_config(root, {"ops": free_port()}), faults=False)
    env = {k: v for k, v in daemon.env().items() if k != "HOOK_SECRET"}
    started = subprocess.run(
        [*daemon.cli_argv(), "daemon"], env=env, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 2, (started.stdout, started.stderr)
    assert "channels.webhook.ops.secret_env" in started.stderr
    assert "HOOK_SECRET is not set" in started.stderr
    checked = daemon.cli("config", "validate")
    assert checked.returncode == 0  # the file itself is valid: the daemon's environment is not


def test_a_legacy_install_with_no_binding_answers_its_outside_senders_through_the_fallback(
    root: Path, daemons: DaemonFactory
) -> None:
    # No agent binds any channel (a single-agent install from before bindings): the
    # fallback owner, `default`, owns the webhook, and a peer group naming it admits ci-bot.
    port = free_port()
    agents = {"default": agent_entry(), "spare": agent_entry()}
    for agent in agents.values():
        del agent["channels"]
    doc = make_config(root, agents)
    doc["channels"]["webhook"] = {
        "ops": {"listen": f"127.0.0.1:{port}", "secret_env": "HOOK_SECRET"}
    }
    doc["peer_groups"] = {
        "hooks": {"channel": "webhook.ops", "agents": ["default"], "external_peers": ["ci-bot"]}
    }
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=SECRET)
    wait_serving(daemon, "webhook.ops")
    answer = post(port, "ops", {"sender": "CI-Bot", "text": "hello"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["agent"] == "default" and "default" in answer.json()["reply"]
    stranger = post(port, "ops", {"sender": "mallory", "text": "hello"})
    assert stranger.status_code == 403, stranger.text
