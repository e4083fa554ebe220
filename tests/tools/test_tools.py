"""File and shell tools on a real tree: results, codes, races, timeouts, environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.conftest import PATIENCE
from tests.policy.helpers import rules
from zeroclaw.tools import ActionBudget, ToolResult, file_list, file_read, file_write, run_shell
from zeroclaw.tools._shell import PRIVATE_DIRS

ALLOWED = frozenset({"ls", "cat", "echo", "sleep", "env", "rm", "cp", "yes", "head", "printenv"})


def test_file_tools(tree: Path) -> None:
    r = rules(tree)
    assert file_read(r, "notes.txt").output == "mine"
    assert file_read(r, "../beta/file").output == "beta"
    assert file_write(r, "made/here.txt", "hello").ok
    assert (tree / "ws" / "alpha" / "made" / "here.txt").read_text() == "hello"
    listing = file_list(r, ".")
    assert "notes.txt" in listing.output.splitlines() and "sub/" in listing.output.splitlines()
    for result, code in [
        (file_read(r, "link_out"), "path_not_allowed"),
        (file_read(r, "../gamma/file"), "path_not_allowed"),
        (file_write(r, "../beta/file", "x"), "path_not_allowed"),
        (file_read(r, "link_forbidden"), "forbidden_path"),
        (file_write(rules(tree, may_write=False), "notes.txt", "x"), "read_only_profile"),
        (file_list(r, "../../outside"), "path_not_allowed"),
    ]:
        assert (result.ok, result.error_code) == (False, code), result


def test_a_symlink_swapped_in_after_the_check_is_refused(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the policy approves a regular file; before the open it becomes a symlink."""
    import zeroclaw.tools._files as files

    target = tree / "ws" / "alpha" / "race.txt"
    target.write_text("innocent")
    original = files.check_path

    def check_then_swap(*args: object, **kwargs: object) -> object:
        decision = original(*args, **kwargs)  # type: ignore[arg-type]
        target.unlink()
        os.symlink(tree / "outside" / "secret.txt", target)  # the attacker's move
        return decision

    monkeypatch.setattr(files, "check_path", check_then_swap)
    result = file_read(rules(tree), "race.txt")
    assert (result.ok, result.error_code) == (False, "path_not_allowed")
    assert "secret" not in result.output


def test_large_reads_are_truncated(tree: Path) -> None:
    (tree / "ws" / "alpha" / "big.txt").write_text("x" * 1000)
    result = file_read(rules(tree), "big.txt", max_bytes=100)
    assert len(result.output) == 100 and result.data["truncated"]


GIT_SETTINGS = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": ":",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}


async def shell(tree: Path, command: str, **kw: object) -> ToolResult:
    args: dict[str, object] = {
        "rules": rules(tree),
        "allowed_commands": ALLOWED,
        "may_run_shell": True,
        "block_high_risk": True,
        "asks_approval": False,
        "approver": None,
        "timeout_secs": 5.0,
        "agent_env": {"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-secret", "LANG": "C.UTF-8"},
        **kw,
    }
    return await run_shell(command, **args)  # type: ignore[arg-type]


async def test_allowed_command_runs_in_the_workspace(tree: Path) -> None:
    result = await shell(tree, "ls")
    assert result.ok and "notes.txt" in result.output
    assert (await shell(tree, "cat notes.txt")).output == "mine"


async def test_refused_commands(tree: Path) -> None:
    for command, code in [
        ("rm notes.txt", "command_not_allowed"),
        ("sh -c ls", "command_not_allowed"),
        ("/bin/ls", "command_not_allowed"),
        ("curl x", "command_not_allowed"),
        ("cat ../../outside/secret.txt", "path_not_allowed"),
    ]:
        result = await shell(tree, command)
        assert (result.ok, result.error_code) == (False, code), command
    readonly = await shell(tree, "ls", may_run_shell=False)
    assert readonly.error_code == "read_only_profile"


async def test_over_long_run_is_killed(tree: Path) -> None:
    with trio.fail_after(PATIENCE):
        result = await shell(tree, "sleep 30", timeout_secs=0.5)
    assert (result.ok, result.error_code) == (False, "timeout")


async def test_output_is_capped(tree: Path) -> None:
    with trio.fail_after(PATIENCE):
        result = await shell(tree, "yes", timeout_secs=0.5, output_cap=1000)
    assert len(result.output) == 1000 and result.data["truncated"]


async def test_environment_is_scrubbed_and_home_is_private(tree: Path) -> None:
    result = await shell(tree, "printenv")
    env = dict(line.split("=", 1) for line in result.output.splitlines())
    assert "OPENAI_API_KEY" not in env and "sk-secret" not in result.output
    allowed = {"PATH", "LANG", "LC_ALL", "TZ", "GIT_CEILING_DIRECTORIES", *PRIVATE_DIRS}
    assert env.keys() <= allowed | GIT_SETTINGS.keys()
    assert {env[name] for name in PRIVATE_DIRS} == {env["HOME"]}
    home = Path(env["HOME"])
    assert tree not in home.parents  # outside the workspace and everything around it
    assert not await trio.Path(home).exists()  # removed once the command ended
    assert {k: env[k] for k in GIT_SETTINGS} == GIT_SETTINGS
    assert env["GIT_CEILING_DIRECTORIES"] == str(tree / "ws")  # no repository above it


async def test_approval_for_medium_risk(tree: Path) -> None:
    asked: list[str] = []

    async def yes(what: str) -> bool:
        asked.append(what)
        return True

    async def no(what: str) -> bool:
        return False

    assert (await shell(tree, "ls", asks_approval=True)).ok  # low risk: no question
    assert (
        await shell(tree, "cp notes.txt c.txt", asks_approval=True)
    ).error_code == "approval_denied"
    assert (
        await shell(tree, "cp notes.txt c.txt", asks_approval=True, approver=no)
    ).error_code == "approval_denied"
    assert (await shell(tree, "cp notes.txt c.txt", asks_approval=True, approver=yes)).ok
    assert asked == ["run: cp notes.txt c.txt"]


async def test_a_shell_approval_waits_as_long_as_the_profile_allows(
    tree: Path, autojump_clock: object
) -> None:
    # The approver a tool gets is already bounded by the profile's approval_timeout_secs
    # (120 s by default); the shell once cut every question at its own 60 s.
    answered: list[float] = []

    async def slow_no(what: str) -> bool:
        await trio.sleep(90)
        answered.append(trio.current_time())
        return False

    result = await shell(tree, "cp notes.txt c.txt", asks_approval=True, approver=slow_no)
    assert result.error_code == "approval_denied" and len(answered) == 1


def test_action_budget() -> None:
    budget = ActionBudget(3, window_secs=60)
    assert [budget.take(t) for t in (0, 1, 2, 3)] == [True, True, True, False]
    assert budget.remaining(30) == 0
    assert budget.take(60.5)  # the first action left the window
