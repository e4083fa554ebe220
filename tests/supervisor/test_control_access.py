"""Only the operator reaches the control socket (issue 10, finding 1; ADR 0011).

Agents run as the operator's uid, so the uid check alone let a supervised agent export other
agents' memory through the control socket. Now the kernel keeps a Landlock-confined agent
(and all it starts) off the socket, and the daemon refuses any peer below the zygote.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.bus.test_router import plan, result_of
from tests.conftest import PATIENCE, REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.control import control_address, printable
from zeroclaw.control._client import server_refusal
from zeroclaw.policy import abi_version

DaemonFactory = Callable[..., Daemon]
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"  # the venv's interpreter lives where nobody may not read


def test_nothing_inside_an_agent_sandbox_gets_an_answer(root: Path, daemons: DaemonFactory) -> None:
    address = printable(control_address(root / "run"))
    cli = [sys.executable, "-m", "zeroclaw", "--config", str(root / "zeroclaw.toml"), "status"]
    plan(root, "caged", do="ctlprobe", address=address)
    plan(root, "loose", do="ctlprobe", address=address, cli=cli)
    doc = make_config(root, {"caged": agent_entry(), "loose": agent_entry(risk_profile="bare")})
    doc["risk_profiles"]["bare"] = {"level": "supervised", "sandbox": "none"}
    daemon = daemons(doc).start()

    try:
        loose = result_of(root, "loose")
    except AssertionError:
        raise AssertionError(daemon.log()) from None
    if abi_version() >= 6:
        # sandbox = "none" drops the file rules, not the abstract-socket scope (ADR 0043).
        assert (loose["agent"], loose["child"], loose["orphan"]) == ("EPERM",) * 3, loose
        assert loose["cli"]["code"] != 0, loose["cli"]
    else:
        # No scope: the daemon tells agents apart by ancestry, and refuses the agent, a
        # child it started, and an orphaned grandchild the zygote adopted.
        assert (loose["agent"], loose["child"], loose["orphan"]) == ("forbidden",) * 3, loose
        # The operator's CLI run from inside the agent gets a sentence and exit 3.
        assert loose["cli"]["code"] == 3, loose["cli"]
        assert "refused this connection (forbidden)" in loose["cli"]["stderr"]
    assert "Traceback" not in loose["cli"]["stderr"]

    caged = result_of(root, "caged")
    if abi_version() >= 6:
        # With Landlock's abstract-socket scope the kernel refuses the connect() itself.
        assert (caged["agent"], caged["child"], caged["orphan"]) == ("EPERM",) * 3, caged
    else:
        assert (caged["agent"], caged["child"], caged["orphan"]) == ("forbidden",) * 3, caged

    # Agents are not dumpable: no process of the same uid may ptrace them or read their
    # /proc/<pid>/environ.
    assert caged["dumpable"] == 0 and loose["dumpable"] == 0
    # And the operator, outside every agent, is still served.
    assert {a["alias"]: a["state"] for a in daemon.status()["agents"]} == {
        "caged": "running",
        "loose": "running",
    }
    if abi_version() < 6:  # loose's three probes and its CLI; under ABI 6 none reached it
        assert daemon.status()["control"]["refused_peers"] >= 4
        said = "agents, their processes and what the daemon runs for them may not"
        assert said in daemon.log_text()


def test_daemon_is_not_dumpable_from_its_first_line(root: Path) -> None:
    """run_daemon sets PR_SET_DUMPABLE 0 before it reads anything secret (here: before the
    config it cannot even load)."""
    code = (
        "import sys; from pathlib import Path\n"
        "from zeroclaw._prctl import PR_GET_DUMPABLE, get\n"
        "from zeroclaw.supervisor import run_daemon\n"
        "try:\n"
        "    run_daemon(Path(sys.argv[1]), {})\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
        "print(get(PR_GET_DUMPABLE))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(root / "missing.toml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=True,
    )
    assert result.stdout.split() == ["ConfigError", "0"], result


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to squat as another uid")
@pytest.mark.skipif(
    not os.access(SYSTEM_PYTHON, os.X_OK), reason="no system python3 for uid nobody"
)
def test_a_squatted_name_stops_the_daemon_and_the_cli(root: Path, daemons: DaemonFactory) -> None:
    """An abstract name has no owner: another uid could bind it first. The daemon says so
    and exits; the CLI checks the listener's uid and sends it nothing."""
    address = control_address(root / "run")
    squatter = subprocess.Popen(
        [
            SYSTEM_PYTHON,
            "-c",
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "s.bind('\\0' + sys.argv[1][1:]); s.listen(8)\n"
            "print('ready', flush=True)\n"
            "while True:\n"
            "    c, _ = s.accept()\n"
            "    print('got', c.recv(100).hex(), flush=True)\n",
            printable(address),
        ],
        user=NOBODY,
        cwd="/",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert squatter.stdout is not None
        assert squatter.stdout.readline().strip() == "ready"
        daemon = daemons(make_config(root, {"alpha": agent_entry()}))
        started = daemon.cli("daemon", timeout=60)
        assert started.returncode == 1, started.stderr
        assert "already taken by pid" in started.stderr and "uid 65534" in started.stderr
        assert "Traceback" not in started.stderr

        status = daemon.cli("status")
        assert status.returncode == 3, status.stderr
        assert "running as uid 65534" in status.stderr and "refusing" in status.stderr
    finally:
        squatter.kill()
        out, _ = squatter.communicate(timeout=10)
    # The daemon's probe and the CLI connected (to see who listens) but sent nothing.
    received = [line.split()[1:] for line in out.splitlines() if line.startswith("got")]
    assert received == [[], []], out


def test_an_agent_squatting_another_daemons_control_name_gets_nothing_from_the_cli(
    root: Path, daemons: DaemonFactory, tmp_path: Path
) -> None:
    """Found by the attack pass: an abstract name is anyone's to bind, and Landlock scopes
    a connect, not a bind. An agent took the control name of a daemon of the same uid that
    was not running; the operator's CLI trusted it by uid and sent it its request (a chat
    message, a memory record...). Now the CLI talks only to the process that holds the
    runtime dir's lock."""
    victim = tmp_path / "victim"
    (victim / "run").mkdir(parents=True)
    config = victim / "zeroclaw.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{victim / "state"}"\nruntime_dir = "{victim / "run"}"\n'
    )
    plan(root, "squatter", do="squat", runtime_dir=str(victim / "run"))
    daemon = daemons(make_config(root, {"squatter": agent_entry()})).start()
    bound = root / "state" / "agents" / "squatter" / "workspace" / "bound"
    deadline = time.monotonic() + PATIENCE
    while not bound.exists() and time.monotonic() < deadline:  # written by the agent process
        time.sleep(0.05)
    assert bound.exists(), daemon.log_text()[-5000:]
    store = ["-a", "alpha", "memory", "store", "k", "v"]
    cli = subprocess.run(
        [sys.executable, "-m", "zeroclaw", "--config", str(config), *store],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
        check=False,
    )
    assert cli.returncode != 0
    assert "refusing to talk to it" in cli.stderr, cli.stderr
    assert result_of(root, "squatter") == {"request": ""}


def test_the_cli_trusts_only_the_lock_holder() -> None:
    trusted = frozenset({0, 1000})
    assert server_refusal(1000, 42, trusted, 42) is None
    assert server_refusal(1000, 42, trusted, None) is None  # unreadable: the uid decides
    assert "no daemon holds the lock" in (server_refusal(1000, 42, trusted, 0) or "")
    assert "pid 7 holds the lock" in (server_refusal(1000, 42, trusted, 7) or "")
    assert "neither us" in (server_refusal(65534, 42, trusted, 42) or "")
