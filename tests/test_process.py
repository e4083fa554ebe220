"""The capped process runner with real processes: exit codes, the output cap, only the
environment given, and the whole process group killed on timeout and on cancellation."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio

from tests.conftest import PATIENCE
from tests.supervisor.harness import wait_gone
from zeroclaw._process import CannotStart, run_capped

# The shell's own pid and its background child's, then it waits for that child forever.
CHILD_AND_GRANDCHILD = 'sleep 600 & echo "$$ $!"; wait'


async def test_a_program_runs_to_its_exit_code_with_its_output(tmp_path: Path) -> None:
    outcome = await run_capped(
        ["/bin/sh", "-c", "pwd; echo oops >&2; exit 3"], timeout_secs=30, cwd=str(tmp_path)
    )
    assert outcome.exit_code == 3 and not outcome.timed_out and not outcome.truncated
    assert outcome.output == f"{tmp_path}\noops\n"


async def test_the_program_gets_only_the_environment_given() -> None:
    os.environ["ZC_LEAK_CANARY"] = "must-not-reach"
    try:
        given = await run_capped(["/usr/bin/env"], timeout_secs=30, env={"PATH": "/bin", "A": "1"})
        default = await run_capped(["/usr/bin/env"], timeout_secs=30)
    finally:
        del os.environ["ZC_LEAK_CANARY"]
    assert sorted(given.output.splitlines()) == ["A=1", "PATH=/bin"]
    assert default.output.splitlines() == ["PATH=/usr/local/bin:/usr/bin:/bin"]


async def test_output_beyond_the_cap_is_dropped_and_the_program_still_finishes() -> None:
    # 200 kB against a 1 kB cap: the rest is drained, so the writer never blocks on the pipe.
    write = "import sys; sys.stdout.write('x' * 200_000); sys.stdout.flush()"
    outcome = await run_capped([sys.executable, "-c", write], timeout_secs=60, output_cap=1000)
    assert outcome.exit_code == 0 and outcome.truncated
    assert outcome.output == "x" * 1000


async def test_a_timeout_kills_the_whole_process_group() -> None:
    outcome = await run_capped(["/bin/sh", "-c", CHILD_AND_GRANDCHILD], timeout_secs=1)
    assert outcome.timed_out and outcome.exit_code is None
    shell, sleeper = (int(p) for p in outcome.output.split())
    assert wait_gone([shell, sleeper], timeout=PATIENCE) == []


async def test_cancellation_kills_the_whole_process_group(tmp_path: Path) -> None:
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    script = f'sleep 600 & echo "$$ $!" > {fifo}; wait'
    finished = False
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            nonlocal finished
            await run_capped(["/bin/sh", "-c", script], timeout_secs=600)
            finished = True

        nursery.start_soon(run)
        # Opening a FIFO for reading waits for the writer: the pids are there once it wrote.
        pids = await trio.Path(fifo).read_text()
        nursery.cancel_scope.cancel()
    assert not finished
    shell, sleeper = (int(p) for p in pids.split())
    assert wait_gone([shell, sleeper], timeout=PATIENCE) == []


class Recorder:
    """A spawn tracker that remembers what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    @contextlib.asynccontextmanager
    async def spawning(self) -> AsyncIterator[Callable[[int], None]]:
        yield lambda pid: self.events.append(("spawned", pid))

    async def finished(self, pid: int) -> None:
        self.events.append(("finished", pid))


async def test_a_tracker_hears_of_the_spawn_and_of_the_end() -> None:
    recorder = Recorder()
    await run_capped(["/bin/true"], timeout_secs=30, tracker=recorder)
    (spawned, pid), (finished, same) = recorder.events
    assert (spawned, finished) == ("spawned", "finished") and pid == same > 0


@pytest.mark.parametrize(
    ("argv", "kind", "detail"),
    [
        (["/nonexistent/zc-program"], "io_error", "ENOENT"),
        (["/bin/echo", "a\x00b"], "bad_arguments", "cannot start"),
    ],
)
async def test_a_program_that_cannot_start_raises_its_kind(
    argv: list[str], kind: str, detail: str
) -> None:
    with pytest.raises(CannotStart) as caught:
        await run_capped(argv, timeout_secs=30)
    assert caught.value.kind == kind and detail in caught.value.detail


async def test_a_file_that_is_not_executable_code_cannot_start(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x00\x01 not an executable format")
    garbage.chmod(0o755)
    with pytest.raises(CannotStart) as caught:
        await run_capped([str(garbage)], timeout_secs=30)
    assert caught.value.kind == "io_error" and "ENOEXEC" in caught.value.detail


async def test_a_sandbox_that_cannot_be_built_is_sandbox_failed() -> None:
    def broken() -> int:
        raise OSError(22, "no ruleset here")

    with pytest.raises(CannotStart) as caught:
        await run_capped(["/bin/true"], timeout_secs=30, ruleset=broken)
    assert caught.value.kind == "sandbox_failed" and "no ruleset here" in caught.value.detail
