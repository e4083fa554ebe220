"""A reminder attacked as a way around its maker's budget, through a real daemon: an outside
sender whose own budget (ADR 0057: `budget.origins`) allows it one turn an hour makes a
reminder in that turn; the reminder's run is a turn the sender caused, its reply going back
to the sender's channel, so it spends the sender's budget (refused `budget_exceeded`), not
only the agent's. The operator's reminders spend the agent's alone, as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.channels.test_channels_daemon import free_port
from tests.known_secrets import HOOK_SECRET
from tests.schedules.test_attack_reminders import chat, config, sender, tool
from tests.schedules.test_schedules_daemon import (  # noqa: F401
    Receiver,
    receiver,
    wait_events,
)
from tests.supervisor.harness import Daemon

DaemonFactory = Callable[..., Daemon]
ENDS = ("schedule.failed", "schedule.delivered")


def ended_run(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("schedule") == key and e["kind"] in ENDS


def test_a_senders_reminder_spends_the_senders_budget(
    root: Path,
    daemons: DaemonFactory,
    receiver: Receiver,  # noqa: F811
) -> None:
    hook_port = free_port()
    doc = config(root, receiver.port, hook_port, sender_tools=True)
    doc["agents"]["alpha"]["budget"] = {"origins": {"webhook.ops:*": {"turns_per_hour": 1}}}
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)

    # bob's one turn of the hour makes a reminder; its run would be a second turn of bob's.
    made = sender(receiver, hook_port, "bob", "remind in 1s: write me an essay")
    assert made["tool_calls"][0]["ok"], made
    ended = wait_events(
        daemon,
        "schedule",
        lambda e: (
            e.get("schedule") == "alpha.reminder-1"
            and e["kind"] in ("schedule.failed", "schedule.delivered")
        ),
    )
    assert ended["kind"] == "schedule.failed" and ended["code"] == "budget_exceeded", ended

    # The operator's reminder is the operator's: no sender's budget is its.
    assert tool(chat(daemon, "alpha", "remind in 1s to webhook.ops: the operator's"))["ok"]
    ran = wait_events(
        daemon,
        "schedule",
        lambda e: (
            e.get("schedule") == "alpha.reminder-2"
            and e["kind"] in ("schedule.failed", "schedule.delivered")
        ),
    )
    assert ran["kind"] == "schedule.delivered", ran
