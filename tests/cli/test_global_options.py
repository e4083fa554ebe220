"""Global options (`--config`, `--agent/-a`, `--json`, `--debug`, `--log-level`) are accepted
before or after any subcommand, nested ones included, the same way (issue 14, ADR 0032)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.cli.helpers import run_cli
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw._version import __version__
from zeroclaw.cli import cli

GLOBALS_AFTER = ["--config", "CONFIG", "--agent", "alpha", "--json", "--debug"]
GLOBALS_AFTER += ["--log-level", "debug"]


def every_command(
    group: click.Group = cli, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every command and group of the real click tree, as the words that name it (the
    root's commands load on first use: listing them loads each)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))


def resolve(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for word in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), word)
        assert found is not None, word
        command = found
    return command


def write_config(tmp_path: Path) -> Path:
    import tomli_w

    path = tmp_path / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(make_config(tmp_path, {"alpha": agent_entry()})))
    return path


COMMANDS = list(every_command())


def test_the_tree_has_the_nested_commands_the_issue_names() -> None:
    for path in [("memory", "list"), ("agents", "restart"), ("subagents", "show"), ("status",)]:
        assert path in COMMANDS


def help_after_globals(tmp_path: Path, path: tuple[str, ...]) -> list[str]:
    """An option a command does not take is a usage error (exit 2) before --help is looked
    at: exit 0 with the help means every global option parsed after the command."""
    args = [str(tmp_path / "z.toml") if a == "CONFIG" else a for a in GLOBALS_AFTER]
    return [*path, *args, "--help"]


def test_every_command_accepts_every_global_option_after_it(tmp_path: Path) -> None:
    """The whole tree, through click's runner (one process: a subprocess per command would
    take minutes); the nested commands the issue names go through the real CLI below."""
    runner = CliRunner()
    for path in COMMANDS:
        result = runner.invoke(cli, help_after_globals(tmp_path, path), prog_name="zeroclaw")
        assert result.exit_code == 0, (path, result.output)
        assert f"Usage: zeroclaw {' '.join(path)}" in result.output


@pytest.mark.parametrize(
    "path", [("memory", "list"), ("agents", "restart"), ("subagents", "show"), ("status",)]
)
def test_nested_commands_accept_the_global_options_through_the_real_cli(
    tmp_path: Path, path: tuple[str, ...]
) -> None:
    result = run_cli(*help_after_globals(tmp_path, path))
    assert result.returncode == 0, (path, result.stderr)
    assert f"Usage: zeroclaw {' '.join(path)}" in result.stdout


def test_each_global_option_is_the_global_one_or_the_commands_own() -> None:
    """The same options everywhere: hidden copies of the root's, except where the command
    has its own option of that name (daemon --config, memory --agent/-a, invocations list
    --agent ID), which then takes it."""
    for path in COMMANDS:
        check_names(path)


def check_names(path: tuple[str, ...]) -> None:
    command = resolve(path)
    names = {name for p in command.params for name in (*p.opts, *p.secondary_opts)}
    for flag in ["--config", "--agent", "--json", "--debug", "--log-level"]:
        assert flag in names, (path, flag)
    own_agent = [p for p in command.params if "--agent" in p.opts and p.name != "_global_agent"]
    if not own_agent:
        assert "-a" in names, path


def test_values_after_the_subcommand_take_effect(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    for path in [("status",), ("agents", "restart", "alpha"), ("subagents", "show", "x")]:
        result = run_cli(*path, "--config", missing)
        assert result.returncode == 2, (path, result.stderr)
        assert f"{missing}: <root>: file not found" in result.stderr
    config = write_config(tmp_path)
    # The value nearer the command wins over the one before it.
    result = run_cli("--config", missing, "status", "--config", config)
    assert result.returncode == 3, result.stderr  # this config's daemon is not running
    # --agent and --json after a nested command: the store answers (no daemon), in JSON.
    listed = run_cli("memory", "list", "--config", config, "-a", "alpha", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["records"] == []
    # Between a group and its command too.
    between = run_cli("memory", "--json", "list", "--config", config, "--agent", "alpha")
    assert json.loads(between.stdout)["records"] == []


def test_log_level_after_the_command_sets_the_level(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = run_cli("config", "validate", "--config", config, "--log-level", "nope")
    assert result.returncode == 2 and "'nope' is not one of" in result.stderr


def test_an_option_value_that_looks_like_a_global_option_stays_a_value(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = run_cli("--config", config, "-a", "alpha", "chat", "-m", "--json")
    assert result.returncode == 0, result.stderr
    assert not result.stdout.lstrip().startswith("{"), result.stdout  # a reply, not JSON
    assert "--json" in result.stdout  # the offline provider answers about the message


def test_minus_v_and_version_print_the_version() -> None:
    for flag in ("-V", "--version"):
        result = run_cli(flag)
        assert result.returncode == 0
        assert result.stdout.strip() == f"zeroclaw, version {__version__}"
