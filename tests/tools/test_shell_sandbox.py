"""Each shell command under its own Landlock ruleset: real programs, real kernel refusals.

Every attack here is one the parser lets through (block_high_risk_commands off, or a
spelling it cannot see), so what stops it is the kernel; the same command unconfined
shows the attack is real."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from zeroclaw.policy import abi_version, rules_for
from zeroclaw.tools import ToolResult, run_shell
from zeroclaw.tools._shell import OUTPUT_CAP_BYTES, _run, command_ruleset, shell_environment

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")

COMMANDS = frozenset({"tar", "git", "find", "cat", "date", "ls", "which", "kill"})


@pytest.fixture
def box(tmp_path: Path) -> Path:
    ws = tmp_path / "ws" / "alpha"
    ws.mkdir(parents=True)
    (ws / "notes.txt").write_text("mine\n")
    (tmp_path / "ws" / "beta").mkdir()
    (tmp_path / "ws" / "beta" / "diary.txt").write_text("beta's diary\n")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("forbidden key\n")
    (tmp_path / "open.txt").write_text("not forbidden\n")
    subprocess.run(["tar", "-cf", "a.tar", "notes.txt"], cwd=ws, check=True)
    return tmp_path


async def shell(
    box: Path, command: str, *, confine: bool = True, workspace_only: bool = False
) -> ToolResult:
    rules = rules_for(
        str(box / "ws" / "alpha"),
        workspace_only=workspace_only,
        may_write=True,
        forbidden=[str(box / "secret"), "/etc/shadow"],
        other_workspaces=[str(box / "ws" / "beta")],
    )
    return await run_shell(
        command,
        rules=rules,
        allowed_commands=COMMANDS,
        may_run_shell=True,
        block_high_risk=False,  # the parser's flag list is off: only the kernel is left
        asks_approval=False,
        approver=None,
        timeout_secs=20.0,
        agent_env={"PATH": os.environ["PATH"]},
        confine=confine,
    )


def ws(box: Path) -> Path:
    return box / "ws" / "alpha"


async def test_allowed_programs_run_and_read_what_the_policy_allows(box: Path) -> None:
    assert (await shell(box, "cat notes.txt")).output == "mine\n"
    assert (await shell(box, "ls -la")).ok
    assert (await shell(box, "date")).ok
    assert (await shell(box, f"cat {box}/open.txt")).output == "not forbidden\n"  # full profile
    assert (await shell(box, "tar -cf a.tar notes.txt")).ok
    listing = await shell(box, "tar -tvf a.tar")
    assert listing.ok and "notes.txt" in listing.output
    found = await shell(box, "find . -name notes.txt")
    assert found.ok and "./notes.txt" in found.output


# Each spelling would run `touch pwned` if the kernel let the allowed program start it.
ESCAPES = [
    "tar '-Itouch pwned' -cf b.tar notes.txt",
    "tar --use-compress-prog='touch pwned' -cf b.tar notes.txt",
    "tar --checkpoint=1 --checkpoint-act=exec='touch pwned' -cf b.tar notes.txt",
    "tar --to-comm='touch pwned' -xf a.tar",
    "tar --to-command='touch pwned' -xf a.tar",
    "find . -name notes.txt -exec touch pwned ;",
]


@pytest.mark.parametrize("command", ESCAPES)
async def test_an_allowed_program_cannot_run_another(box: Path, command: str) -> None:
    result = await shell(box, command)
    assert not (ws(box) / "pwned").exists(), result
    assert "Permission denied" in result.output, result
    unconfined = await shell(box, command, confine=False)
    assert (ws(box) / "pwned").exists(), unconfined  # the attack is real without the ruleset


async def git_repo(box: Path, config: str) -> None:
    await trio.to_thread.run_sync(_git_repo, box, config)


def _git_repo(box: Path, config: str) -> None:
    subprocess.run(["git", "init", "-q"], cwd=ws(box), check=True)
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        cwd=ws(box),
        check=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    with (ws(box) / ".git" / "config").open("a") as fh:  # the agent can write this file
        fh.write(config)


@pytest.mark.parametrize(
    ("config", "command", "runs_unconfined"),
    [
        ('[alias]\n\tpwn = "!touch pwned"\n', "git pwn", True),
        ("[core]\n\tfsmonitor = touch pwned\n", "git status", True),
        # GIT_PAGER=cat outranks core.pager: the environment alone stops this one
        ("[core]\n\tpager = touch pwned\n", "git -p log", False),
    ],
)
async def test_repository_config_the_agent_wrote_runs_nothing(
    box: Path, config: str, command: str, runs_unconfined: bool
) -> None:
    await git_repo(box, config)
    (ws(box) / "notes.txt").write_text("changed\n")
    result = await shell(box, command)
    assert not (ws(box) / "pwned").exists(), result
    await shell(box, command, confine=False)
    assert (ws(box) / "pwned").exists() == runs_unconfined


async def test_git_reads_no_configuration_from_home(box: Path) -> None:
    await git_repo(box, "")
    result = await shell(box, "git config --show-origin --list")
    assert "file:.git/config" in result.output
    assert "global" not in result.output and "/etc/gitconfig" not in result.output


async def test_the_kernel_refuses_a_forbidden_path_the_parser_cannot_see(box: Path) -> None:
    # -T names a list file; the paths inside it are invisible to the parser.
    (ws(box) / "list").write_text(f"{box}/secret/key\n{box}/ws/beta/diary.txt\n/etc/shadow\n")
    result = await shell(box, "tar -cf c.tar -T list")
    assert result.error_code == "exit_status"
    for path in (f"{box}/secret/key", f"{box}/ws/beta/diary.txt", "/etc/shadow"):
        assert f"{path.lstrip('/')}: Cannot open: Permission denied" in result.output, result
    unconfined = await shell(box, "tar -cf d.tar -T list", confine=False)
    assert "secret/key: Cannot open" not in unconfined.output  # readable without the ruleset


async def test_the_parser_refuses_the_spellings_it_can_see(box: Path) -> None:
    for command in (
        "cat -- -/../../../secret/key",
        f"date -f{box}/secret/key",
        f"tar -C{box}/secret -cf e.tar key",
        f"cat --file={box}/secret/key",
    ):
        result = await shell(box, command)
        assert result.error_code == "forbidden_path", (command, result)


async def test_etc_is_granted_entry_by_entry_around_a_forbidden_file(box: Path) -> None:
    assert (await shell(box, "cat /etc/hostname")).ok
    # /etc/shadow is forbidden: the parser refuses the direct spelling, the kernel the rest
    (ws(box) / "list").write_text("/etc/shadow\n")
    assert "Permission denied" in (await shell(box, "tar -cf f.tar -T list")).output


async def test_writes_outside_the_workspace_are_refused(box: Path) -> None:
    (ws(box) / "list").write_text("notes.txt\n")
    result = await shell(box, f"tar -cf {box}/open.tar notes.txt")  # parser: allowed (full)
    assert not (box / "open.tar").exists(), result
    assert "Permission denied" in result.output


def _is_script(name: str) -> bool:
    path = shutil.which(name)
    return path is not None and Path(path).read_bytes()[:2] == b"#!"


@pytest.mark.skipif(not _is_script("which"), reason="`which` is not a script here")
async def test_a_script_command_is_refused_by_the_kernel(box: Path) -> None:
    # Its interpreter (/bin/sh) is not an allowed binary, so execve itself fails.
    result = await shell(box, "which ls")
    assert result.error_code == "exec_refused", result


@pytest.mark.skipif(abi_version() < 6, reason="signal scoping needs Landlock ABI 6")
async def test_a_command_cannot_signal_anything_outside_its_sandbox(box: Path) -> None:
    bystander = await trio.lowlevel.open_process(["sleep", "30"])
    try:
        result = await shell(box, f"kill -9 {bystander.pid}")
        assert not result.ok and "Operation not permitted" in result.output, result
        assert bystander.returncode is None and bystander.poll() is None
    finally:
        bystander.kill()
        await bystander.wait()


@pytest.mark.parametrize(
    "argv",
    [
        ["cat", "--", "-/../../../../../../../../../../etc/shadow"],
        ["date", "-f/etc/shadow"],
        ["tar", "-C/etc", "-cf", "x.tar", "shadow"],
        ["cat", "--", "{box}/secret/key"],
        ["find", "/etc", "-name", "shadow", "-exec", "cat", "{}", ";"],
    ],
)
async def test_finding_4_spellings_fail_in_the_kernel_even_past_the_parser(
    box: Path, argv: list[str]
) -> None:
    # Straight to the process runner, as if the parser had missed every one of them.
    rules = rules_for(
        str(ws(box)),
        workspace_only=False,
        may_write=True,
        forbidden=[str(box / "secret"), "/etc/shadow"],
    )
    path = os.environ["PATH"]
    home = str(box / "home")
    await trio.Path(home).mkdir()
    await trio.Path(ws(box) / "-").mkdir()  # so that `-/..` resolves (the agent can make it)
    program = shutil.which(argv[0], path=path)
    assert program is not None
    result = await _run(
        [program, *(a.replace("{box}", str(box)) for a in argv[1:])],
        workspace=str(ws(box)),
        env=shell_environment({"PATH": path}, str(ws(box)), home),
        ruleset_for=functools.partial(command_ruleset, rules, COMMANDS, path, home),
        timeout_secs=20.0,
        output_cap=OUTPUT_CAP_BYTES,
    )
    assert "Permission denied" in result.output, result
    assert "forbidden key" not in result.output and "root:" not in result.output
