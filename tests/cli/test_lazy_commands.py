"""The root group loads a command's module only when that command runs, and still lists
every command with its help (ADR 0035): the table it lists them from is the real tree's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click

from tests.conftest import REPO
from zeroclaw.cli import cli
from zeroclaw.cli._app import LAZY_COMMANDS, load_all_commands

HELP_PROBE = """
import json, sys
from click.testing import CliRunner
from zeroclaw.cli import cli
from zeroclaw.cli._app import load_all_commands
lazy = CliRunner().invoke(cli, ["--help"], prog_name="zeroclaw").output
loaded = sorted(m for m in sys.modules if m.startswith("zeroclaw.cli.") and m.endswith("_cmd"))
load_all_commands()
full = CliRunner().invoke(cli, ["--help"], prog_name="zeroclaw").output
print(json.dumps({"lazy": lazy, "loaded": loaded, "full": full}))
"""


def test_root_help_from_the_table_is_the_help_of_the_loaded_tree() -> None:
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROBE],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"},
        timeout=60,
        check=True,
    )
    probe = json.loads(result.stdout)
    assert probe["loaded"] == []  # listing the commands loaded none of them
    assert probe["lazy"] == probe["full"]
    for name in LAZY_COMMANDS:
        assert f"\n  {name} " in probe["full"], name


def test_the_table_names_each_command_the_modules_register_and_its_module() -> None:
    load_all_commands()
    assert set(cli.commands) == set(LAZY_COMMANDS)
    for name, command in cli.commands.items():
        assert command.callback is not None
        module = command.callback.__module__.rpartition(".")[2]
        assert module == LAZY_COMMANDS[name][0], name


def test_a_command_loads_when_it_is_looked_up() -> None:
    ctx = click.Context(cli)
    for name in LAZY_COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.get_command(ctx, "no-such-command") is None
