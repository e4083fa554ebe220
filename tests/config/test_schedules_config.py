"""[agents.<a>.schedules.<name>], [agents.<a>.heartbeat] and a risk profile's `reminders`:
each key's own checks and the rules across entries, every error as FILE: key: message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.config import ConfigError, parse_duration, validate_document


def doc_with(tmp_path: Path, schedules: dict[str, Any], **agent: Any) -> dict[str, Any]:
    doc = make_config(
        tmp_path,
        {"alpha": agent_entry(channels=["cli.local", "webhook.ops", "webhook.quiet"], **agent)},
    )
    doc["channels"]["webhook"] = {
        "ops": {
            "listen": "127.0.0.1:8787",
            "secret_env": "K",
            "callback_url": "http://127.0.0.1:9/x",
        },
        "quiet": {"listen": "127.0.0.1:8788", "secret_env": "K"},
        "other": {
            "listen": "127.0.0.1:8789",
            "secret_env": "K",
            "callback_url": "http://127.0.0.1:9/y",
        },
    }
    doc["agents"]["alpha"]["schedules"] = schedules
    return doc


def errors(doc: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_document(doc)
    return "\n".join(caught.value.lines())


@pytest.mark.parametrize(
    ("text", "secs"),
    [("90s", 90.0), ("15m", 900.0), ("1h30m", 5400.0), ("2d", 172800.0), ("500ms", 0.5), (5, 5.0)],
)
def test_durations(text: object, secs: float) -> None:
    assert parse_duration(text) == secs


@pytest.mark.parametrize("bad", ["", "15", "m15", "1h 30m", "1.5.2s", "fifteen minutes"])
def test_not_durations(bad: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(bad)


def test_a_valid_schedule_set(tmp_path: Path) -> None:
    config = validate_document(
        doc_with(
            tmp_path,
            {
                "digest": {"cron": "0 8 * * 1-5", "timezone": "Europe/Berlin", "text": "x"},
                "pulse": {
                    "every": "15m",
                    "text": "x",
                    "deliver_to": "webhook.ops",
                    "tools": ["file_list"],
                },
            },
            heartbeat={"every": "30m"},
        )
    )
    pulse = config.agents["alpha"].schedules["pulse"]
    assert pulse.every == 900.0 and pulse.overlap == "skip" and pulse.catch_up == "none"


@pytest.mark.parametrize(
    ("schedule", "where", "says"),
    [
        ({"text": "x"}, "schedules.s", "either cron or every"),
        ({"cron": "* * * *", "text": "x"}, "schedules.s", "five fields"),
        (
            {"cron": "0 8 * * *", "timezone": "Mars/Base", "text": "x"},
            "schedules.s",
            "unknown timezone",
        ),
        ({"every": "1m", "jitter": "1m", "text": "x"}, "schedules.s", "jitter must be shorter"),
        ({"every": "1m", "text": ""}, "schedules.s.text", "at least 1"),
        (
            {"every": "1m", "text": "x", "tools": ["file_reed"]},
            "schedules.s.tools[0]",
            "did you mean",
        ),
        (
            {"every": "1m", "text": "x", "tools": ["schedule_create"]},
            "schedules.s.tools[0]",
            "does not make",
        ),
        (
            {"every": "1m", "text": "x", "deliver_to": "webhook.other"},
            "deliver_to",
            "not a channel agent",
        ),
        (
            {"every": "1m", "text": "x", "deliver_to": "webhook.quiet"},
            "deliver_to",
            "no callback_url",
        ),
        (
            {"every": "1m", "text": "x", "deliver_to": "cli.local"},
            "deliver_to",
            "nobody to deliver",
        ),
        ({"every": "1m", "text": "x", "session": "a:b"}, "session", "session name"),
        ({"every": "1m", "text": "x", "overlap": "run"}, "overlap", ""),
    ],
)
def test_bad_schedules(tmp_path: Path, schedule: dict[str, Any], where: str, says: str) -> None:
    found = errors(doc_with(tmp_path, {"s": schedule}))
    assert f"agents.alpha.{where}" in found or f"agents.alpha.schedules.s.{where}" in found, found
    assert says in found, found


@pytest.mark.parametrize("name", ["heartbeat", "reminder-1", "Bad", "9lives"])
def test_reserved_and_bad_names(tmp_path: Path, name: str) -> None:
    found = errors(doc_with(tmp_path, {name: {"every": "1h", "text": "x"}}))
    assert f"agents.alpha.schedules.{name}" in found, found


def test_a_heartbeat_delivers_like_a_schedule(tmp_path: Path) -> None:
    doc = doc_with(tmp_path, {}, heartbeat={"every": "30m", "deliver_to": "serial.none"})
    assert "agents.alpha.heartbeat.deliver_to" in errors(doc)


def test_reminder_tools_are_known_only_where_a_profile_grants_them(tmp_path: Path) -> None:
    doc = doc_with(tmp_path, {}, peer_tools=["schedule_create"])
    assert "unknown tool 'schedule_create'" in errors(doc)
    doc["risk_profiles"]["sup"]["reminders"] = {"max_per_agent": 4, "min_interval": "10m"}
    config = validate_document(doc)
    grant = config.risk_profiles["sup"].reminders
    assert grant is not None and grant.min_interval == 600.0
    doc["risk_profiles"]["sup"]["reminders"] = {"min_interval": "10s"}
    assert "risk_profiles.sup.reminders.min_interval" in errors(doc)
