"""Shell command policy: argv parsing, allowlist, interpreters, high risk, path arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.policy.helpers import rules
from zeroclaw.policy import check_path, decide_command, parse

ALLOWED = frozenset(
    {"ls", "cat", "grep", "wc", "echo", "git", "find", "rm", "sh", "env", "python3", "cp"}
)


def run(
    tree: Path, command: str, *, readonly: bool = False, block: bool = True
) -> tuple[bool, str | None, str]:
    r = rules(tree, may_write=not readonly)
    d = decide_command(
        command,
        allowed_commands=ALLOWED,
        may_run_shell=not readonly,
        block_high_risk=block,
        check_path=lambda p, a: check_path(r, p, a),
    )
    return d.allowed, d.code, d.risk


@pytest.mark.parametrize(
    ("command", "code", "risk"),
    [
        ("ls -la", None, "low"),
        ("grep -r TODO .", None, "low"),
        ("cat notes.txt ../beta/file", None, "low"),
        ("echo 'a; rm -rf /' > out", None, "low"),  # ';' and '>' are plain arguments here
        ("git status", None, "medium"),
        ("cp notes.txt copy.txt", None, "medium"),
        ("cat ../../outside/secret.txt", "path_not_allowed", "high"),
        ("cat /proc/self/root/etc/hostname", "path_not_allowed", "high"),
        ("grep x /", "path_not_allowed", "high"),
        ("cat link_out", "path_not_allowed", "high"),
        ("cp notes.txt ../beta/x", "path_not_allowed", "high"),  # a read grant is not a write grant
        ("ls --color=never ../gamma", "path_not_allowed", "high"),
        ("rm notes.txt", "command_not_allowed", "high"),
        ("sh -c 'cat notes.txt'", "command_not_allowed", "high"),
        ("env cat notes.txt", "command_not_allowed", "high"),
        ("python3 -c 'print(1)'", "command_not_allowed", "high"),
        ("/bin/cat notes.txt", "command_not_allowed", "high"),
        ("./cat notes.txt", "command_not_allowed", "high"),
        ("curl http://x", "command_not_allowed", "high"),
        ("find . -delete", "command_not_allowed", "high"),
        ("find . -exec cat {} ;", "command_not_allowed", "high"),
        ("git -c core.pager=sh log", "command_not_allowed", "high"),
        ("", "command_not_allowed", "high"),
        ("cat 'unbalanced", "command_not_allowed", "high"),
    ],
)
def test_commands(tree: Path, command: str, code: str | None, risk: str) -> None:
    allowed, got_code, got_risk = run(tree, command)
    assert (got_code, got_risk) == (code, risk), command
    assert allowed == (code is None)


def test_readonly_runs_nothing(tree: Path) -> None:
    assert run(tree, "ls", readonly=True)[1] == "read_only_profile"


def test_high_risk_allowed_only_when_not_blocked(tree: Path) -> None:
    assert run(tree, "rm notes-copy.txt", block=False) == (True, None, "high")
    assert run(tree, "rm ../../outside/secret.txt", block=False)[1] == "path_not_allowed"
    assert run(tree, "sh -c ls", block=False)[1] == "command_not_allowed"  # interpreters: never


def test_parse() -> None:
    assert parse("grep 'a b' \"c d\"") == ("grep", "a b", "c d")
    assert parse("   ") is None
    assert parse("x" * 9000) is None
