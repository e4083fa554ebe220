"""The shell tool in three steps: the pure decision (`decide_shell`: policy, allowlist,
risk -> run, refuse or ask), the approval, then the program itself — never a shell
interpreter — through the capped process runner (`zeroclaw._process.run_capped`).

The child runs with the workspace as cwd, its own process group (a timeout kills all it
started), a death signal tied to the agent, stdin from /dev/null and an output cap. Where
the kernel has Landlock (and the profile's `sandbox` is not "none") it also runs under a
ruleset of its own, enforced between fork and exec right after the death signal (ADR 0012):

- execute: only the real paths of the `allowed_commands` found on PATH (interpreters and
  wrappers excluded) and their dynamic loader. A program that tries to start anything else
  — `tar -I`, `--to-command`, a git alias `!cmd`, a pager, `find -exec` — gets EACCES;
- read: the workspace, granted siblings, the devices and the system paths the agent reads
  (with `full`, whose policy lifts workspace_only: all of /), minus every forbidden path
  and every other agent's workspace (a directory with one of those below it is granted
  entry by entry);
- write: the workspace, write-granted siblings and the command's private home only.

Its environment is built here and nothing else reaches it (the agent's provider key is
in the agent's environment and must not reach a command the model chose):

  PATH, LANG, LC_ALL, TZ        from the agent (PATH defaults to /usr/local/bin:/usr/bin:/bin)
  HOME, TMPDIR, XDG_CONFIG_HOME, XDG_CACHE_HOME, XDG_DATA_HOME, XDG_STATE_HOME
                                one empty private directory, 0700, made for this command
                                outside the workspace and removed afterwards
  GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null
                                git reads no system or user configuration
  GIT_CEILING_DIRECTORIES       the workspace's parent: git finds no repository above it
  GIT_TERMINAL_PROMPT=0, GIT_EDITOR=:, PAGER=cat, GIT_PAGER=cat
                                nothing prompts, edits or pages

A repository's own `.git/config` in the workspace is still read (the agent can write it);
that `core.pager`, `core.fsmonitor` or an alias `!cmd` found there cannot start anything is
the kernel's execute rule, not this environment. Whatever the command leaves running when
it ends is killed (`_orphans`).
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

import trio

from .._process import DEFAULT_PATH, CannotStart, run_capped
from ..policy import (
    INTERPRETERS,
    SYSTEM_READ_ONLY,
    PathCheck,
    PathRules,
    ProcessConfinement,
    build_ruleset,
    check_path,
    command_executables,
    decide_command,
    plan_command_sandbox,
)
from ._base import Approver, ToolErrorCode, ToolResult, as_tool_error
from ._orphans import CommandReaper

OUTPUT_CAP_BYTES = 64 * 1024
_KEEP = ("PATH", "LANG", "LC_ALL", "TZ")
PRIVATE_DIRS = (
    "HOME",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
)

ShellVerdict = Literal["run", "refuse", "ask"]


@dataclass(frozen=True, slots=True)
class ShellDecision:
    """What to do with one command line. `ask`: run it once the operator approved
    `reason` (what they are asked); `refuse`: `code` and `reason` say why."""

    verdict: ShellVerdict
    argv: tuple[str, ...]
    code: ToolErrorCode | None = None
    reason: str = ""


def decide_shell(
    command: str,
    *,
    allowed_commands: frozenset[str],
    may_run_shell: bool,
    block_high_risk: bool,
    asks_approval: bool,
    check_path: PathCheck,
) -> ShellDecision:
    """The command policy (ADR 0007) and the approval rule: under a profile that asks,
    anything but a low-risk (read-only) program needs the operator's yes. Pure."""
    decision = decide_command(
        command,
        allowed_commands=allowed_commands,
        may_run_shell=may_run_shell,
        block_high_risk=block_high_risk,
        check_path=check_path,
    )
    if not decision.allowed:
        code = as_tool_error(decision.code, "command_not_allowed")
        return ShellDecision("refuse", decision.argv, code, decision.reason)
    if asks_approval and decision.risk != "low":
        return ShellDecision("ask", decision.argv, None, f"run: {command}")
    return ShellDecision("run", decision.argv)


@dataclass(frozen=True)
class ShellSettings:
    """An agent's shell settings, from its risk and runtime profiles. `confine`: each
    command under its own Landlock ruleset; `home_root`: where private homes are made
    (None: the system's temporary directory)."""

    allowed_commands: frozenset[str]
    may_run_shell: bool
    block_high_risk: bool
    timeout_secs: float
    agent_env: Mapping[str, str]
    confine: bool = False
    home_root: str | None = None
    output_cap: int = OUTPUT_CAP_BYTES


def shell_environment(agent_env: Mapping[str, str], workspace: str, home: str) -> dict[str, str]:
    """The command's whole environment (see the module docstring)."""
    env = {k: agent_env[k] for k in _KEEP if k in agent_env}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(dict.fromkeys(PRIVATE_DIRS, home))
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CEILING_DIRECTORIES": str(PurePosixPath(workspace).parent),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_EDITOR": ":",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
        }
    )
    return env


def command_ruleset(
    rules: PathRules, allowed_commands: Collection[str], path: str, home: str
) -> int:
    """A Landlock ruleset fd for one command of an agent with these rules (ADR 0012)."""
    runnable = [name for name in allowed_commands if name not in INTERPRETERS]
    return program_ruleset(rules, command_executables(runnable, path), home)


def program_ruleset(
    rules: PathRules,
    executables: Collection[str],
    home: str,
    confinement: ProcessConfinement | None = None,
) -> int:
    """A Landlock ruleset fd for a program run for an agent with these rules (a shell
    command, an adapter): only `executables` run; the workspace is writable only when the
    agent may write. `confinement`: its scopes and TCP rules (None: a shell command's,
    which inherits its agent's TCP rules from the agent's domain)."""
    plan = plan_command_sandbox(
        workspace=str(rules.workspace),
        home=home,
        executables=executables,
        grants=[(str(g.path), g.mode) for g in rules.grants],
        excluded=[str(p) for p in (*rules.forbidden, *rules.other_workspaces)],
        # Reads follow the policy: `full` (no workspace_only) reads anywhere not excluded.
        # The system paths stay listed: a confined agent cannot list / to carve it.
        system=SYSTEM_READ_ONLY if rules.workspace_only else (*SYSTEM_READ_ONLY, "/"),
        workspace_writable=rules.may_write,
        code=[str(p) for p in rules.code],
    )
    return build_ruleset(plan, confinement)


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
    confine: bool = False,
    home_root: str | None = None,
) -> ToolResult:
    """Run one command. `confine`: under its own Landlock ruleset (the caller checked that
    the kernel has Landlock and the profile wants it). `home_root`: where the private home
    is made (the agent's runtime area; None: the system's temporary directory)."""
    decision = decide_shell(
        command,
        allowed_commands=allowed_commands,
        may_run_shell=may_run_shell,
        block_high_risk=block_high_risk,
        asks_approval=asks_approval,
        check_path=lambda path, access: check_path(rules, path, access),
    )
    if decision.verdict == "refuse":
        return ToolResult.refused(decision.code or "command_not_allowed", decision.reason)
    if decision.verdict == "ask":
        if approver is None:
            return ToolResult.refused(
                "approval_denied", "needs approval and no one can be asked here"
            )
        # The approver is the turn's channel, already bounded by the profile's
        # approval_timeout_secs (ToolContext): no second, shorter clock here.
        if not await approver(decision.reason):
            return ToolResult.refused("approval_denied", "the operator did not approve")
    workspace = str(rules.workspace)
    path = agent_env.get("PATH", DEFAULT_PATH)
    program = shutil.which(decision.argv[0], path=path)
    if program is None:
        return ToolResult(False, "", "not_found", f"{decision.argv[0]!r} is not on PATH")
    try:
        home = await trio.to_thread.run_sync(
            functools.partial(tempfile.mkdtemp, prefix="cmd-", dir=home_root)
        )
    except OSError as exc:
        return ToolResult(False, "", "io_error", f"no private home for the command: {exc}")
    try:
        return await _run(
            [program, *decision.argv[1:]],
            workspace=workspace,
            env=shell_environment(agent_env, workspace, home),
            ruleset_for=(
                functools.partial(command_ruleset, rules, allowed_commands, path, home)
                if confine
                else None
            ),
            timeout_secs=timeout_secs,
            output_cap=output_cap,
        )
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(
                functools.partial(shutil.rmtree, home, ignore_errors=True)
            )


async def _run(
    argv: list[str],
    *,
    workspace: str,
    env: dict[str, str],
    ruleset_for: functools.partial[int] | None,
    timeout_secs: float,
    output_cap: int,
) -> ToolResult:
    """The capped runner, with the agent's orphan reaper told of the spawn, as a result."""
    try:
        outcome = await run_capped(
            argv,
            timeout_secs=timeout_secs,
            env=env,
            cwd=workspace,
            output_cap=output_cap,
            ruleset=ruleset_for,
            tracker=CommandReaper.instance(),
        )
    except CannotStart as exc:
        detail = f"the command's {exc.detail}" if exc.kind == "sandbox_failed" else exc.detail
        return ToolResult(False, "", exc.kind, detail)
    if outcome.timed_out:
        return ToolResult(
            False,
            outcome.output,
            "timeout",
            f"killed after {timeout_secs:g}s",
            {"truncated": outcome.truncated},
        )
    ok = outcome.exit_code == 0
    return ToolResult(
        ok,
        outcome.output,
        None if ok else "exit_status",
        "" if ok else f"exit code {outcome.exit_code}",
        {"exit_code": outcome.exit_code, "truncated": outcome.truncated},
    )
