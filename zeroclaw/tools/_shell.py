"""The shell tool: policy, approval, then the program itself — never a shell interpreter.

The child runs with the workspace as cwd, its own process group (a timeout kills all it
started), a death signal tied to the agent, stdin from /dev/null, an output cap, and an
environment of PATH, HOME (the workspace) and locale only: the agent's provider key is in
the agent's environment, and must not reach a command the model chose.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping

import trio

from .._prctl import set_death_signal
from ..policy import PathRules, check_path, decide_command
from ._base import Approver, ToolResult, as_tool_error

OUTPUT_CAP_BYTES = 64 * 1024
APPROVAL_TIMEOUT_SECS = 60.0
_KEEP = ("PATH", "LANG", "LC_ALL", "TZ")


def shell_environment(agent_env: Mapping[str, str], workspace: str) -> dict[str, str]:
    env = {k: agent_env[k] for k in _KEEP if k in agent_env}
    env["HOME"] = workspace
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


async def run_shell(
    command: str,
    *,
    rules: PathRules,
    allowed_commands: frozenset[str],
    may_run_shell: bool,
    block_high_risk: bool,
    asks_approval: bool,
    approver: Approver | None,
    timeout_secs: float,
    agent_env: Mapping[str, str],
    output_cap: int = OUTPUT_CAP_BYTES,
) -> ToolResult:
    decision = decide_command(
        command,
        allowed_commands=allowed_commands,
        may_run_shell=may_run_shell,
        block_high_risk=block_high_risk,
        check_path=lambda path, access: check_path(rules, path, access),
    )
    if not decision.allowed:
        return ToolResult.refused(
            as_tool_error(decision.code, "command_not_allowed"), decision.reason
        )
    if asks_approval and decision.risk != "low":
        if approver is None:
            return ToolResult.refused(
                "approval_denied", "needs approval and no one can be asked here"
            )
        approved = False
        with trio.move_on_after(APPROVAL_TIMEOUT_SECS):
            approved = await approver(f"run: {command}")
        if not approved:
            return ToolResult.refused("approval_denied", "the operator did not approve")
    workspace = str(rules.workspace)
    env = shell_environment(agent_env, workspace)
    program = shutil.which(decision.argv[0], path=env["PATH"])
    if program is None:
        return ToolResult(False, "", "not_found", f"{decision.argv[0]!r} is not on PATH")
    try:
        proc = await trio.lowlevel.open_process(
            [program, *decision.argv[1:]],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Dies with the agent: a SIGKILLed agent leaves no command running.
            preexec_fn=functools.partial(set_death_signal, os.getpid()),
        )
    except OSError as exc:  # not executable, denied by the kernel, arguments too long, ...
        name = errno.errorcode.get(exc.errno or 0, "errno ?")
        return ToolResult(False, "", "io_error", f"cannot start {decision.argv[0]!r}: {name}")
    except (ValueError, subprocess.SubprocessError) as exc:  # a NUL in an argument, say
        return ToolResult(
            False, "", "bad_arguments", f"cannot start {decision.argv[0]!r}: {exc}"[:300]
        )
    output = bytearray()
    timed_out = False
    try:
        assert proc.stdout is not None
        with trio.move_on_after(timeout_secs) as scope:
            while chunk := await proc.stdout.receive_some(65536):
                if len(output) < output_cap:
                    output += chunk[: output_cap - len(output)]
            await proc.wait()
        timed_out = scope.cancelled_caught
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await proc.wait()
    text = output.decode("utf-8", errors="replace")
    truncated = len(output) >= output_cap
    if timed_out:
        return ToolResult(
            False, text, "timeout", f"killed after {timeout_secs:g}s", {"truncated": truncated}
        )
    ok = proc.returncode == 0
    return ToolResult(
        ok,
        text,
        None if ok else "exit_status",
        "" if ok else f"exit code {proc.returncode}",
        {"exit_code": proc.returncode, "truncated": truncated},
    )
