"""Sessions belong to their origin, in a real daemon (ADR 0041): what the operator says in
its CLI session, and what a peer asked, never reach a webhook or serial sender, whatever
session it names; a sender's text never enters the operator's session; the operator reads
every session with `sessions list|show`; model and outside text reach the operator's
terminal escaped; every spelling of one sender spends one rate budget."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.test_channels_daemon import free_port, post, wait_serving
from tests.conformance._world import Device
from tests.known_secrets import HOOK_SECRET
from tests.supervisor import harness
from tests.supervisor.harness import Daemon, agent_entry, make_config

PASSPHRASE = "swordfish-4711"  # the operator's, in alpha's `default` session
BETA_ASKED = "beta-question-0815"  # what beta asked alpha (alpha's session for beta)
SENDER_SAID = "webhook-words-2323"  # a webhook sender's, in its own session
OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # a clipboard write
HIDDEN = "\u202eevil\u200b"  # a bidi override and a zero-width space
RATE = 3


@dataclass
class World:
    daemon: Daemon
    port: int
    device: Device

    def hook(self, body: dict[str, Any]) -> httpx.Response:
        return post(self.port, "ops", body)

    def reply(self, body: dict[str, Any]) -> str:
        answer = self.hook(body)
        assert answer.status_code == 200, answer.text
        text: str = answer.json()["reply"]
        return text

    def serial(self, text: str, end: str) -> str:
        """The device's lines for `text`, up to the reply to a sentinel line `end`."""
        self.device.send(text)
        self.device.send(end)
        lines = []
        while f"heard: {end}" not in (line := self.device.line()):
            lines.append(line)
        return "\n".join(lines)

    def operator(self, *args: str) -> str:
        result = self.daemon.cli("--agent", "alpha", "chat", *args)
        assert result.returncode == 0, result.stderr
        return result.stdout


def config(root: Path, port: int) -> dict[str, Any]:
    agents = {
        "alpha": agent_entry(channels=["cli.local", "webhook.ops", "serial.desk"]),
        "beta": agent_entry(),
    }
    doc = make_config(root, agents)
    doc["channels"]["webhook"] = {
        "ops": {
            "listen": f"127.0.0.1:{port}",
            "secret_env": "HOOK_SECRET",
            "rate_limit_per_minute": 1000,
        },
        "tight": {
            "listen": f"127.0.0.1:{port}",
            "secret_env": "HOOK_SECRET",
            "rate_limit_per_minute": RATE,
        },
    }
    doc["agents"]["alpha"]["channels"].append("webhook.tight")
    doc["channels"]["serial"] = {"desk": {"port": str(root / "ttyDESK")}}
    doc["peer_groups"] = {
        "pair": {"channel": "cli.local", "agents": ["alpha", "beta"]},
        "hooks": {"channel": "webhook.ops", "agents": ["alpha"], "external_peers": ["*"]},
        "tight": {"channel": "webhook.tight", "agents": ["alpha"], "external_peers": ["*"]},
        "desk": {"channel": "serial.desk", "agents": ["alpha"], "external_peers": ["serial:desk"]},
    }
    return doc


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    root = harness.short_root()
    port = free_port()
    device = Device(root / "ttyDESK")
    daemon = Daemon(root, config(root, port), faults=False)
    try:
        daemon.start(HOOK_SECRET=HOOK_SECRET)
        wait_serving(daemon, "webhook.ops")
        daemon.wait_for(lambda s: sum(c["state"] == "serving" for c in s["channels"]) == 2)
        w = World(daemon, port, device)
        assert PASSPHRASE in w.operator("-m", f"passphrase {PASSPHRASE}")
        asked = daemon.cli("--agent", "beta", "chat", "-m", f"ask alpha: {BETA_ASKED}", "--json")
        assert asked.returncode == 0 and BETA_ASKED in asked.stdout, asked.stderr
        assert SENDER_SAID in w.reply({"sender": "ci-bot", "text": f"said {SENDER_SAID}"})
        yield w
    finally:
        daemon.stop()
        device.close()
        harness.remove_root(root)


@pytest.mark.parametrize(
    "session",
    [None, "default", "peer-beta", "peer:beta/default", "default\x00", "a/b:c", "x" * 256],
)
def test_a_webhook_sender_reads_only_its_own_sessions(world: World, session: str | None) -> None:
    body: dict[str, Any] = {"sender": "CI-Bot", "text": "history"}
    if session is not None:
        body["session"] = session
    said = world.reply(body)
    assert PASSPHRASE not in said and BETA_ASKED not in said
    if session is None:  # `@ci-bot`, `CI-Bot`: one sender, one default session
        assert SENDER_SAID in said


def test_another_sender_does_not_read_the_first_ones_session(world: World) -> None:
    said = world.reply({"sender": "mallory", "text": "history", "session": "default"})
    assert SENDER_SAID not in said and PASSPHRASE not in said


def test_a_serial_line_reads_only_its_own_session(world: World) -> None:
    said = world.serial("history", "end-1")
    assert PASSPHRASE not in said and BETA_ASKED not in said and SENDER_SAID not in said


def test_a_senders_text_never_enters_the_operators_next_turn(world: World) -> None:
    world.reply({"sender": "ci-bot", "text": "injected-7", "session": "default"})
    history = world.operator("-m", "history")
    assert PASSPHRASE in history and "injected-7" not in history and SENDER_SAID not in history


def test_the_operator_cannot_name_another_origins_session(world: World) -> None:
    result = world.daemon.cli(
        "--agent", "alpha", "chat", "--session", "webhook.ops:ci-bot/default", "-m", "history"
    )
    assert result.returncode == 2 and "':'" in result.stderr


def test_sessions_list_and_show_name_every_origin(world: World) -> None:
    # The serial line's session, made here: under xdist the test that says something on
    # the line may run on another worker, with its own daemon.
    world.serial("hello", "end-list")
    listed = world.daemon.cli("sessions", "list", "--agent", "alpha", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["schema_version"] == 1
    owners = {(s["kind"], s["who"], s["session"]) for s in data["sessions"]}
    assert ("operator", "operator", "default") in owners
    assert ("peer", "peer:beta", "peer:beta/default") in owners
    assert ("channel", "webhook.ops:ci-bot", "webhook.ops:ci-bot/default") in owners
    assert ("channel", "serial.desk:serial:desk", "serial.desk:serial%3Adesk/default") in owners
    shown = world.daemon.cli("sessions", "show", "peer:beta/default", "--agent", "alpha", "--json")
    assert shown.returncode == 0, shown.stderr
    turns = json.loads(shown.stdout)["turns"]
    assert any(BETA_ASKED in t["content"] for t in turns)
    missing = world.daemon.cli("sessions", "show", "nope", "--agent", "alpha")
    assert missing.returncode == 2 and "session_not_found" in missing.stderr


def test_outside_and_model_text_reach_the_terminal_escaped(world: World) -> None:
    world.reply({"sender": "ci-bot", "text": f"paste {OSC52}{HIDDEN}", "session": "esc"})
    shown = world.daemon.cli("sessions", "show", "webhook.ops:ci-bot/esc", "--agent", "alpha")
    assert shown.returncode == 0, shown.stderr
    # The model's echo streamed back through `chat -m`, a stored record through `memory`.
    echoed = world.operator("--session", "esc", "-m", f"echo {OSC52}{HIDDEN}")
    stored = world.daemon.cli("memory", "store", "osc", f"x{OSC52}{HIDDEN}", "--agent", "alpha")
    assert stored.returncode == 0, stored.stderr
    listed = world.daemon.cli("memory", "list", "--agent", "alpha")
    for out in (shown.stdout, echoed, listed.stdout):
        assert "\\x1b]52;c;cHduZWQ=\\x07" in out and "\\u202eevil\\u200b" in out, out
        assert not any(c in out for c in "\x1b\x07\u202e\u200b"), out


def test_every_spelling_of_a_sender_spends_one_budget(world: World) -> None:
    spellings = ["rate-bot", "RATE-BOT", "@rate-bot", "@Rate-Bot"]
    statuses = [
        post(world.port, "tight", {"sender": s, "text": f"n{i}"}).status_code
        for i, s in enumerate(spellings)
    ]
    assert statuses == [200] * RATE + [429]
