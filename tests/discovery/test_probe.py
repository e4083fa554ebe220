"""The probe runner on its own: its ruleset, its intermediate, and the whole tree ending at
the timeout or at a cancel, with real processes (ADR 0047)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
import trio

from tests.conftest import PATIENCE
from tests.discovery.helpers import SYSTEM_PYTHON
from tests.supervisor.harness import wait_gone
from zeroclaw.discovery._probe import (
    PROBE_FORBIDDEN,
    ProbeOutcome,
    no_socket_filter,
    probe_plan,
    run_probe,
)
from zeroclaw.policy import NOT_EXECUTABLE, SYSTEM_SECRETS, abi_version, build_ruleset

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="needs Landlock")

# A grandchild in a session of its own that sleeps for minutes; then the program either
# ends or hangs. The program's version token says what the sandbox let it do.
TREE = """
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
no_new_privs = libc.prctl(39, 0, 0, 0, 0)  # PR_GET_NO_NEW_PRIVS
try:
    os.kill(os.getppid(), 0)
    signal_denied = 0
except PermissionError:
    signal_denied = 1
first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
os.waitpid(first, 0)
import socket
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    socket_denied = 0
except PermissionError:
    socket_denied = 1
# /proc is outside its ruleset: ask the kernel. PR_CAPBSET_READ is 1 for a cap still in
# the bounding set; setuid(1) needs CAP_SETUID in the effective set.
bounded = any(libc.prctl(23, cap, 0, 0, 0) == 1 for cap in range(64))
try:
    os.setuid(1)
    effective = True
except PermissionError:
    effective = False
no_caps = int(not bounded and not effective)
# CLONE_NEWUSER: every capability back inside a namespace of its own
no_userns = int(libc.unshare(0x10000000) != 0)
print(f"tree 1.{no_new_privs}.{signal_denied}.{socket_denied}.{no_caps}.{no_userns}", flush=True)
if sys.argv[1:] == ["--version"] and os.environ.get("HANG"):
    time.sleep(600)
"""


def program(directory: Path) -> Path:
    path = directory / "tree"
    path.write_text(f"#!{SYSTEM_PYTHON} -IS\n{TREE}")
    path.chmod(0o755)
    return path


def running(path: Path) -> list[int]:
    needle = str(path).encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if needle in Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0"):
                    found.append(int(name))
            except OSError:
                continue
    return found


async def probe(path: Path, home: str, bound: float = 10, **env: str) -> ProbeOutcome:
    plan = probe_plan(str(path), "/usr/bin:/bin", home)
    return await run_probe(
        [str(path), "--version"],
        timeout_secs=bound,
        env={"PATH": "/usr/bin:/bin", "HOME": home, **env},
        cwd=home,
        output_cap=65536,
        ruleset=lambda: build_ruleset(plan),
    )


def test_a_probe_reads_its_empty_home_but_never_writes_it_nor_reads_system_secrets() -> None:
    with tempfile.TemporaryDirectory() as home:
        plan = probe_plan(f"{SYSTEM_PYTHON}", "/usr/bin:/bin", home)
    real_home = os.path.realpath(home)
    assert (real_home, NOT_EXECUTABLE) not in plan.rules
    assert any(path == real_home for path, _ in plan.rules)
    granted = {path for path, _ in plan.rules}
    assert not granted & {*PROBE_FORBIDDEN, *SYSTEM_SECRETS}
    assert "/etc" not in granted  # carved around /etc/shadow, entry by entry
    assert "/etc/passwd" in granted


async def test_the_probe_has_no_new_privileges_nor_capabilities_and_cannot_signal_or_open_a_socket(
    tmp_path: Path,
) -> None:
    path = program(tmp_path)
    with tempfile.TemporaryDirectory() as home:
        outcome = await probe(path, home)
    assert outcome.status == "exit 0", outcome
    # no_new_privs, no signal out, no socket, no capability, no user namespace (ADR 0043)
    assert outcome.output.strip() == "tree 1.1.1.1.1.1"
    assert wait_gone(running(path), timeout=PATIENCE) == []


async def test_a_hanging_probe_and_its_setsid_grandchild_end_at_the_timeout(
    tmp_path: Path,
) -> None:
    path = program(tmp_path)
    with tempfile.TemporaryDirectory() as home:
        outcome = await probe(path, home, bound=1.0, HANG="1")
    assert outcome.timed_out and outcome.status == "timeout"
    assert "tree 1.1.1.1.1.1" in outcome.output
    assert wait_gone(running(path), timeout=PATIENCE) == []


async def test_a_cancelled_probe_ends_its_whole_tree(tmp_path: Path) -> None:
    path = program(tmp_path)
    with tempfile.TemporaryDirectory() as home:
        async with trio.open_nursery() as nursery:

            async def cancel_once_the_grandchild_runs() -> None:
                deadline = time.monotonic() + PATIENCE
                # A process's start has no event to await: poll /proc, bounded.
                while len(running(path)) < 3 and time.monotonic() < deadline:  # noqa: ASYNC110
                    await trio.sleep(0.02)
                nursery.cancel_scope.cancel()

            nursery.start_soon(cancel_once_the_grandchild_runs)
            await probe(path, home, bound=60, HANG="1")
    assert wait_gone(running(path), timeout=PATIENCE) == []


def test_the_socket_filter_is_known_per_machine_and_absent_elsewhere() -> None:
    x86 = no_socket_filter("x86_64")
    arm = no_socket_filter("aarch64")
    assert len(x86) % 8 == 0 and len(x86) // 8 == 9  # one more check: the x32 ABI
    assert len(arm) // 8 == 8
    assert no_socket_filter("riscv64") == b""
