"""How a `--version` probe runs: under the command sandbox, and nothing it starts outlives it
(ADR 0047).

The probe is the child of a small intermediate (`zeroclaw/_reaper.py`, a child subreaper):
a descendant that double-forks or calls `setsid()` is re-parented to the intermediate, which
kills every descendant when the program exits, at the timeout, or when it is stopped (our
SIGTERM, or its death signal when this process dies). The program itself runs under a
Landlock ruleset like an agent's shell command (`policy.plan_command_sandbox`): it executes
only itself, its interpreter and their loaders; it reads the system paths (minus the
system's secrets: shadow files, sudoers, ssh host keys), its own install directory and an
empty private HOME; it writes nothing but /dev/null; from Landlock ABI 6 it can neither
signal nor reach an abstract socket outside its domain. A seccomp filter refuses it
`socket()` and `io_uring_setup()` (EACCES): a `--version` needs no socket, and Landlock does
not cover connecting to a pathname unix socket (the daemon's control socket, whose peer
check sees the daemon's own children as the operator) nor, here, TCP. Its environment is
PATH, the C locale and that HOME only; `no_new_privs` holds for the intermediate and all
below it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import platform
import signal
import struct
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import trio

from .._process import CannotStart, confine_intermediate, reaped_argv
from .._spawn import Child, open_child
from ..policy import (
    NOT_EXECUTABLE,
    SYSTEM_READ_ONLY,
    SandboxPlan,
    SandboxUnavailable,
    cap_last_cap,
    plan_command_sandbox,
    program_executables,
)

STOP_GRACE_SECS = 5.0  # for the intermediate to kill and reap what is left, once asked
_READ_CHUNK = 65536

# What no probe reads, though the system paths around them are readable: besides the
# SYSTEM_SECRETS every command sandbox keeps out (plan_command_sandbox adds those itself),
# the whole of these.
PROBE_FORBIDDEN = (
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/credstore",
    "/etc/credstore.encrypted",
    "/etc/zeroclaw",
)
PACKAGE_LEVELS = 3


# seccomp: the audit arch of each machine we filter for, and its socket() number.
_ARCHES: dict[str, tuple[int, int]] = {
    "x86_64": (0xC000003E, 41),
    "aarch64": (0xC00000B7, 198),
}
_IO_URING_SETUP = 425  # the same on every architecture (the unified syscall table)
_X32_SYSCALL_BIT = 0x40000000
_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000


def no_socket_filter(machine: str | None = None) -> bytes:
    """A seccomp BPF program: socket() and io_uring_setup() fail with EACCES, a syscall of
    another ABI (x32, i386 compat) kills the process, everything else is allowed. Empty on
    a machine it does not know (the probe then runs without it). Pure."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return b""
    audit_arch, socket_nr = arch
    denied = [socket_nr, _IO_URING_SETUP]
    x32 = machine == "x86_64" or (machine is None and platform.machine() == "x86_64")
    checks = (1 if x32 else 0) + len(denied)
    # 0 ld arch; 1 jeq arch (skip the kill); 2 kill; 3 ld nr; checks...; allow; deny
    code: list[tuple[int, int, int, int]] = [
        (_LD_ABS_W, 0, 0, 4),
        (_JEQ_K, 1, 0, audit_arch),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_ABS_W, 0, 0, 0),
    ]
    deny_at = 4 + checks + 1
    if x32:
        code.append((_JGE_K, deny_at - (len(code) + 1), 0, _X32_SYSCALL_BIT))
    for nr in denied:
        code.append((_JEQ_K, deny_at - (len(code) + 1), 0, nr))
    code.append((_RET_K, 0, 0, _RET_ALLOW))
    code.append((_RET_K, 0, 0, _RET_ERRNO | errno.EACCES))
    return b"".join(struct.pack("=HBBI", *insn) for insn in code)


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """How a probe ended: `status` is the intermediate's word (`exit N`, `signal N`,
    `timeout`, `stopped`, `exec_refused WHY`, `exec_failed WHY`), never the program's."""

    status: str
    output: str  # stdout and stderr, at most the cap, UTF-8 (replaced)
    truncated: bool

    @property
    def timed_out(self) -> bool:
        return self.status in ("timeout", "stopped")

    @property
    def exit_code(self) -> int | None:
        word, _, value = self.status.partition(" ")
        return int(value) if word == "exit" and value.isdigit() else None


def _read_head(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4096)
    except OSError:
        return ""


def _venv_home(cfg: str) -> str:
    for line in cfg.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip().startswith("/"):
            return value.strip().rstrip("/")
    return ""


def probe_reads(
    program: str,
    exists: Callable[[str], bool] = os.path.exists,
    read: Callable[[str], str] = _read_head,
) -> tuple[str, ...]:
    """The directories a probed program may read besides the system's: its own real
    directory, and the package it belongs to (the nearest of its next PACKAGE_LEVELS
    parents holding a package.json: an npm CLI's `<package>/bin/cli.js` reads the package
    around it), and a Python console script's virtual environment (the directory above its
    `bin/` holding `pyvenv.cfg`: an MCP server such as mcp-server-time imports from it). A
    plain `~/bin` opens nothing of the home around it. The stdlib of the venv's base
    interpreter too, when it is not in the system paths (`zeroclaw.mcp.installation_paths`
    does the same for an agent's server)."""
    real = Path(os.path.realpath(program)).parent
    reads = [str(real)]
    for bin_dir in dict.fromkeys((Path(program).parent, real)):
        cfg = bin_dir.parent / "pyvenv.cfg"
        if exists(str(cfg)):
            reads.append(str(bin_dir.parent))
            home = _venv_home(read(str(cfg)))
            if home:  # the standard library of the interpreter the venv was made from
                reads.append(str(Path(home).parent / "lib"))
    for parent in list(real.parents)[:PACKAGE_LEVELS]:
        if parent == parent.parent:
            break
        if exists(str(parent / "package.json")):
            reads.append(str(parent))
            break
    return tuple(reads)


def probe_plan(program: str, path: str, home: str, excluded: Iterable[str] = ()) -> SandboxPlan:
    """The ruleset of one probe: the command sandbox of a readonly agent whose workspace
    is the probe's empty private HOME, which it only reads."""
    home_real = os.path.realpath(home)
    plan = plan_command_sandbox(
        workspace=home,
        home=home,
        executables=program_executables(program, path),
        grants=[(directory, "read") for directory in probe_reads(program)],
        excluded=(*PROBE_FORBIDDEN, *excluded),
        system=SYSTEM_READ_ONLY,
        workspace_writable=False,
    )
    # The command sandbox lets a command write its home; a probe writes nowhere.
    return SandboxPlan(tuple(rule for rule in plan.rules if rule != (home_real, NOT_EXECUTABLE)))


class Dialogue(Protocol):
    """A sans-IO conversation with a probed program over its stdin and stdout (the MCP
    metadata probe's `McpDialogue`): what to write first, what to write after each chunk
    it printed, and whether it is over (the probe then stops the program)."""

    def opening(self) -> bytes: ...

    def receive(self, chunk: bytes) -> bytes: ...

    @property
    def finished(self) -> bool: ...


async def run_probe(
    argv: Sequence[str],
    *,
    timeout_secs: float,
    env: Mapping[str, str],
    cwd: str,
    output_cap: int,
    ruleset: Callable[[], int] | None,
    dialogue: Dialogue | None = None,
) -> ProbeOutcome:
    """Run `argv` (argv[0] an absolute path) under the intermediate. Raises `CannotStart`
    when not even the intermediate could start (or the ruleset not be built).

    With a `dialogue`, the program's stdin is a pipe the dialogue writes, its stdout goes
    to the dialogue (the cap counts it; `output` stays empty), its stderr nowhere; the
    program is stopped once the dialogue is finished."""
    ruleset_fd = -1
    if ruleset is not None:
        try:
            ruleset_fd = await trio.to_thread.run_sync(ruleset)
        except (SandboxUnavailable, OSError) as exc:
            raise CannotStart("sandbox_failed", f"sandbox failed: {exc}") from None
    status_r, status_w = os.pipe()
    passed = (status_w,) if ruleset_fd < 0 else (status_w, ruleset_fd)
    try:
        proc = await open_child(
            reaped_argv(
                argv,
                timeout_secs=timeout_secs,
                ruleset_fd=ruleset_fd,
                status_fd=status_w,
                seccomp=no_socket_filter(),
            ),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL if dialogue is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if dialogue is None else subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=passed,
            preexec_fn=functools.partial(confine_intermediate, os.getpid(), cap_last_cap()),
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        os.close(status_r)
        raise CannotStart("io_error", f"cannot start the probe: {exc}"[:300]) from None
    finally:
        os.close(status_w)
        if ruleset_fd >= 0:
            os.close(ruleset_fd)
    stdout = proc.stdout
    assert stdout is not None
    output = bytearray()
    seen = 0
    try:
        # The intermediate keeps the timeout; this bound only covers it failing to.
        with trio.move_on_after(timeout_secs + STOP_GRACE_SECS):
            if dialogue is None:
                while chunk := await stdout.receive_some(_READ_CHUNK):
                    if len(output) < output_cap:
                        output += chunk[: output_cap - len(output)]
                seen = len(output)
            else:
                seen = await _converse(proc, dialogue, output_cap)
            if dialogue is None or not dialogue.finished:
                await proc.wait()
    finally:
        with trio.CancelScope(shield=True):
            await _stop(proc)
            if proc.stdin is not None:
                await proc.stdin.aclose()
            await stdout.aclose()
            status = _read_status(status_r)
    return ProbeOutcome(
        status=status or "stopped",
        output=output.decode("utf-8", errors="replace"),
        truncated=seen >= output_cap,
    )


async def _converse(proc: Child, dialogue: Dialogue, output_cap: int) -> int:
    """Feed `dialogue` what the program prints and write back what it says, until it is
    finished, the program's output ends, or `output_cap` bytes came; the bytes read."""
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None
    assert stdout is not None
    seen = 0
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await stdin.send_all(dialogue.opening())
        while not dialogue.finished and seen < output_cap:
            chunk = await stdout.receive_some(_READ_CHUNK)
            if not chunk:
                break
            chunk = chunk[: output_cap - seen]
            seen += len(chunk)
            reply = dialogue.receive(chunk)
            if reply:
                await stdin.send_all(reply)
    return seen


async def _stop(proc: Child) -> None:
    """Ask the intermediate to end the probe's tree; kill its group if it does not."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    with trio.move_on_after(STOP_GRACE_SECS):
        await proc.wait()
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


def _read_status(fd: int) -> str:
    try:
        os.set_blocking(fd, False)
        return os.read(fd, 256).decode(errors="replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)
