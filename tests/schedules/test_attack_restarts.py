"""Reminders attacked across a kill -9 of the daemon, through a real daemon: a reminder whose
run is in progress (its delivery hangs on a callback receiver that never answers) when it
is deleted, or when the daemon dies. What must hold: a deleted reminder stays deleted, and a
one-shot whose run the daemon's death cut is reported once and gone, not kept forever."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.channels.test_channels_daemon import free_port
from tests.conftest import PATIENCE
from tests.known_secrets import HOOK_SECRET
from tests.schedules.test_schedules_daemon import cli_json, wait_events
from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A loopback port that takes connections and never answers: a callback POSTed there
    waits for its timeout, so the run that delivers it stays in progress."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def config(root: Path, callback_port: int) -> dict[str, Any]:
    doc = make_config(
        root,
        {"alpha": agent_entry(risk_profile="keeper", channels=["cli.local", "webhook.ops"])},
    )
    doc["risk_profiles"]["keeper"] = {
        "level": "full",
        "reminders": {"max_per_agent": 4, "min_interval": "1m"},
    }
    doc["channels"]["webhook"] = {
        "ops": {
            "listen": f"127.0.0.1:{free_port()}",
            "secret_env": "HOOK_SECRET",
            "callback_url": f"http://127.0.0.1:{callback_port}/never",
            "callback_max_attempts": 3,
        }
    }
    return doc


def made(daemon: Daemon, text: str) -> dict[str, Any]:
    done = daemon.cli("--agent", "alpha", "chat", "-m", text, "--json")
    assert done.stdout, done.stderr
    [call] = json.loads(done.stdout)["tool_calls"]
    assert call["ok"], call
    return call  # type: ignore[no-any-return]


def wait_running(daemon: Daemon, key: str) -> str:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        shown = cli_json(daemon, "schedules", "show", key)
        if shown.get("running"):
            return str(shown["running"])
        time.sleep(0.2)
    raise AssertionError(daemon.log())


def killed_and_restarted(daemon: Daemon) -> None:
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    daemon.start(HOOK_SECRET=HOOK_SECRET)


def reminders(daemon: Daemon) -> list[str]:
    listed = cli_json(daemon, "schedules", "list", "--agent", "alpha")["schedules"]
    return sorted(s["name"] for s in listed if s["kind"] == "reminder")


def test_a_reminder_deleted_while_it_runs_stays_deleted_after_a_kill(
    root: Path, daemons: DaemonFactory, black_hole: int
) -> None:
    daemon = daemons(config(root, black_hole), faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    made(daemon, "remind every 1h to webhook.ops: ping")
    cli_json(daemon, "schedules", "run", "alpha.reminder-1")  # the operator runs it now
    running = wait_running(daemon, "alpha.reminder-1")
    made(daemon, "unremind reminder-1")  # answered ok: it is deleted
    assert reminders(daemon) == []
    killed_and_restarted(daemon)
    wait_events(
        daemon,
        "schedule.failed",
        lambda e: e["run_id"] == running and e["code"] == "daemon_restarted",
    )
    assert reminders(daemon) == [], "a deleted reminder came back after a restart"


def test_a_one_shot_cut_by_a_kill_is_reported_once_and_gone(
    root: Path, daemons: DaemonFactory, black_hole: int
) -> None:
    daemon = daemons(config(root, black_hole), faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    made(daemon, "remind in 1s to webhook.ops: once")
    running = wait_running(daemon, "alpha.reminder-1")
    killed_and_restarted(daemon)
    wait_events(
        daemon,
        "schedule.failed",
        lambda e: e["run_id"] == running and e["code"] == "daemon_restarted",
    )
    # Not run again, and not kept (listed forever, never due, held against the limit).
    assert reminders(daemon) == [], "a one-shot that ran is kept after a restart"
