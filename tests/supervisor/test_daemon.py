"""The daemon with real processes and real signals."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import PATIENCE
from tests.known_secrets import UNBOUND_SECRET
from tests.supervisor.harness import Daemon, agent_entry, make_config, process_alive, wait_gone
from zeroclaw.control import control_address, is_listening
from zeroclaw.supervisor._environment import ENV_ALLOWLIST

DaemonFactory = Callable[..., Daemon]


def three_agents(root: Path, **kwargs: object) -> dict[str, object]:
    return make_config(
        root,
        {"alpha": agent_entry(), "beta": agent_entry(), "gamma": agent_entry()},
        **kwargs,  # type: ignore[arg-type]
    )


def test_agents_run_isolated_processes(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start(SECRET_NOT_BOUND=UNBOUND_SECRET)
    status = daemon.status()
    assert [a["state"] for a in status["agents"]] == ["running"] * 3
    assert status["daemon"]["pid"] == daemon.proc.pid  # type: ignore[union-attr]
    for agent in status["agents"]:
        pid = agent["pid"]
        workspace = root / "state" / "agents" / agent["alias"] / "workspace"
        assert os.getpgid(pid) == pid, "own process group"
        assert os.getsid(pid) == pid, "own session"
        assert Path(f"/proc/{pid}/cwd").resolve() == workspace
        assert stat.S_IMODE(workspace.stat().st_mode) == 0o700
        umask = next(
            line
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("Umask")
        )
        assert umask.split()[1] == "0077"
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {e.split(b"=", 1)[0].decode() for e in environ if e}
        # /proc/<pid>/environ is the block the process was exec'd with, readable by the
        # agent itself: it must hold nothing beyond the allowlist.
        assert "NOTIFY_SOCKET" not in names and "SECRET_NOT_BOUND" not in names
        assert names <= ENV_ALLOWLIST | {"PYTHONPATH"}, names - ENV_ALLOWLIST
        assert UNBOUND_SECRET.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert stat.S_IMODE(daemon.runtime_dir.stat().st_mode) == 0o700
    # The control socket is an abstract name (ADR 0011): no file an agent could connect to.
    assert not (daemon.runtime_dir / "control.sock").exists()
    assert is_listening(control_address(daemon.runtime_dir))


def test_kill_9_agent_is_restarted_after_backoff(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    old = daemon.agent("beta")["pid"]
    killed_at = time.monotonic()
    os.kill(old, signal.SIGKILL)
    status = daemon.wait_for(
        lambda s: any(
            a["alias"] == "beta" and a["state"] == "running" and a["pid"] != old
            for a in s["agents"]
        )
    )
    elapsed = time.monotonic() - killed_at
    beta = next(a for a in status["agents"] if a["alias"] == "beta")
    assert beta["restarts"] == 1
    assert beta["last_exit"] == "killed by SIGKILL"
    assert elapsed >= 0.2, "restarted before backoff_initial_secs"
    assert "next_delay_secs" in daemon.log_text() and '"alias": "beta"' in daemon.log_text()
    others = {a["alias"]: a["restarts"] for a in status["agents"] if a["alias"] != "beta"}
    assert others == {"alpha": 0, "gamma": 0}


def test_agent_exiting_at_once_becomes_fatal(root: Path, daemons: DaemonFactory) -> None:
    doc = make_config(root, {"alpha": agent_entry(), "crashy": agent_entry()})
    daemon = daemons(doc).start()  # READY comes once every agent has settled
    crashy = daemon.agent("crashy")
    assert crashy["state"] == "fatal"
    assert crashy["last_exit"] == "exit code 3"
    assert crashy["restarts"] == 3  # max_restarts restarts, then the 4th failure is fatal
    assert daemon.agent("alpha")["state"] == "running"
    assert "max_restarts=3" in daemon.log_text()
    # An operator restart is the way out of fatal (here it fails again, honestly reported).
    result = daemon.cli("agents", "restart", "crashy", "--json")
    assert result.returncode == 1
    assert '"fatal"' in result.stdout


def test_stubborn_agent_and_grandchild_are_killed_after_grace(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(root, {"stubborn": agent_entry()}, grace=1.0)
    daemon = daemons(doc).start()
    pid = daemon.agent("stubborn")["pid"]
    marker = root / "state" / "agents" / "stubborn" / "workspace" / "grandchild.pid"
    grandchild = int(marker.read_text())
    assert process_alive(grandchild)
    started = time.monotonic()
    result = daemon.cli("agents", "stop", "stubborn")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 1.0, "SIGKILL came before the grace period"
    assert wait_gone([pid, grandchild], timeout=PATIENCE) == []
    assert "did not stop within 1s" in daemon.log_text()


def test_sigkill_of_daemon_takes_every_agent_and_restart_is_clean(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = three_agents(root)
    daemon = daemons(doc).start()
    pids = list(daemon.pids().values())
    assert len(pids) == 3
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit()
    assert wait_gone(pids, timeout=PATIENCE) == []
    # An abstract name dies with its process: nothing stale for the next daemon to trip on.
    assert not is_listening(control_address(daemon.runtime_dir))
    second = daemons(doc).start()
    assert [a["state"] for a in second.status()["agents"]] == ["running"] * 3


def test_sigterm_stops_agents_and_exits_0(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    pids = list(daemon.pids().values())
    daemon.signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0
    assert wait_gone(pids, timeout=PATIENCE) == []
    assert not is_listening(control_address(daemon.runtime_dir))
    daemon.wait_notification(lambda m: "STOPPING=1" in m, timeout=PATIENCE)


def test_sigint_also_stops_cleanly(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    pids = list(daemon.pids().values())
    daemon.signal(signal.SIGINT)
    assert daemon.wait_exit() == 0
    assert wait_gone(pids, timeout=PATIENCE) == []


def test_stop_command(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    result = daemon.cli("stop")
    assert result.returncode == 0, result.stderr
    assert "stopped" in result.stdout
    assert daemon.wait_exit() == 0


def test_notify_sequence_and_agents_never_see_notify_socket(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(three_agents(root)).start()
    ready = next(m for m in daemon.notifications if "READY=1" in m)
    assert "STATUS=3 agents: 3 running" in ready
    daemon.signal(signal.SIGHUP)
    daemon.wait_notification(lambda m: "RELOADING=1" in m, timeout=PATIENCE)
    daemon.wait_notification(lambda m: "READY=1" in m, timeout=PATIENCE)
    daemon.signal(signal.SIGTERM)
    daemon.wait_notification(lambda m: "STOPPING=1" in m, timeout=PATIENCE)
    daemon.wait_exit()
    kinds = [
        line.split("=")[0]
        for m in daemon.notifications
        for line in m.splitlines()
        if line.split("=")[0] in ("READY", "RELOADING", "STOPPING")
    ]
    first_ready = kinds.index("READY")
    assert kinds[first_ready:] == ["READY", "RELOADING", "READY", "STOPPING"]
    reloading = next(m for m in daemon.notifications if "RELOADING=1" in m)
    assert "MONOTONIC_USEC=" in reloading


def test_watchdog_pings(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start(WATCHDOG_USEC="400000")
    daemon.wait_notification(lambda m: m == "WATCHDOG=1", timeout=PATIENCE)
    daemon.wait_notification(lambda m: m == "WATCHDOG=1", timeout=PATIENCE)


def test_second_daemon_exits_1_naming_the_pid(root: Path, daemons: DaemonFactory) -> None:
    doc = three_agents(root)
    first = daemons(doc).start()
    result = first.cli("daemon", timeout=30)
    assert result.returncode == 1
    assert f"pid {first.proc.pid}" in result.stderr  # type: ignore[union-attr]
    assert first.status()["daemon"]["pid"] == first.proc.pid  # type: ignore[union-attr]


def test_no_daemon_exit_3(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root))
    for args in (
        ("status",),
        ("agents", "list"),
        ("reload",),
        ("stop",),
        ("agents", "start", "alpha"),
    ):
        result = daemon.cli(*args)
        assert result.returncode == 3, (args, result.stderr)
        assert "zeroclaw daemon" in result.stderr


def test_unknown_agent_exit_2(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    result = daemon.cli("agents", "restart", "zeta")
    assert result.returncode == 2
    assert "known: alpha, beta, gamma" in result.stderr


def test_operator_stop_start_restart(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    old = daemon.agent("alpha")["pid"]
    assert daemon.cli("agents", "stop", "alpha").returncode == 0
    assert daemon.agent("alpha")["state"] == "stopped"
    assert wait_gone([old], timeout=PATIENCE) == []
    assert daemon.cli("agents", "start", "alpha").returncode == 0
    new = daemon.agent("alpha")
    assert new["state"] == "running" and new["pid"] != old
    result = daemon.cli("agents", "restart", "alpha", "--json")
    assert result.returncode == 0
    assert daemon.agent("alpha")["pid"] not in (old, new["pid"])
    listing = daemon.cli("agents", "list")
    assert "alpha" in listing.stdout and "running" in listing.stdout


def test_on_demand_agent_starts_when_asked_and_stops_when_idle(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(
        root,
        {"alpha": agent_entry(), "lazy": agent_entry(runtime_profile="lazy")},
        extra_profiles={"lazy": {"activation": "on-demand", "idle_stop_secs": 3.0}},
    )
    daemon = daemons(doc).start()
    assert daemon.agent("lazy")["state"] == "stopped"
    started = daemon.cli("agents", "start", "lazy", "--json")
    assert started.returncode == 0, started.stderr
    agent = json.loads(started.stdout)["agent"]
    assert agent["state"] == "running"
    daemon.wait_for(
        lambda s: next(a for a in s["agents"] if a["alias"] == "lazy")["state"] == "stopped",
        timeout=15,
    )
    assert wait_gone([agent["pid"]], timeout=PATIENCE) == []
    assert "idle for 3s" in daemon.log_text()


# --------------------------------------------------------------------------- reload


def test_sighup_with_invalid_file_keeps_everything(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    before = daemon.pids()
    daemon.config_path.write_text(daemon.config_path.read_text() + "\n[agents.alpha]\nbogus = 1\n")
    daemon.signal(signal.SIGHUP)
    status = daemon.wait_for(lambda s: s["daemon"]["reload"]["state"] == "reload_failed")
    assert daemon.pids() == before
    errors = status["daemon"]["reload"]["errors"]
    assert errors and all(str(daemon.config_path) in e for e in errors)
    assert "reload refused" in daemon.log_text()
    text = daemon.cli("status")
    assert "reload_failed" in text.stdout
    result = daemon.cli("reload")
    assert result.returncode == 2 and "unchanged" in result.stderr


def _sighup_and_settle(daemon: Daemon) -> None:
    """SIGHUP, then wait for the daemon to say the reload is over (RELOADING=1, READY=1)."""
    while daemon.next_notification(0.05) is not None:
        pass  # an earlier reload's notifications must not stand for this one's
    daemon.signal(signal.SIGHUP)
    daemon.wait_notification(lambda m: "RELOADING=1" in m, timeout=PATIENCE)
    daemon.wait_notification(lambda m: "READY=1" in m, timeout=PATIENCE)


def test_sighup_with_a_truncated_file_keeps_every_agent(root: Path, daemons: DaemonFactory) -> None:
    """Finding 9: an empty file validated as a config with no agents, and stopped them all."""
    daemon = daemons(three_agents(root)).start()
    before = daemon.pids()
    good = daemon.config_path.read_text()
    daemon.config_path.write_text("")
    _sighup_and_settle(daemon)
    daemon.config_path.write_text(good)  # the CLI finds the daemon through the file
    status = daemon.status()
    assert status["daemon"]["reload"]["state"] == "reload_failed"
    assert any("no enabled agent" in e for e in status["daemon"]["reload"]["errors"])
    assert daemon.pids() == before
    assert [a["state"] for a in status["agents"]] == ["running"] * 3


def test_a_reload_that_moves_the_state_or_runtime_dir_needs_a_restart(
    root: Path, daemons: DaemonFactory
) -> None:
    """Finding 9: reported as a successful reload while the daemon kept its old paths."""
    doc = three_agents(root)
    daemon = daemons(doc).start()
    before = daemon.pids()
    kept = {"state_dir": str(root / "state"), "runtime_dir": str(root / "run")}

    def moved(key: str) -> dict[str, Any]:
        changed: dict[str, Any] = json.loads(json.dumps(doc))
        changed["daemon"][key] = str(root / f"moved-{key}")
        changed["agents"]["delta"] = agent_entry()  # a change that would otherwise apply
        return changed

    daemon.write_config(moved("state_dir"))
    result = daemon.cli("reload", "--json")
    assert result.returncode == 2, result.stdout
    reply = json.loads(result.stdout)
    assert reply["reload"] == "reload_failed"
    assert any("daemon.state_dir" in e and "needs a restart" in e for e in reply["errors"])
    assert "needs a restart" in daemon.cli("reload").stderr

    # A moved runtime dir also hides the daemon from the CLI: reload by signal instead.
    daemon.write_config(moved("runtime_dir"))
    _sighup_and_settle(daemon)
    daemon.write_config(doc)
    status = daemon.status()
    errors = status["daemon"]["reload"]["errors"]
    assert any("daemon.runtime_dir" in e and "needs a restart" in e for e in errors), errors
    assert {k: status["daemon"][k] for k in kept} == kept
    assert daemon.pids() == before  # delta was not added either
    assert not (root / "moved-runtime_dir").exists() and not (root / "moved-state_dir").exists()
    assert daemon.cli("reload").returncode == 0  # the file as it was applies again


def test_a_config_with_no_enabled_agent_does_not_start(root: Path, daemons: DaemonFactory) -> None:
    doc = three_agents(root)
    for entry in doc["agents"].values():  # type: ignore[attr-defined]
        entry["enabled"] = False
    daemon = daemons(doc)
    result = daemon.cli("daemon", timeout=30)
    assert result.returncode == 2, result.stderr
    assert "no enabled agent" in result.stderr and "Traceback" not in result.stderr
    daemon.config_path.write_text("")
    result = daemon.cli("daemon", timeout=30)
    assert result.returncode == 2 and "no enabled agent" in result.stderr
    # `config validate` accepts the file, and warns that the daemon will not run it.
    checked = daemon.cli("config", "validate")
    assert checked.returncode == 0 and "warning:" in checked.stderr
    assert "no enabled agent" in checked.stderr


def test_sighup_applies_only_what_changed(root: Path, daemons: DaemonFactory) -> None:
    agents = {n: agent_entry() for n in ("keep", "drop", "change")}
    doc = make_config(root, agents)
    daemon = daemons(doc).start()
    before = daemon.pids()
    new_agents = {
        "keep": agent_entry(),
        "change": agent_entry(description="now with a new description", delegates=["keep"]),
        "fresh": agent_entry(),
    }
    daemon.write_config(make_config(root, new_agents))
    daemon.signal(signal.SIGHUP)
    status = daemon.wait_for(
        lambda s: (
            s["daemon"]["reload"]["state"] == "ok"
            and {a["alias"]: a["state"] for a in s["agents"]}
            == {"keep": "running", "change": "running", "fresh": "running"}
        )
    )
    after = {a["alias"]: a["pid"] for a in status["agents"]}
    assert after["keep"] == before["keep"]
    assert after["change"] != before["change"]
    assert wait_gone([before["drop"], before["change"]], timeout=PATIENCE) == []
    assert status["daemon"]["reload"]["last_diff"] == {
        "added": ["fresh"],
        "removed": ["drop"],
        "changed": ["change"],
    }


def test_reload_command_reports_the_diff(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(three_agents(root)).start()
    doc = three_agents(root)
    del doc["agents"]["gamma"]  # type: ignore[attr-defined]
    daemon.write_config(doc)
    result = daemon.cli("reload", "--json")
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["diff"] == {"added": [], "removed": ["gamma"], "changed": []}
    assert [a["alias"] for a in daemon.status()["agents"]] == ["alpha", "beta"]


def test_reload_clears_fatal(root: Path, daemons: DaemonFactory) -> None:
    doc = make_config(root, {"alpha": agent_entry(), "crashy": agent_entry()})
    daemon = daemons(doc).start()
    assert daemon.agent("crashy")["state"] == "fatal"
    fatal_since = daemon.agent("crashy")["since"]
    daemon.signal(signal.SIGHUP)
    # The reload clears fatal: the agent is started again (and, still broken, fails again).
    daemon.wait_for(
        lambda s: next(a for a in s["agents"] if a["alias"] == "crashy")["since"] > fatal_since
    )
    assert "(operator start)" in daemon.log_text()


def test_on_demand_agent_is_not_stopped_mid_turn(root: Path, daemons: DaemonFactory) -> None:
    """Defect: an on-demand agent was stopped `idle_stop_secs` after it started, even in
    the middle of a turn. Held busy by a 5 s command it finishes the turn; idle, it stops."""
    doc = make_config(
        root,
        {"lazy": agent_entry(runtime_profile="lazy", risk_profile="free")},
        extra_profiles={"lazy": {"activation": "on-demand", "idle_stop_secs": 2.0}},
    )
    doc["risk_profiles"]["free"] = {
        "level": "supervised",
        "allowed_commands": ["sleep"],
        "require_approval_for_medium_risk": False,
    }
    daemon = daemons(doc, faults=False).start()
    result = daemon.cli("--agent", "lazy", "chat", "-m", "run sleep 5", "--json", timeout=60)
    assert result.returncode == 0, result.stderr + daemon.log()
    turn = json.loads(result.stdout)
    assert turn["tool_calls"][0]["ok"] is True, turn
    assert "idle for 2s" not in daemon.log_text()  # not stopped while the command ran
    pid = daemon.agent("lazy")["pid"]
    daemon.wait_for(
        lambda s: next(a for a in s["agents"] if a["alias"] == "lazy")["state"] == "stopped",
        timeout=15,
    )
    assert wait_gone([pid], timeout=PATIENCE) == []
    assert "idle for 2s" in daemon.log_text()


def test_agent_that_cannot_start_is_fatal_at_once_with_its_reason(
    root: Path, daemons: DaemonFactory
) -> None:
    """Defect: exit 78 (a provider key variable unset) went through the whole backoff before
    it was fatal, and the reason was only in the log."""
    doc = make_config(
        root,
        {"alpha": agent_entry(), "keyless": agent_entry(model_provider="openai.remote")},
        restart={
            "max_restarts": 5,
            "window_secs": 60,
            "backoff_initial_secs": 5,
            "backoff_max_secs": 30,
            "stable_after_secs": 1,
        },
    )
    doc["providers"]["openai"] = {
        "remote": {
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "api_key_env": "ZC_TEST_KEY_THAT_IS_NOT_SET",
        }
    }
    assert "ZC_TEST_KEY_THAT_IS_NOT_SET" not in os.environ
    daemon = daemons(doc, faults=False).start()  # READY waits for the fatal agent to settle
    agent = daemon.agent("keyless")
    assert agent["state"] == "fatal", agent
    assert agent["restarts"] == 0  # no backoff was spent on it
    assert "ZC_TEST_KEY_THAT_IS_NOT_SET" in (agent["last_error"] or ""), agent
    text = daemon.cli("status")
    assert "ZC_TEST_KEY_THAT_IS_NOT_SET" in text.stdout, text.stdout
    assert daemon.agent("alpha")["state"] == "running"


def test_status_shows_the_last_error_line_of_a_crashing_agent(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(make_config(root, {"raiser": agent_entry()})).start()
    agent = daemon.agent("raiser")
    assert agent["state"] == "fatal" and agent["last_exit"] == "exit code 70"
    assert agent["last_error"] == "crashed: RuntimeError: the disk is on fire"
    assert "raiser: crashed: RuntimeError: the disk is on fire" in daemon.cli("status").stdout
