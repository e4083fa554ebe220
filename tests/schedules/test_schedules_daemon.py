"""Scheduled turns through a real daemon: `every = "1s"` schedules delivering to a loopback
webhook receiver (its own process, signed POSTs) and to a serial device (a real pty); the
operator's `zeroclaw schedules` commands; a daemon SIGKILLed in the middle of a run (the
run is reported interrupted and never repeated); runs whose turn fails (a provider that is
not there), hangs (an approval nobody answers, cut by the schedule's timeout) or meets its
agent's budget (its runtime profile's max_actions_per_hour; its budget's turns_per_hour)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.channels.test_channels_daemon import free_port
from tests.conftest import PATIENCE, REPO
from tests.known_secrets import HOOK_SECRET
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.channels import sign

DaemonFactory = Callable[..., Daemon]


class Receiver:
    """The loopback receiver process: what it got, one JSON line per POST."""

    def __init__(self, root: Path) -> None:
        self.path = root / "received.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.schedules.receiver", str(self.path)],
            stdout=subprocess.PIPE,
            cwd=REPO,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def got(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.got()]

    def wait(
        self, count: int, what: Callable[[dict[str, Any]], bool] = lambda b: True
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            found = [b for b in self.bodies() if what(b)]
            if len(found) >= count:
                return found
            time.sleep(0.1)
        raise AssertionError(f"{count} deliveries not received: {self.bodies()}")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def receiver(root: Path) -> Iterator[Receiver]:
    made = Receiver(root)
    yield made
    made.close()


def scheduled_config(
    root: Path, receiver_port: int, schedules: dict[str, Any], **agent: Any
) -> dict[str, Any]:
    doc = make_config(
        root,
        {"alpha": agent_entry(channels=["cli.local", "webhook.ops"], schedules=schedules, **agent)},
    )
    doc["channels"]["webhook"] = {
        "ops": {
            "listen": f"127.0.0.1:{free_port()}",
            "secret_env": "HOOK_SECRET",
            "callback_url": f"http://127.0.0.1:{receiver_port}/runs",
            "callback_max_attempts": 2,
        }
    }
    return doc


def cli_json(daemon: Daemon, *args: str) -> dict[str, Any]:
    done = daemon.cli(*args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    value = json.loads(done.stdout)
    assert value["schema_version"] and value.get("ok", True) is True
    return value  # type: ignore[no-any-return]


def events(daemon: Daemon, kind: str) -> list[dict[str, Any]]:
    done = daemon.cli("events", "--kind", kind, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["event"] for line in done.stdout.splitlines() if line.strip()]


def wait_events(
    daemon: Daemon, kind: str, match: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        for event in events(daemon, kind):
            if match(event):
                return event
        time.sleep(0.2)
    raise AssertionError(f"no {kind} event matched: {events(daemon, 'schedule')[-20:]}")


def test_every_second_to_a_webhook_signed_with_the_operators_commands(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    doc = scheduled_config(
        root,
        receiver.port,
        {
            "tick": {"every": "1s", "text": "remember: tick", "deliver_to": "webhook.ops"},
            "daily": {"cron": "0 8 * * 1-5", "timezone": "Europe/Berlin", "text": "standup"},
        },
    )
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    got = receiver.wait(3)
    for record in receiver.got():
        headers = record["headers"]
        signed = sign(
            HOOK_SECRET.encode(), headers["x-zeroclaw-timestamp"], record["body"].encode()
        )
        assert headers["x-zeroclaw-signature"] == signed
    assert {b["schedule"] for b in got} == {"alpha.tick"}
    runs = [b["run_id"] for b in got]
    assert len(runs) == len(set(runs)), runs  # each run delivered once
    assert all(b["status"] == 200 and b["agent"] == "alpha" for b in got), got
    # A schedule's turn has none of the agent's tools unless its schedule lists them.
    assert got[0]["tool_calls"][0]["error_code"] == "tool_not_granted"

    listed = cli_json(daemon, "schedules", "list")["schedules"]
    assert [(s["agent"], s["name"], s["kind"]) for s in listed] == [
        ("alpha", "daily", "config"),
        ("alpha", "tick", "config"),
    ]
    daily = cli_json(daemon, "schedules", "show", "daily")
    assert (
        daily["trigger"] == "cron 0 8 * * 1-5 in Europe/Berlin" and daily["next_fire"] > time.time()
    )
    assert daily["session"] == "default" and daily["tools"] == []
    status = daemon.status()
    assert status["schedules"][0]["agent"] == "alpha"
    assert "schedule  alpha." in daemon.cli("status").stdout

    paused = cli_json(daemon, "schedules", "pause", "alpha.tick")
    assert paused["paused"] is True and "next_fire" not in paused
    before = len(receiver.got())
    ran = cli_json(daemon, "schedules", "run", "alpha.tick")  # by hand, while paused
    assert ran["run_id"].startswith("alpha.tick@run-")
    receiver.wait(1, lambda b: b["run_id"] == ran["run_id"])
    assert daemon.cli("schedules", "show", "alpha.nope").returncode == 1
    unknown = daemon.cli("schedules", "run", "nope", "--json")
    assert (
        unknown.returncode == 1
        and json.loads(unknown.stdout)["error"]["code"] == "unknown_schedule"
    )
    resumed = cli_json(daemon, "schedules", "resume", "tick")
    assert resumed["paused"] is False
    receiver.wait(before + 2)

    # Its turns' session is its own, inside the schedule's origin.
    sessions = cli_json(daemon, "sessions", "list", "--agent", "alpha")["sessions"]
    assert "schedule:alpha.tick" in {s["who"] for s in sessions}, sessions
    fired = wait_events(daemon, "schedule.fired", lambda e: e["schedule"] == "alpha.tick")
    assert fired["run_id"].startswith("alpha.tick@")
    metrics = daemon.cli("metrics").stdout
    assert 'zeroclaw_schedule_runs_total{agent="alpha",outcome="delivered"}' in metrics
    assert 'zeroclaw_schedules{agent="alpha"} 2.0' in metrics


def test_a_reload_takes_effect_and_a_removed_schedule_stops(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    tick = {"every": "1s", "text": "first", "deliver_to": "webhook.ops"}
    daemon = daemons(scheduled_config(root, receiver.port, {"tick": tick}), faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    receiver.wait(1)
    daemon.write_config(
        scheduled_config(root, receiver.port, {"tick": {**tick, "text": "remember: second"}})
    )
    assert daemon.cli("reload").returncode == 0
    changed = receiver.wait(
        1, lambda b: b.get("tool_calls") and b["tool_calls"][0]["name"] == "memory_store"
    )
    assert changed[0]["schedule"] == "alpha.tick"
    daemon.write_config(scheduled_config(root, receiver.port, {}))
    assert daemon.cli("reload").returncode == 0
    assert cli_json(daemon, "schedules", "list")["schedules"] == []


def test_a_reload_that_adds_the_first_schedule_starts_the_scheduler(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    """Without schedules the daemon runs no scheduler (ADR 0067) and answers as one with
    none; the reload that adds the first one starts it."""
    daemon = daemons(scheduled_config(root, receiver.port, {}), faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    assert cli_json(daemon, "schedules", "list")["schedules"] == []
    shown = daemon.cli("schedules", "show", "tick")
    assert shown.returncode == 1 and "no schedule named 'tick'" in shown.stderr, shown.stderr
    tick = {"every": "1s", "text": "first", "deliver_to": "webhook.ops"}
    daemon.write_config(scheduled_config(root, receiver.port, {"tick": tick}))
    assert daemon.cli("reload").returncode == 0
    assert receiver.wait(1)[0]["schedule"] == "alpha.tick"
    listed = cli_json(daemon, "schedules", "list")["schedules"]
    assert [(s["agent"], s["name"]) for s in listed] == [("alpha", "tick")]


def test_every_second_to_a_serial_device(root: Path, daemons: DaemonFactory) -> None:
    master, slave = os.openpty()
    port = root / "tty-sched"
    port.symlink_to(os.ttyname(slave))
    doc = make_config(
        root,
        {
            "alpha": agent_entry(
                channels=["cli.local", "serial.bench"],
                schedules={"tick": {"every": "1s", "text": "hello", "deliver_to": "serial.bench"}},
            )
        },
    )
    doc["channels"]["serial"] = {"bench": {"port": str(port)}}
    daemon = daemons(doc, faults=False)
    daemon.start()
    lines: list[str] = []
    buffer = b""
    deadline = time.monotonic() + PATIENCE
    try:
        os.set_blocking(master, False)
        while len(lines) < 2 and time.monotonic() < deadline:
            try:
                buffer += os.read(master, 4096)
            except BlockingIOError:
                time.sleep(0.05)
                continue
            *done, buffer = buffer.split(b"\n")
            lines += [line.decode().rstrip("\r") for line in done]
    finally:
        os.close(master)
        os.close(slave)
    assert len(lines) >= 2, daemon.log()
    assert all(line.startswith("[alpha.tick] ") for line in lines), lines


def test_a_daemon_killed_mid_run_reports_it_once_and_never_runs_it_again(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    # Its turn waits for the operator's approval (a write, supervised): a run in progress.
    slow = {
        "every": "2s",
        "text": "write notes.txt: hello",
        "tools": ["file_write"],
        "deliver_to": "webhook.ops",
        "catch_up": "latest",
        "timeout": "60s",
    }
    doc = scheduled_config(root, receiver.port, {"slow": slow})
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    running = daemon.wait_for(lambda s: True) and wait_running(daemon)
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    failed = wait_events(
        daemon,
        "schedule.failed",
        lambda e: e["run_id"] == running and e["code"] == "daemon_restarted",
    )
    assert failed["schedule"] == "alpha.slow"
    # The next run starts (a new slot); the interrupted one is never fired again.
    wait_events(daemon, "schedule.fired", lambda e: e["run_id"] != running)
    fired = [e["run_id"] for e in events(daemon, "schedule.fired")]
    assert running not in fired and len(fired) == len(set(fired))
    shown = cli_json(daemon, "schedules", "show", "alpha.slow")
    assert shown["running"] != running


def wait_running(daemon: Daemon) -> str:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        shown = cli_json(daemon, "schedules", "show", "alpha.slow")
        # recorded, and its turn waits for an approval in the operator's queue
        if shown.get("running") and daemon.status()["approvals"]:
            return str(shown["running"])
        time.sleep(0.2)
    raise AssertionError(daemon.log())


def test_runs_that_fail_hang_or_meet_their_budget(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    dead = free_port()  # nothing listens there: the provider fails at once
    doc = scheduled_config(
        root,
        receiver.port,
        {
            "hang": {
                "every": "1s",
                "text": "write notes.txt: hi",
                "tools": ["file_write"],
                "timeout": "1s",
            },
        },
    )
    # An agent whose runtime profile allows one tool action an hour.
    doc["runtime_profiles"]["budget"] = {"max_actions_per_hour": 1}
    doc["agents"]["thrifty"] = agent_entry(
        channels=["cli.local", "webhook.ops"],
        runtime_profile="budget",
        schedules={
            "budget": {
                "every": "1s",
                "text": "list",
                "tools": ["file_list"],
                "deliver_to": "webhook.ops",
            }
        },
    )
    # An agent that may start one turn an hour (ADR 0057): its second run is refused.
    doc["agents"]["capped"] = agent_entry(
        budget={"turns_per_hour": 1}, schedules={"often": {"every": "1s", "text": "hi"}}
    )
    doc["providers"]["openai"] = {"gone": {"base_url": f"http://127.0.0.1:{dead}/v1", "model": "m"}}
    doc["agents"]["broken"] = agent_entry(
        model_provider="openai.gone", schedules={"fails": {"every": "1s", "text": "hi"}}
    )
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    wait_events(
        daemon,
        "schedule.failed",
        lambda e: e["schedule"] == "broken.fails" and e["code"] == "turn_error",
    )
    wait_events(
        daemon,
        "schedule.failed",
        lambda e: e["schedule"] == "alpha.hang" and e["code"] == "timeout",
    )
    refused = wait_events(
        daemon,
        "schedule.failed",
        lambda e: e["schedule"] == "capped.often" and e["code"] == "budget_exceeded",
    )
    assert "turns_per_hour" in refused["detail"], refused
    budget = receiver.wait(2, lambda b: b["schedule"] == "thrifty.budget" and "tool_calls" in b)
    codes = [b["tool_calls"][0].get("error_code") for b in budget]
    assert codes[0] is None and "rate_limited" in codes, budget  # the agent's hourly budget
    assert daemon.proc is not None and daemon.proc.poll() is None
    shown = cli_json(daemon, "schedules", "show", "broken.fails")
    assert shown["last_run"]["outcome"] in {"turn_error", "delivered"} or shown["running"]


def skips(daemon: Daemon) -> list[dict[str, Any]]:
    return [
        e
        for e in events(daemon, "schedule.skipped")
        if e["schedule"] == "alpha.heartbeat" and e["reason"] == "nothing_open"
    ]


def wait_skips(daemon: Daemon, count: int) -> None:
    deadline = time.monotonic() + PATIENCE
    while len(skips(daemon)) < count:
        assert time.monotonic() < deadline, daemon.log()
        time.sleep(0.2)


def test_a_heartbeat_runs_on_open_items_only(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    doc = scheduled_config(root, receiver.port, {})
    doc["agents"]["alpha"]["heartbeat"] = {"every": "1s", "deliver_to": "webhook.ops"}
    workspace = root / "alpha-ws"
    workspace.mkdir()
    doc["agents"]["alpha"]["workspace"] = {"path": str(workspace)}
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    # No HEARTBEAT.md: nothing runs.
    wait_events(
        daemon,
        "schedule.skipped",
        lambda e: e["schedule"] == "alpha.heartbeat" and e["reason"] == "nothing_open",
    )
    assert receiver.bodies() == []
    # An empty file, then one whose items are all checked off: nothing runs either.
    for content in ("", "# todo\n- [x] done\n"):
        (workspace / "HEARTBEAT.md").write_text(content)
        # Two more skips: at least one looked at the file as written.
        wait_skips(daemon, len(skips(daemon)) + 2)
        assert receiver.bodies() == []
    (workspace / "HEARTBEAT.md").write_text("# todo\n- [x] done\n- [ ] water the plants\n")
    [ran] = receiver.wait(1, lambda b: b["schedule"] == "alpha.heartbeat")[:1]
    assert ran["status"] == 200 and ran["agent"] == "alpha"
    sessions = cli_json(daemon, "sessions", "list", "--agent", "alpha")["sessions"]
    assert "schedule:alpha.heartbeat" in {s["who"] for s in sessions}


def test_an_on_demand_agent_is_started_for_its_schedule_and_idles_out(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    doc = scheduled_config(
        root,
        receiver.port,
        # hourly: no run of its own in this test, only the operator's `run`
        {"tick": {"every": "1h", "text": "hello", "deliver_to": "webhook.ops"}},
        runtime_profile="lazy",
    )
    doc["runtime_profiles"]["lazy"] = {"activation": "on-demand", "idle_stop_secs": 2.0}
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    assert daemon.agent("alpha")["state"] == "stopped"
    ran = cli_json(daemon, "schedules", "run", "alpha.tick")
    [first] = receiver.wait(1, lambda b: b["run_id"] == ran["run_id"])
    assert first["status"] == 200 and first["agent"] == "alpha", first
    # Started for the run, then stopped once idle for idle_stop_secs.
    daemon.wait_for(
        lambda s: next(a for a in s["agents"] if a["alias"] == "alpha")["state"] == "stopped"
    )
    assert "idle for 2s" in daemon.log_text()
    shown = cli_json(daemon, "schedules", "show", "alpha.tick")
    assert shown["last_run"]["outcome"] == "delivered" and "running" not in shown


def test_runs_missed_while_the_daemon_was_down_are_reported_and_none_runs_twice(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    """Down for a few slots: those before the latest are reported missed (`down`), the
    latest, under a minute late, runs on time whatever catch_up says. (Catching up one
    more than a minute late, or not, is the scheduler's, tested on a fake clock.)"""
    doc = scheduled_config(
        root,
        receiver.port,
        {
            "late": {
                "every": "2s",
                "text": "hello",
                "deliver_to": "webhook.ops",
                "catch_up": "latest",
            },
            "gone": {"every": "2s", "text": "hello", "catch_up": "none"},
        },
    )
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    receiver.wait(1, lambda b: b["schedule"] == "alpha.late")
    wait_events(daemon, "schedule.fired", lambda e: e["schedule"] == "alpha.gone")
    due = max(cli_json(daemon, "schedules", "show", name)["next_fire"] for name in ("late", "gone"))
    daemon.signal(signal.SIGTERM)
    daemon.wait_exit()
    # Down until three of each schedule's times have passed.
    while time.time() < due + 4.5:
        time.sleep(0.1)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    after = {}
    for name in ("alpha.late", "alpha.gone"):
        missed = wait_events(
            daemon,
            "schedule.missed",
            lambda e, name=name: e["schedule"] == name and e["reason"] == "down",
        )
        assert missed["count"] >= 2 and missed["latest"] >= due, missed
        latest = missed["latest"]
        after[name] = wait_events(
            daemon,
            "schedule.fired",
            lambda e, name=name, latest=latest: e["schedule"] == name and e["slot"] > latest,
        )
        assert not after[name].get("late"), after
    receiver.wait(1, lambda b: b["run_id"] == after["alpha.late"]["run_id"])
    fired = [e["run_id"] for e in events(daemon, "schedule.fired")]
    assert len(fired) == len(set(fired)), fired  # across the restart, no run twice


def test_a_reload_that_removes_a_schedule_cancels_its_queued_run(
    root: Path, daemons: DaemonFactory, receiver: Receiver
) -> None:
    # Its run waits for the operator's approval (a write, supervised): the next one queues.
    slow = {
        "every": "1s",
        "text": "write notes.txt: hello",
        "tools": ["file_write"],
        "overlap": "queue",
        "timeout": "60s",
    }
    daemon = daemons(scheduled_config(root, receiver.port, {"slow": slow}), faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    deadline = time.monotonic() + PATIENCE
    while not (shown := cli_json(daemon, "schedules", "show", "alpha.slow")).get("queued"):
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)
    daemon.write_config(scheduled_config(root, receiver.port, {}))
    assert daemon.cli("reload").returncode == 0
    cancelled = wait_events(
        daemon,
        "schedule.skipped",
        lambda e: e["schedule"] == "alpha.slow" and e["reason"] == "cancelled",
    )
    assert cancelled["slot"] == shown["queued"]
    assert cli_json(daemon, "schedules", "list")["schedules"] == []
    fired = [e for e in events(daemon, "schedule.fired") if e["schedule"] == "alpha.slow"]
    assert len(fired) == 1, fired  # the queued run never started
