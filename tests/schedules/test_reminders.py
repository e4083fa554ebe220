"""Agents' own reminders: the daemon's decision (`admit_reminder`), pure, over a real
validated config: who may make one, how many and how often, where it may deliver, and the
approval a supervised agent's reminder needs (the daemon's record of a yes, ADR 0052)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import Origin
from zeroclaw.config import Config, validate_document
from zeroclaw.schedules import Cron, Every, Once, admit_reminder
from zeroclaw.schedules._reminders import Admitted, Refusal
from zeroclaw.turns import ReminderCreate, reminder_approval_question

NOW = 1_800_000_000.0
OPERATOR = Origin.operator("cli.local")
SENDER = Origin.from_sender("webhook.ops", "ci-bot")


def config(tmp_path: Path, level: str = "full", **grant: Any) -> Config:
    doc = make_config(
        tmp_path,
        {
            "alpha": agent_entry(channels=["cli.local", "webhook.ops", "serial.bench"]),
            "beta": agent_entry(risk_profile="plain"),
        },
    )
    doc["risk_profiles"]["sup"] = {"level": level, "reminders": {"max_per_agent": 3, **grant}}
    doc["risk_profiles"]["plain"] = {"level": "full"}
    doc["channels"]["webhook"] = {
        "ops": {
            "listen": "127.0.0.1:8787",
            "secret_env": "K",
            "callback_url": "http://127.0.0.1:9/x",
        },
        "quiet": {"listen": "127.0.0.1:8788", "secret_env": "K"},
    }
    doc["channels"]["serial"] = {"bench": {"port": "/dev/null-zc"}}
    doc["agents"]["alpha"]["channels"].append("webhook.quiet")
    return validate_document(doc)


def admit(
    cfg: Config,
    call: ReminderCreate,
    origin: Origin | None = OPERATOR,
    *,
    agent: str = "alpha",
    held: Sequence[str] = (),
    approved: bool = False,
    granted: Collection[str] | None = None,
) -> Admitted | Refusal:
    return admit_reminder(
        cfg,
        agent,
        origin,
        call,
        now=NOW,
        held=held,
        approved=lambda what: approved,
        granted=granted,
    )


def test_a_reminder_in_every_and_cron(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    once = admit(cfg, ReminderCreate("call bob", after="20m"))
    assert once == Admitted(Once(NOW + 1200), "log")
    every = admit(cfg, ReminderCreate("water", every="1h"))
    assert every == Admitted(Every(3600.0, NOW), "log")
    cron = admit(cfg, ReminderCreate("standup", cron="0 8 * * 1-5", timezone="Europe/Berlin"))
    assert cron == Admitted(Cron("0 8 * * 1-5", "Europe/Berlin"), "log")


@pytest.mark.parametrize(
    ("origin", "why"),
    [
        (Origin.peer("beta"), "a peer's question"),
        (Origin.schedule("alpha", "morning"), "a schedule's own run"),
        (Origin.subagent("alpha"), "a dispatch"),
        (None, "a turn the daemon did not open on this agent"),
    ],
)
def test_only_the_operator_and_outside_senders_make_reminders(
    tmp_path: Path, origin: Origin | None, why: str
) -> None:
    refused = admit(config(tmp_path), ReminderCreate("x", after="1h"), origin)
    assert isinstance(refused, Refusal) and refused.code == "reminder_not_allowed", why


def test_a_turn_the_daemon_did_not_grant_the_tool_makes_none(tmp_path: Path) -> None:
    """The daemon's grant of the asking turn decides, not the agent's word: a sender's turn
    without schedule_create in its groups' tools is refused even if its agent asks."""
    call = ReminderCreate("x", after="1h")
    refused = admit(config(tmp_path), call, SENDER, granted=("file_read",))
    assert isinstance(refused, Refusal) and refused.code == "reminder_not_allowed"
    assert "schedule_create" in refused.detail
    granted = admit(config(tmp_path), call, SENDER, granted=("schedule_create",))
    assert isinstance(granted, Admitted)


def test_no_grant_no_reminder(tmp_path: Path) -> None:
    refused = admit(config(tmp_path), ReminderCreate("x", after="1h"), agent="beta")
    assert isinstance(refused, Refusal) and refused.code == "reminder_not_allowed"


def test_a_flood_stops_at_the_agents_limit(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    assert isinstance(admit(cfg, ReminderCreate("x", after="1h"), held=["operator"] * 2), Admitted)
    refused = admit(cfg, ReminderCreate("x", after="1h"), held=["operator"] * 3)
    assert isinstance(refused, Refusal) and refused.code == "reminder_limit"


def test_a_channels_senders_hold_at_most_their_share(tmp_path: Path) -> None:
    """Senders of one channel, whatever names they give, hold max_per_channel together; the
    operator and another channel's senders still have room."""
    cfg = config(tmp_path, max_per_agent=5, max_per_channel=2)
    held = ["webhook.ops:ci-bot", "webhook.ops:someone-else"]
    call = ReminderCreate("x", after="1h")
    rotated = Origin.from_sender("webhook.ops", "a-new-name")
    refused = admit(cfg, call, rotated, held=held)
    assert isinstance(refused, Refusal) and refused.code == "reminder_limit"
    assert "webhook.ops" in refused.detail
    assert isinstance(admit(cfg, call, OPERATOR, held=held), Admitted)
    other = Origin.from_sender("webhook.quiet", "ci-bot")
    assert isinstance(admit(cfg, call, other, held=held), Admitted)


@pytest.mark.parametrize(
    "call",
    [
        ReminderCreate("x", every="1s"),
        ReminderCreate("x", every="4m59s"),
        ReminderCreate("x", cron="* * * * *"),
        ReminderCreate("x", cron="*/2 * * * *"),
    ],
)
def test_a_reminder_more_often_than_min_interval_is_refused(
    tmp_path: Path, call: ReminderCreate
) -> None:
    refused = admit(config(tmp_path), call)
    assert isinstance(refused, Refusal) and refused.code == "reminder_too_frequent"


@pytest.mark.parametrize(
    "call",
    [
        ReminderCreate("x"),
        ReminderCreate("x", after="1h", every="2h"),
        ReminderCreate("x", after="soon"),
        ReminderCreate("x", after="400d"),
        ReminderCreate("x", cron="0 0 31 2 *"),
        ReminderCreate("x", cron="0\n8 * * *"),  # a line break for the daemon's text log
        ReminderCreate("x", cron=",".join(["0"] * 10_000) + " 0 * * *"),  # 20 KB to parse
        ReminderCreate("", after="1h"),
        ReminderCreate("x" * 5000, after="1h"),
    ],
)
def test_bad_arguments(tmp_path: Path, call: ReminderCreate) -> None:
    refused = admit(config(tmp_path), call)
    assert isinstance(refused, Refusal) and refused.code == "bad_arguments", refused


def test_delivery_only_to_a_channel_the_agent_binds_and_a_sender_only_to_its_own(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path)
    ok = admit(cfg, ReminderCreate("x", after="1h", deliver_to="serial.bench"))
    assert ok == Admitted(Once(NOW + 3600), "serial.bench")
    for target in ("webhook.nope", "serial.other", "cli.local", "webhook.quiet"):
        refused = admit(cfg, ReminderCreate("x", after="1h", deliver_to=target))
        assert isinstance(refused, Refusal) and refused.code == "reminder_not_deliverable", target
    # A sender's reminder goes back where it wrote (by default), never to another channel.
    mine = admit(cfg, ReminderCreate("x", after="1h"), SENDER)
    assert mine == Admitted(Once(NOW + 3600), "webhook.ops")
    other = admit(cfg, ReminderCreate("x", after="1h", deliver_to="serial.bench"), SENDER)
    assert isinstance(other, Refusal) and other.code == "reminder_not_deliverable"
    quiet = Origin.from_sender("webhook.quiet", "ci-bot")  # no callback_url: its replies stay
    assert admit(cfg, ReminderCreate("x", after="1h"), quiet) == Admitted(Once(NOW + 3600), "log")


def test_a_supervised_agent_needs_the_yes_the_daemon_saw(tmp_path: Path) -> None:
    cfg = config(tmp_path, level="supervised")
    call = ReminderCreate("x", every="1h", turn="t-1")
    asked: list[str] = []

    def approved(what: str) -> bool:
        asked.append(what)
        return False

    refused = admit_reminder(
        cfg, "alpha", OPERATOR, call, now=NOW, held=(), approved=approved, granted=None
    )
    assert isinstance(refused, Refusal) and refused.code == "approval_denied"
    assert asked == [reminder_approval_question(call)]
    assert isinstance(admit(cfg, call, approved=True), Admitted)


def test_the_approval_question_shows_the_text_escaped_and_bounded() -> None:
    question = reminder_approval_question(ReminderCreate("a\x1b[2Jb" + "x" * 500, after="1h"))
    assert "\x1b" not in question and len(question) < 250 and "in 1h" in question


def test_a_readonly_profile_cannot_grant_reminders(tmp_path: Path) -> None:
    from zeroclaw.config import ConfigError

    doc = make_config(tmp_path, {"alpha": agent_entry()})
    doc["risk_profiles"]["sup"] = {"level": "readonly", "reminders": {}}
    with pytest.raises(ConfigError, match="readonly profile makes nothing"):
        validate_document(doc)
