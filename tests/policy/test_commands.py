"""Shell command policy: argv parsing, allowlist, interpreters, high risk, path arguments."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policy.helpers import rules
from zeroclaw.policy import check_path, decide_command, parse
from zeroclaw.policy._commands import path_candidates

ALLOWED = frozenset(
    {"ls", "cat", "grep", "wc", "echo", "git", "find", "rm", "sh", "env", "python3", "cp"}
    | {"tar", "date", "sed", "dd"}
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


# Finding 4: paths hidden in arguments that start with '-' (or behind '='), each refused.
HIDDEN = "outside/forbidden/key"


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("cat -- -/../../../outside/secret.txt", "path_not_allowed"),  # an operand after --
        ("cat -- {tree}/" + HIDDEN, "forbidden_path"),
        ("tar -C{tree}/outside -cf x.tar secret.txt", "path_not_allowed"),  # glued value
        ("date -f{tree}/" + HIDDEN, "forbidden_path"),
        ("tar -xvf{tree}/" + HIDDEN, "forbidden_path"),  # glued at the end of a cluster
        ("grep --file={tree}/" + HIDDEN + " notes.txt", "forbidden_path"),
        ("grep -f../../outside/secret.txt notes.txt", "path_not_allowed"),
        ("dd if={tree}/" + HIDDEN, "command_not_allowed"),  # dd's operands: key=value
        ("cat -/../../../outside/secret.txt", "path_not_allowed"),
    ],
)
def test_paths_hidden_in_option_spellings_are_checked(tree: Path, command: str, code: str) -> None:
    assert run(tree, command.format(tree=tree))[1] == code, command


def test_key_value_operands_are_checked_as_paths(tree: Path) -> None:
    assert run(tree, f"dd if={tree}/{HIDDEN}", block=False)[1] == "forbidden_path"
    assert run(tree, "dd if=notes.txt of=copy.txt", block=False)[0]


# Finding 3's parser half: abbreviated and glued spellings of dangerous flags.
@pytest.mark.parametrize(
    "command",
    [
        "tar --to-comm=sh -xf a.tar",
        "tar --to-command=sh -xf a.tar",
        "tar --checkpoint=1 --checkpoint-act=exec=sh -cf a.tar notes.txt",
        "tar --use-compress-prog=sh -cf a.tar notes.txt",
        "tar '-I/usr/bin/python3 x.py' -cf a.tar notes.txt",
        "tar -xvIsh -f a.tar",
        "sed -ni s/a/b/ notes.txt",
        "git --upload-p=x fetch",
        "find . -exec cat {} ;",
    ],
)
def test_dangerous_flags_are_recognised_in_every_spelling(tree: Path, command: str) -> None:
    assert run(tree, command)[1] == "command_not_allowed", command


def test_ordinary_options_stay_allowed(tree: Path) -> None:
    for command in ("ls -la", "grep -rn TODO .", "tar -tvf a.tar", "git log --oneline -n5"):
        assert run(tree, command)[0], command


def test_path_candidates() -> None:
    assert path_candidates(("-la", "--color=never", "x", "--", "-y", "--z")) == [
        ("-la", "la"),
        ("-la", "a"),
        ("--color=never", "never"),
        ("x", "x"),
        ("-y", "-y"),
        ("--z", "--z"),
    ]
    tails = [c for _, c in path_candidates(("-C/etc",))]
    assert tails == ["C/etc", "/etc", "etc", "tc", "c"]  # every letter may take a glued value
    assert path_candidates(("if=/x", "-", "--flag")) == [
        ("if=/x", "if=/x"),
        ("if=/x", "/x"),
        ("-", "-"),  # stdin, or a file named '-': harmless to check
    ]


@settings(max_examples=50, deadline=None)
@given(
    letters=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", max_size=4),
    style=st.sampled_from(["glued", "long", "after_dashdash"]),
)
def test_a_forbidden_path_is_refused_however_it_is_glued(
    tree: Path, letters: str, style: str
) -> None:
    target = f"{tree}/{HIDDEN}"
    arg = {
        "glued": f"-{letters}{target}",
        "long": f"--{letters or 'x'}={target}",
        "after_dashdash": f"-- {target}",
    }[style]
    assert run(tree, f"cat {arg}")[1] == "forbidden_path", arg
