"""Small supervisor parts with real sockets and files: sd_notify, the pid lock, specs."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, VALID_DOC
from zeroclaw.config import validate_document
from zeroclaw.supervisor._environment import agent_environment, zygote_environment
from zeroclaw.supervisor._lock import AlreadyRunning, PidLock
from zeroclaw.supervisor._notify import Notifier
from zeroclaw.supervisor._spec import build_specs, diff_specs


def test_notifier_sends_datagrams(tmp_path: Path) -> None:
    path = tmp_path / "n.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    server.settimeout(5)
    notifier = Notifier({"NOTIFY_SOCKET": str(path)})
    notifier.ready("3 agents")
    notifier.reloading()
    notifier.stopping()
    assert server.recv(100) == b"READY=1\nSTATUS=3 agents"
    reloading = server.recv(100).decode().splitlines()
    assert reloading[0] == "RELOADING=1" and reloading[1].startswith("MONOTONIC_USEC=")
    assert server.recv(100) == b"STOPPING=1"
    notifier.close()


def test_notifier_abstract_socket_and_absent() -> None:
    name = f"zc-test-{os.getpid()}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind("\0" + name)
    server.settimeout(5)
    Notifier({"NOTIFY_SOCKET": "@" + name}).watchdog()
    assert server.recv(100) == b"WATCHDOG=1"
    quiet = Notifier({})
    assert not quiet.enabled and quiet.send("READY=1") is False


def test_notifier_survives_a_vanished_socket(tmp_path: Path) -> None:
    notifier = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert notifier.send("READY=1") is False


@pytest.mark.parametrize(
    ("env", "interval"),
    [
        ({"WATCHDOG_USEC": "2000000"}, 1.0),
        ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}, 1.0),
        ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "x"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval(env: dict[str, str], interval: float | None) -> None:
    assert Notifier(env).watchdog_interval == interval


def test_pid_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    path = tmp_path / "zeroclaw.lock"
    first = PidLock(path)
    first.acquire()
    assert path.read_text().strip() == str(os.getpid())
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from zeroclaw.supervisor._lock import PidLock, AlreadyRunning\n"
        "try:\n"
        "    PidLock(Path(sys.argv[1])).acquire()\n"
        "except AlreadyRunning as e:\n"
        "    print(e.pid); sys.exit(7)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 7 and result.stdout.strip() == str(os.getpid())
    first.release()
    second = PidLock(path)
    second.acquire()  # a released (or dead holder's) lock is simply taken over
    second.release()
    assert AlreadyRunning(123, path).pid == 123


def _specs(doc: dict[str, object]) -> dict[str, object]:
    return build_specs(validate_document(doc, base_dir=Path("/srv"), env={}), {}, Path("/srv"))  # type: ignore[return-value]


def test_spec_diff_sees_only_effective_changes() -> None:
    import copy

    old = _specs(copy.deepcopy(VALID_DOC))
    doc = copy.deepcopy(VALID_DOC)
    doc["runtime_profiles"]["default"]["restart"] = {"max_restarts": 9}  # daemon-side only
    doc["peer_groups"]["ops"]["external_peers"] = ["*"]  # router-side only
    assert diff_specs(old, _specs(doc)).changed == ()  # type: ignore[arg-type]
    doc["risk_profiles"]["sup"]["allowed_commands"] = ["ls"]  # both agents use "sup"
    doc["agents"]["gamma"] = {"enabled": False}
    diff = diff_specs(old, _specs(doc))  # type: ignore[arg-type]
    assert diff.changed == ("alpha", "beta") and diff.added == () and diff.removed == ()
    doc["agents"]["beta"]["enabled"] = False
    assert diff_specs(old, _specs(doc)).removed == ("beta",)  # type: ignore[arg-type]


def test_agent_environment_is_allowlisted_plus_own_secret() -> None:
    import copy

    doc = copy.deepcopy(VALID_DOC)
    doc["providers"]["openai"] = {"cloud": {"model": "m", "api_key_env": "ALPHA_KEY"}}
    doc["agents"]["alpha"]["model_provider"] = "openai.cloud"
    specs = _specs(doc)
    daemon_env = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "ALPHA_KEY": "k1",
        "BETA_KEY": "k2",
        "NOTIFY_SOCKET": "/run/x",
        "WATCHDOG_USEC": "1",
        "PYTHONPATH": "/p",
        "AWS_SECRET_ACCESS_KEY": "nope",
    }
    alpha = agent_environment(specs["alpha"], daemon_env)  # type: ignore[arg-type]
    beta = agent_environment(specs["beta"], daemon_env)  # type: ignore[arg-type]
    assert alpha == {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "ALPHA_KEY": "k1",
        "ZEROCLAW_AGENT": "alpha",
    }
    assert "ALPHA_KEY" not in beta and beta["ZEROCLAW_AGENT"] == "beta"
    assert zygote_environment(daemon_env) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "PYTHONPATH": "/p",
    }


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    unit = (REPO / "systemd" / "zeroclaw.service").read_text()
    for directive in (
        "Type=notify",
        "KillMode=mixed",
        "Restart=on-failure",
        "RuntimeDirectory=zeroclaw",
        "StateDirectory=zeroclaw",
        # Through the CLI, so an invalid config fails the reload visibly (ADR 0028).
        "ExecReload=+/usr/local/bin/zeroclaw --config /etc/zeroclaw/zeroclaw.toml reload",
        "NoNewPrivileges=yes",
    ):
        assert directive in unit
    stop = int(
        next(line for line in unit.splitlines() if line.startswith("TimeoutStopSec=")).split("=")[1]
    )
    assert stop > 10, "TimeoutStopSec must exceed the default shutdown_grace_secs"
    # verify wants ExecStart to exist: point it at the installed console script.
    script = Path(sys.executable).parent / "zeroclaw"
    local = tmp_path / "zeroclaw.service"
    local.write_text(unit.replace("/usr/local/bin/zeroclaw", str(script)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(local)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "zeroclaw.service" not in result.stderr, result.stderr


def test_reload_refusals_name_a_moved_dir_and_an_empty_file() -> None:
    import copy

    from zeroclaw.supervisor._reload import reload_refusals

    running = validate_document(copy.deepcopy(VALID_DOC), base_dir=Path("/srv"), env={})
    config_path = Path("/srv/zeroclaw.toml")
    env = {"HOOK_SECRET": "k"}  # the bound webhook's signing secret
    assert reload_refusals(running, running, env, config_path) == []
    doc = copy.deepcopy(VALID_DOC)
    doc["daemon"]["runtime_dir"] = "run2"
    moved = validate_document(doc, base_dir=Path("/srv"), env={})
    [issue] = reload_refusals(running, moved, env, config_path)
    assert issue.key == "daemon.runtime_dir" and "needs a restart" in issue.message
    empty = validate_document({}, base_dir=Path("/srv"), env={"HOME": "/home/op"})
    keys = [i.key for i in reload_refusals(running, empty, {"HOME": "/home/op"}, config_path)]
    assert keys == ["agents", "daemon.state_dir", "daemon.runtime_dir"]
