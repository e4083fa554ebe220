"""Finding 9's last sentence: nothing a shell command starts outlives its agent or the
daemon, not even a grandchild that left the command's session with setsid.

The command is `spawner`, a test-only program on the agent's PATH that starts
`setsid sleep` in the background (its stdout closed, so the tool does not wait for it) and
writes that grandchild's pid to the workspace; `spawner wait` then keeps running itself.
It is a shell script, so its agent runs with sandbox = "none" (a confined command could not
start /bin/sh at all, which is the point of ADR 0012, and orthogonal to this test)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agent.test_chat_daemon import chat
from tests.agent.test_chat_inprocess import codes
from tests.conftest import PATIENCE
from tests.supervisor.harness import (
    Daemon,
    agent_entry,
    make_config,
    process_alive,
    wait_for_process,
    wait_gone,
)

DaemonFactory = Callable[..., Daemon]
SPAWNER = """#!/bin/sh
setsid sleep 4242 </dev/null >/dev/null 2>&1 &
echo $! > grandchild.pid.tmp && mv grandchild.pid.tmp grandchild.pid
if [ "$1" = wait ]; then exec sleep 4343; fi
"""


@pytest.fixture
def spawner(root: Path) -> Iterator[Path]:
    bin_dir = root / "bin"
    bin_dir.mkdir()
    program = bin_dir / "spawner"
    program.write_text(SPAWNER)
    program.chmod(0o755)
    yield bin_dir
    for pid in _pids_running(["sleep", "4242"]) + _pids_running(["sleep", "4343"]):
        os.kill(pid, signal.SIGKILL)  # only if a test failed


def _pids_running(argv: list[str]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_text().rstrip("\0").split("\0")
            except OSError:
                continue
            if cmdline == argv:
                found.append(int(entry.name))
    return found


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                kids.append(int(entry.name))
    return kids


def start(root: Path, daemons: DaemonFactory, bin_dir: Path) -> Daemon:
    doc = make_config(root, {"worker": agent_entry(risk_profile="spawn")})
    doc["risk_profiles"]["spawn"] = {
        "level": "full",
        "allowed_commands": ["spawner"],
        "sandbox": "none",
    }
    return daemons(doc, faults=False).start(PATH=f"{bin_dir}:{os.environ['PATH']}")


def grandchild_of(root: Path) -> int:
    marker = root / "state" / "agents" / "worker" / "workspace" / "grandchild.pid"
    pid = wait_for_file(marker)
    assert process_alive(pid)
    return pid


def wait_for_file(path: Path) -> int:
    wait_for_process(["sleep", "4242"])  # exists once the grandchild runs
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if path.exists():
            return int(path.read_text())
        wait_gone([], 0.05)
    raise AssertionError(f"{path} never appeared")


def running_chat(daemon: Daemon, text: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*daemon.cli_argv(), "--agent", "worker", "chat", "-m", text],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=daemon.env(),
    )


def test_a_finished_command_leaves_nothing_running(
    root: Path, daemons: DaemonFactory, spawner: Path
) -> None:
    daemon = start(root, daemons, spawner)
    reply = chat(daemon, "worker", "run spawner")
    assert codes(reply) == [("shell", None)]
    marker = root / "state" / "agents" / "worker" / "workspace" / "grandchild.pid"
    grandchild = int(marker.read_text())
    assert wait_gone([grandchild], timeout=PATIENCE) == []
    assert daemon.agent("worker")["state"] == "running"


def test_kill_9_of_the_agent_takes_the_commands_grandchild(
    root: Path, daemons: DaemonFactory, spawner: Path
) -> None:
    daemon = start(root, daemons, spawner)
    client = running_chat(daemon, "run spawner wait")
    try:
        grandchild = grandchild_of(root)
        command = wait_for_process(["sleep", "4343"])
        agent = daemon.agent("worker")["pid"]
        os.kill(agent, signal.SIGKILL)
        assert wait_gone([agent, command, grandchild], timeout=PATIENCE) == []
    finally:
        client.kill()
        client.wait()


def test_kill_9_of_the_daemon_takes_every_descendant(
    root: Path, daemons: DaemonFactory, spawner: Path
) -> None:
    daemon = start(root, daemons, spawner)
    client = running_chat(daemon, "run spawner wait")
    try:
        grandchild = grandchild_of(root)
        command = wait_for_process(["sleep", "4343"])
        agent = daemon.agent("worker")["pid"]
        assert daemon.proc is not None
        zygote = _children(daemon.proc.pid)
        daemon.signal(signal.SIGKILL)
        daemon.wait_exit()
        assert wait_gone([*zygote, agent, command, grandchild], timeout=PATIENCE) == []
    finally:
        client.kill()
        client.wait()
