"""Agents' reminders attacked through a real daemon with only what the capability offers:
an agent flooding reminders, a reminder every second, a reminder delivered to a channel the
agent does not bind, a peer and an outside sender making reminders; and what must hold:
a granted sender's reminder delivers back to its own webhook (signed), reminders survive a
restart, and a deleted one is gone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.channels.test_channels_daemon import free_port, post
from tests.known_secrets import HOOK_SECRET
from tests.schedules.test_schedules_daemon import Receiver, cli_json, receiver  # noqa: F401
from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]


def config(root: Path, receiver_port: int, hook_port: int, *, sender_tools: bool) -> dict[str, Any]:
    doc = make_config(
        root,
        {
            "alpha": agent_entry(
                risk_profile="keeper",
                channels=["cli.local", "webhook.ops", "webhook.quiet"],
                peer_tools=["schedule_create", "schedule_list"],
            ),
            "beta": agent_entry(risk_profile="keeper"),
        },
        groups={
            "peers": {"channel": "cli.local", "agents": ["alpha", "beta"]},
            "hooks": {
                "channel": "webhook.ops",
                "agents": ["alpha"],
                "external_peers": ["*"],
                "tools": ["schedule_create", "schedule_list"] if sender_tools else [],
            },
        },
    )
    doc["risk_profiles"]["keeper"] = {
        "level": "full",
        "reminders": {"max_per_agent": 3, "min_interval": "5m"},
    }
    doc["channels"]["webhook"] = {
        "ops": {
            "listen": f"127.0.0.1:{hook_port}",
            "secret_env": "HOOK_SECRET",
            "callback_url": f"http://127.0.0.1:{receiver_port}/r",
            "callback_max_attempts": 2,
        },
        "quiet": {"listen": f"127.0.0.1:{hook_port}", "secret_env": "HOOK_SECRET"},
    }
    return doc


def chat(daemon: Daemon, agent: str, text: str) -> dict[str, Any]:
    done = daemon.cli("--agent", agent, "chat", "-m", text, "--json")
    assert done.stdout, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def sender(receiver: Receiver, port: int, who: str, text: str) -> dict[str, Any]:  # noqa: F811
    """What an outside sender's message got: the channel is in callback mode (202), so its
    outcome arrives at the receiver under its message id."""
    accepted = post(port, "ops", {"sender": who, "text": text})
    assert accepted.status_code == 202, accepted.text
    message_id = accepted.json()["message_id"]
    [body] = receiver.wait(1, lambda b: b.get("message_id") == message_id)
    return body


def tool(result: dict[str, Any]) -> dict[str, Any]:
    [call] = result["tool_calls"]
    return call  # type: ignore[no-any-return]


def test_reminders_attacked_and_kept(
    root: Path,
    daemons: DaemonFactory,
    receiver: Receiver,  # noqa: F811
) -> None:
    hook_port = free_port()
    daemon = daemons(config(root, receiver.port, hook_port, sender_tools=False), faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)

    # The operator's turn may make one; every second is refused, as is a channel it does
    # not bind (serial.none) or one that cannot carry a message out (no callback_url).
    made = tool(chat(daemon, "alpha", "remind every 1h: water the plants"))
    assert made["ok"], made
    assert tool(chat(daemon, "alpha", "remind every 1s: flood"))["error_code"] == (
        "reminder_too_frequent"
    )
    assert tool(chat(daemon, "alpha", "remind cron * * * * *: flood"))["error_code"] == (
        "reminder_too_frequent"
    )
    for target in ("serial.none", "webhook.quiet", "cli.local"):
        refused = tool(chat(daemon, "alpha", f"remind in 1h to {target}: leak"))
        assert refused["error_code"] == "reminder_not_deliverable", (target, refused)

    # A flood stops at the agent's limit (3).
    codes = [tool(chat(daemon, "alpha", f"remind in {n}h: n{n}"))["error_code"] for n in (2, 3, 4)]
    assert codes == [None, None, "reminder_limit"], codes

    # A peer asking alpha, whose peer_tools grant the tool: the daemon refuses it all the
    # same (a reminder is made in the operator's or an outside sender's turn only).
    asked = chat(daemon, "beta", "ask alpha: remind in 1h: from a peer")
    assert "reminder_not_allowed" in json.dumps(asked), asked

    # An outside sender without the tool in its group's tools: tool_not_granted.
    answer = sender(receiver, hook_port, "mallory", "remind in 1h: hi")
    assert answer["tool_calls"][0]["error_code"] == "tool_not_granted"

    listed = cli_json(daemon, "schedules", "list", "--agent", "alpha")["schedules"]
    names = sorted(s["name"] for s in listed)
    assert names == ["reminder-1", "reminder-2", "reminder-3"], names
    shown = cli_json(daemon, "schedules", "show", "alpha.reminder-1")
    assert shown["kind"] == "reminder" and shown["created_by"] == "operator"
    assert shown["text"] == "water the plants" and shown["tools"] == []

    # Kept across a restart; deleted when asked.
    daemon.stop()
    daemon = daemons(config(root, receiver.port, hook_port, sender_tools=True), faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    assert len(cli_json(daemon, "schedules", "list", "--agent", "alpha")["schedules"]) == 3
    assert tool(chat(daemon, "alpha", "unremind reminder-2"))["ok"]
    after = cli_json(daemon, "schedules", "list", "--agent", "alpha")["schedules"]
    assert sorted(s["name"] for s in after) == ["reminder-1", "reminder-3"]

    # A granted sender's reminder goes back to its own webhook, signed like a callback;
    # it sees only its own reminders.
    body = sender(receiver, hook_port, "ci-bot", "remind in 1s: ping")
    assert body["tool_calls"][0]["ok"], body
    [delivered] = receiver.wait(1, lambda b: b.get("schedule", "").startswith("alpha.reminder"))
    assert delivered["status"] == 200 and delivered["agent"] == "alpha"
    mine = sender(receiver, hook_port, "ci-bot", "reminders")
    listing = mine["tool_calls"][0]
    assert listing["ok"] and "water the plants" not in json.dumps(mine), mine
    # ... and the one-shot is gone once it ran
    gone = cli_json(daemon, "schedules", "list", "--agent", "alpha")["schedules"]
    assert sorted(s["name"] for s in gone) == ["reminder-1", "reminder-3"]
