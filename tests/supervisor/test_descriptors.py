"""The daemon's descriptors (ADR 0045): its soft limit goes up to the hard one at start,
and a control peer check that runs out of descriptors says so, instead of blaming the
peer ("cannot verify which process"). Each in a child process with its own limits."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.control import control_address


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_daemon_raises_its_soft_descriptor_limit_to_the_hard_one() -> None:
    out = run(
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))\n"
        "from zeroclaw.supervisor._daemon import raise_descriptor_limit\n"
        "raise_descriptor_limit()\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    assert out == "(512, 512)"


def test_reading_a_peers_ancestry_out_of_descriptors_raises_emfile_not_unverifiable() -> None:
    out = run(
        "import errno, os, resource\n"
        "from zeroclaw.supervisor._peer import read_stat\n"
        "assert read_stat(os.getpid()) is not None\n"
        "assert read_stat(2**22 + 1) is None  # no such process: that is None\n"
        "held = []\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "try:\n"
        "    while True: held.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError: pass\n"
        "try:\n"
        "    read_stat(os.getpid())\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
    )
    assert out == "EMFILE"


def test_a_daemon_out_of_descriptors_says_so_and_serves_the_operator_once_they_are_back(
    root: Path, daemons: Callable[..., Daemon]
) -> None:
    """Its spare descriptor lets the control socket accept and answer `busy` with the reason
    (it used to be "forbidden: cannot verify which process"); with descriptors back,
    `status` answers."""
    daemon = daemons(make_config(root, {"alpha": agent_entry()}), faults=False).start()
    assert daemon.proc is not None
    pid = daemon.proc.pid
    assert "descriptor limit" in daemon.log_text()  # raised at start, and said
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    held = len(os.listdir(f"/proc/{pid}/fd"))
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(60)
    try:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (held, hard))  # none left to open
        # Nothing sent: the refusal comes at accept time (unread bytes would reset it).
        client.connect(control_address(daemon.runtime_dir))
        reply = b""
        while chunk := client.recv(65536):
            reply += chunk
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        client.close()
    assert b"busy" in reply and b"out of file descriptors" in reply, reply
    assert b"cannot verify" not in reply and b"forbidden" not in reply
    assert "out of file descriptors" in daemon.log_text()
    status = daemon.cli("status")
    assert status.returncode == 0, status.stderr
