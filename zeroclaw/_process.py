"""Run one program to its end under bounds: a timeout, an output cap, only the environment
given, optionally a Landlock ruleset; its whole process group dies on timeout or cancel.

Nothing here knows agents or tools: the shell tool runs the model's commands with it, and
a `--version` probe can run a binary with it. The program gets stdin from /dev/null, its
own session and process group (so one killpg reaches everything it started that stayed in
the group), a death signal tied to this process, and stdout and stderr on one pipe read up
to `output_cap` bytes (the rest is drained and dropped, so the program never blocks on a
full pipe).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import trio

from ._prctl import PR_SET_NO_NEW_PRIVS, prctl, set_death_signal
from ._spawn import open_child
from .policy import (
    SandboxUnavailable,
    drop_capabilities,
    enforce_ruleset,
    forbid_user_namespaces,
)

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_OUTPUT_CAP = 64 * 1024
_READ_CHUNK = 65536

# Why a program did not start at all.
StartFailure = Literal["sandbox_failed", "exec_refused", "io_error", "bad_arguments"]


class CannotStart(Exception):
    """The program never ran: its sandbox could not be built, the kernel refused to exec
    it, or the OS or the arguments did not allow the spawn."""

    def __init__(self, kind: StartFailure, detail: str) -> None:
        super().__init__(detail)
        self.kind: StartFailure = kind
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    exit_code: int | None  # None when it was killed on timeout
    output: str  # stdout and stderr interleaved, at most output_cap bytes, UTF-8 (replaced)
    truncated: bool
    timed_out: bool


class SpawnTracker(Protocol):
    """Who wants to know of each spawn (the agent's orphan reaper): `spawning()` is held
    around the spawn and yields a function taking the pid; `finished(pid)` follows the wait."""

    def spawning(self) -> AbstractAsyncContextManager[Callable[[int], None]]: ...

    async def finished(self, pid: int) -> None: ...


# The intermediate (`zeroclaw/_reaper.py`): a child subreaper that runs one program, enters
# its Landlock ruleset and seccomp filter for it, and kills every descendant the program
# leaves (a double fork, a `setsid()`) when it ends, times out or is stopped. For programs
# a process starts that is no subreaper itself: the daemon's discovery probes and the MCP
# servers it starts for adapters.
REAPER = str(Path(__file__).resolve().parent / "_reaper.py")


def reaped_argv(
    argv: Sequence[str],
    *,
    timeout_secs: float,
    ruleset_fd: int,
    status_fd: int,
    seccomp: bytes = b"",
) -> list[str]:
    """`argv` run under the intermediate: `ruleset_fd` (-1: none) and `status_fd` must be
    passed to it (`pass_fds`); it writes how the program ended on `status_fd`."""
    return [
        sys.executable,
        "-I",
        "-S",
        REAPER,
        repr(float(timeout_secs)),
        str(ruleset_fd),
        str(status_fd),
        seccomp.hex() or "-",
        "--",
        *argv,
    ]


def confine_intermediate(parent_pid: int, last_cap: int) -> None:
    """Between fork and exec of the intermediate (so for it and everything below it): die
    with us — by SIGTERM, so that it kills the program's tree first — no new privileges,
    no capability (it needs none to kill its own descendants) and no new user namespace
    (ADR 0043). `last_cap` is read before the fork."""
    set_death_signal(parent_pid, signal.SIGTERM)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    drop_capabilities(range(last_cap + 1))
    forbid_user_namespaces()


def _child_setup(parent_pid: int, ruleset: int | None) -> None:
    """Between fork and exec, in this order: die with the parent, then enter the ruleset."""
    set_death_signal(parent_pid)
    if ruleset is not None:
        enforce_ruleset(ruleset)


async def run_capped(
    argv: Sequence[str],
    *,
    timeout_secs: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    ruleset: Callable[[], int] | None = None,
    tracker: SpawnTracker | None = None,
) -> ProcessOutcome:
    """Run `argv[0]` (a path, or a name looked up on `env`'s PATH) to its end.

    `env` is the program's whole environment (None: PATH only). `ruleset` builds a Landlock
    ruleset fd (in a worker thread) that the child enforces before exec; this function
    closes it. Raises `CannotStart` when the program did not run; once it ran, the outcome
    says how it ended. Cancellation kills the process group before it propagates."""
    program_env = dict(env) if env is not None else {"PATH": DEFAULT_PATH}
    ruleset_fd: int | None = None
    if ruleset is not None:
        try:
            ruleset_fd = await trio.to_thread.run_sync(ruleset)
        except (SandboxUnavailable, OSError) as exc:
            raise CannotStart("sandbox_failed", f"sandbox failed: {exc}") from None
    spawn_guard = tracker.spawning() if tracker is not None else _untracked()
    try:
        async with spawn_guard as register:
            proc = await open_child(
                list(argv),
                cwd=cwd,
                env=program_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(_child_setup, os.getpid(), ruleset_fd),
            )
            register(proc.pid)
    except PermissionError as exc:
        # The kernel refused to execute the program itself (e.g. a #! script whose
        # interpreter the ruleset does not let run).
        raise CannotStart("exec_refused", f"{argv[0]}: {exc.strerror}") from None
    except OSError as exc:  # not an executable format, arguments too long, ...
        name = errno.errorcode.get(exc.errno or 0, "errno ?")
        raise CannotStart("io_error", f"cannot start {argv[0]!r}: {name}") from None
    except (ValueError, subprocess.SubprocessError) as exc:  # a NUL in an argument, say
        raise CannotStart("bad_arguments", f"cannot start {argv[0]!r}: {exc}"[:300]) from None
    finally:
        if ruleset_fd is not None:
            os.close(ruleset_fd)
    stdout = proc.stdout
    assert stdout is not None
    output = bytearray()
    timed_out = False
    try:
        with trio.move_on_after(timeout_secs) as scope:
            while chunk := await stdout.receive_some(_READ_CHUNK):
                if len(output) < output_cap:
                    output += chunk[: output_cap - len(output)]
            await proc.wait()
        timed_out = scope.cancelled_caught
    finally:
        with trio.CancelScope(shield=True):
            # Only while the leader is unreaped: its pid (the group's id) cannot have been
            # reused by then.
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
            await stdout.aclose()
            if tracker is not None:
                await tracker.finished(proc.pid)
    return ProcessOutcome(
        exit_code=None if timed_out else proc.returncode,
        output=output.decode("utf-8", errors="replace"),
        truncated=len(output) >= output_cap,
        timed_out=timed_out,
    )


@contextlib.asynccontextmanager
async def _untracked() -> AsyncIterator[Callable[[int], None]]:
    yield lambda pid: None
