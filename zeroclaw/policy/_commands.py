"""Which shell commands an agent may run. Pure: argv in, decision out.

Commands are split with shlex (POSIX rules) and run without a shell, so `;`, `|`, `$(...)`
and redirections are plain arguments, never syntax. Then:

- readonly profiles run nothing                                  -> read_only_profile
- the program must be a bare name on the allowlist (no '/')      -> command_not_allowed
- interpreters and wrappers that would run arbitrary code are
  refused even when allowlisted (sh -c, env, xargs, python, ...)  -> command_not_allowed
- with block_high_risk_commands, destructive programs and
  dangerous flags are refused (rm, dd, chmod, find -delete, ...) -> command_not_allowed
- every argument that could name a file is checked as a path     -> that path's code
  (operands; everything after `--`; the value of `--opt=value` and `key=value`; every
  tail of a short-option cluster, since `-C/etc` and `-f/etc/shadow` glue a value on)
- what remains is low risk (reads) or medium risk (may change
  something): medium needs approval under `supervised`.

Dangerous long flags match their abbreviations too (`--to-comm=` is `--to-command`), and a
dangerous short flag matches inside a cluster (`-xvIprog`). This parser is the first layer
only: the kernel (a Landlock ruleset per command, ADR 0012) is what makes an allowed
program unable to run another one or to open a forbidden path, whatever the spelling.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._paths import Access, PathDecision

Risk = Literal["low", "medium", "high"]

INTERPRETERS = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "csh",
        "tcsh",
        "fish",
        "busybox",
        "env",
        "xargs",
        "nohup",
        "nice",
        "timeout",
        "stdbuf",
        "setsid",
        "sudo",
        "su",
        "doas",
        "python",
        "python3",
        "perl",
        "ruby",
        "node",
        "php",
        "lua",
        "awk",
        "gawk",
        "mawk",
        "tclsh",
        "expect",
        "ssh",
        "script",
    }
)
HIGH_RISK = frozenset(
    {
        "rm",
        "rmdir",
        "dd",
        "mkfs",
        "shred",
        "chmod",
        "chown",
        "chgrp",
        "chattr",
        "kill",
        "pkill",
        "killall",
        "reboot",
        "shutdown",
        "mount",
        "umount",
        "truncate",
        "ln",
    }
)
DANGEROUS_FLAGS = {
    "find": (
        "-delete",
        "-exec",
        "-execdir",
        "-ok",
        "-okdir",
        "-fprint",
        "-fprint0",
        "-fprintf",
        "-fls",
    ),
    "git": ("--exec", "-c", "--upload-pack", "--receive-pack"),
    "sed": ("-i", "--in-place"),
    "tar": ("--to-command", "--use-compress-program", "-I", "--checkpoint-action"),
}
READ_ONLY = frozenset(
    {
        "ls",
        "cat",
        "grep",
        "egrep",
        "fgrep",
        "head",
        "tail",
        "wc",
        "echo",
        "date",
        "pwd",
        "find",
        "stat",
        "file",
        "du",
        "sort",
        "uniq",
        "cut",
        "diff",
        "tree",
        "which",
        "basename",
        "dirname",
    }
)
WRITES_ARGS = frozenset({"cp", "mv", "touch", "mkdir", "tee", "git", "sed", "tar"})
MAX_COMMAND_CHARS = 8192


@dataclass(frozen=True, slots=True)
class CommandDecision:
    allowed: bool
    code: str | None
    argv: tuple[str, ...]
    risk: Risk
    reason: str


PathCheck = Callable[[str, Access], PathDecision]


def parse(command: str) -> tuple[str, ...] | None:
    if not command.strip() or len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        return None
    try:
        return tuple(shlex.split(command, comments=False, posix=True))
    except ValueError:  # unbalanced quotes
        return None


def decide_command(
    command: str,
    *,
    allowed_commands: frozenset[str],
    may_run_shell: bool,
    block_high_risk: bool,
    check_path: PathCheck,
) -> CommandDecision:
    argv = parse(command)
    if not argv:
        return CommandDecision(False, "command_not_allowed", (), "high", "not a parsable command")
    program, args = argv[0], argv[1:]
    if not may_run_shell:
        return CommandDecision(
            False, "read_only_profile", argv, "high", "the risk profile is readonly"
        )
    if "/" in program:
        return CommandDecision(
            False,
            "command_not_allowed",
            argv,
            "high",
            "run programs by their allowlisted name, not by path",
        )
    if program not in allowed_commands:
        return CommandDecision(
            False, "command_not_allowed", argv, "high", f"{program!r} is not in allowed_commands"
        )
    if program in INTERPRETERS:
        return CommandDecision(
            False,
            "command_not_allowed",
            argv,
            "high",
            f"{program!r} runs arbitrary code; it is never run, even when allowlisted",
        )
    risky_flags = [
        a for a in _options(args) for flag in DANGEROUS_FLAGS.get(program, ()) if _spells(a, flag)
    ]
    if block_high_risk and (program in HIGH_RISK or risky_flags):
        what = f"flag {risky_flags[0]!r}" if risky_flags else "program"
        return CommandDecision(
            False, "command_not_allowed", argv, "high", f"high-risk {what} blocked by the profile"
        )
    access: Access = "write" if program in WRITES_ARGS or program in HIGH_RISK else "read"
    for arg, candidate in path_candidates(args):
        decision = check_path(candidate, access)
        if not decision.allowed:
            return CommandDecision(
                False, decision.code, argv, "high", f"argument {arg!r}: {decision.reason}"
            )
    risk: Risk = "low" if program in READ_ONLY else ("high" if program in HIGH_RISK else "medium")
    return CommandDecision(True, None, argv, risk, "allowed")


def _options(args: tuple[str, ...]) -> list[str]:
    """The arguments a program may read as options: those before `--` that start with '-'."""
    options = []
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("-") and arg != "-":
            options.append(arg)
    return options


def _spells(arg: str, flag: str) -> bool:
    """Whether option `arg` is a spelling of dangerous `flag`."""
    name = arg.split("=", 1)[0]
    if flag.startswith("--"):
        # getopt_long takes any unambiguous prefix: --to-comm is --to-command.
        return len(name) >= 4 and flag.startswith(name)
    if len(flag) == 2 and not arg.startswith("--"):
        # A short flag, alone, with a glued value (-Iprog), or inside a cluster (-xvI).
        return flag[1] in arg[1:]
    return name == flag  # find's single-dash words (-exec) are never abbreviated


def path_candidates(args: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every (argument, string) pair where the string could be a path the program opens.

    Over-inclusive on purpose: a short-option cluster contributes each of its tails, since
    the parser cannot know which letter takes a glued value (`-C/etc`, `-xf/etc/x`)."""
    out: list[tuple[str, str]] = []
    operands_only = False
    for arg in args:
        if operands_only:
            out.append((arg, arg))  # after `--`, even `-/../x` is a file name
        elif arg == "--":
            operands_only = True
        elif arg.startswith("--"):
            if "=" in arg:
                out.append((arg, arg.split("=", 1)[1]))
        elif arg.startswith("-") and arg != "-":
            out.extend((arg, arg[i:]) for i in range(1, len(arg)) if arg[i:] not in ("-", ""))
        else:
            out.append((arg, arg))
            if "=" in arg:  # key=value operands (dd if=..., make-style)
                out.append((arg, arg.split("=", 1)[1]))
    return [(arg, c) for arg, c in out if c]
