"""Children forked on the trio thread (ADR 0051), with real processes: the fork happens on
the main thread (so a death signal outlives trio's worker threads), a warm validation
worker still answers after trio retired its idle threads, a child with a death signal dies
when its parent process is SIGKILLed, and the pipes, wait and signals work."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
import trio

from tests.conftest import REPO
from zeroclaw._schema_check import Valid
from zeroclaw._spawn import Child, open_child
from zeroclaw.subagents._validator import ValidatorPool

DEADLINE = 60  # generous: the machine is shared and slow


def _refuse_unless_forked_by(thread_ident: int) -> None:
    """A preexec hook: after fork the child's one thread is a copy of the forking thread,
    with its pthread id, so this names the thread that forked."""
    if threading.get_ident() != thread_ident:
        raise RuntimeError("forked by another thread")


async def test_the_child_is_forked_by_the_main_thread() -> None:
    main_ident = threading.main_thread().ident
    assert main_ident is not None
    child = await open_child(
        ["/bin/true"], preexec_fn=functools.partial(_refuse_unless_forked_by, main_ident)
    )
    with trio.fail_after(DEADLINE):
        assert await child.wait() == 0
    # The same hook refuses a fork in trio's worker thread: the check does discriminate.
    with pytest.raises(subprocess.SubprocessError):
        await trio.lowlevel.open_process(
            ["/bin/true"], preexec_fn=functools.partial(_refuse_unless_forked_by, main_ident)
        )


def test_no_child_of_ours_is_forked_by_a_worker_thread() -> None:
    # trio's open_process and run_process fork in a worker thread that trio retires after
    # 10 s idle, and with it the death signal of the child (ADR 0051).
    offenders = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "zeroclaw").rglob("*.py"))
        if re.search(r"\b(open_process|run_process)\(", path.read_text())
    ]
    assert offenders == []


@pytest.mark.slow
async def test_a_warm_validation_worker_still_answers_after_trios_idle_threads_retire() -> None:
    pool = ValidatorPool()
    try:
        await pool.warm()
        # Longer than trio's worker-thread idle timeout (10 s): a worker forked by such a
        # thread got its death signal once the thread retired. This wait is the behaviour
        # under test (idleness), not a synchronisation.
        await trio.sleep(12)
        outcome = await pool.check({"type": "integer"}, 1)
    finally:
        await pool.aclose()
    assert isinstance(outcome, Valid)
    assert (pool.started, pool.killed) == (1, 0)  # the warm worker answered, not a new one


# A parent process that starts `sleep` through open_child with a death signal tied to
# itself, tells the sleeper's pid, then waits for it.
PARENT = """
import functools, os, subprocess, trio
from zeroclaw._prctl import set_death_signal
from zeroclaw._spawn import Child, open_child

async def main() -> None:
    child = await open_child(
        ["sleep", "600"],
        stdin=subprocess.DEVNULL,
        preexec_fn=functools.partial(set_death_signal, os.getpid()),
    )
    print(child.pid, flush=True)
    await child.wait()

trio.run(main)
"""


async def test_a_child_dies_when_its_parent_process_is_killed() -> None:
    parent = await open_child(
        [sys.executable, "-c", PARENT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=REPO
    )
    assert parent.stdout is not None
    pidfd: int | None = None
    try:
        line = b""
        with trio.fail_after(DEADLINE):
            while not line.endswith(b"\n"):
                chunk = await parent.stdout.receive_some()
                assert chunk, "the parent exited before it told its child's pid"
                line += chunk
        # The sleeper is alive while its parent waits for it, so the pidfd names it.
        pidfd = os.pidfd_open(int(line))
        parent.kill()
        with trio.fail_after(DEADLINE):
            assert await parent.wait() == -signal.SIGKILL
            await trio.lowlevel.wait_readable(pidfd)  # readable: the sleeper has exited
    finally:
        if pidfd is not None:
            os.close(pidfd)
        if parent.returncode is None:
            parent.kill()
            await parent.wait()
        await parent.stdout.aclose()


async def test_pipes_carry_both_ways_and_stderr_can_join_stdout() -> None:
    child = await open_child(
        ["/bin/sh", "-c", "cat; echo err >&2; exit 7"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is None
    output = b""
    with trio.fail_after(DEADLINE):
        await child.stdin.send_all(b"hello\n")
        await child.stdin.aclose()
        while chunk := await child.stdout.receive_some():
            output += chunk
        assert await child.wait() == 7
    await child.stdout.aclose()
    assert output == b"hello\nerr\n"
    assert child.returncode == 7


async def test_a_killed_child_reports_its_signal_and_a_reaped_one_ignores_signals() -> None:
    child = await open_child(["sleep", "600"], stdin=subprocess.DEVNULL)
    assert child.returncode is None
    child.kill()
    with trio.fail_after(DEADLINE):
        assert await child.wait() == -signal.SIGKILL
    child.send_signal(signal.SIGTERM)  # reaped: Popen sends nothing, never to a reused pid
    assert child.returncode == -signal.SIGKILL


async def test_a_program_that_cannot_start_raises_and_leaks_no_pipe() -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError):
        await open_child(["/nonexistent/program"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert len(os.listdir("/proc/self/fd")) == before


def _sleeper_without_pidfd() -> Child:
    # What open_child hands back on a kernel without pidfd_open (before 5.3).
    return Child(
        subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL), None, None, None, None
    )


async def test_without_a_pidfd_wait_still_sees_the_exit_and_can_be_cancelled() -> None:
    child = _sleeper_without_pidfd()
    try:
        with trio.move_on_after(0.2) as scope:
            await child.wait()
        assert scope.cancelled_caught and child.returncode is None
    finally:
        child.kill()
        with trio.fail_after(DEADLINE):
            assert await child.wait() == -signal.SIGKILL
