"""`zeroclaw completion bash|zsh|fish` prints click's completion script, and the bash one
really completes commands in bash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli

BIN = Path(sys.executable).parent  # the venv's `zeroclaw` entry point, as a shell finds it


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_is_clicks_own(shell: str) -> None:
    printed = run_cli("completion", shell)
    assert printed.returncode == 0, printed.stderr
    source = run_cli(env={"_ZEROCLAW_COMPLETE": f"{shell}_source"})
    assert printed.stdout == source.stdout and "_ZEROCLAW_COMPLETE" in printed.stdout


def test_an_unknown_shell_is_a_usage_error() -> None:
    result = run_cli("completion", "tcsh")
    assert result.returncode == 2 and "'tcsh' is not one of" in result.stderr


def test_bash_completes_commands_subcommands_and_choices() -> None:
    script = """
        eval "$(zeroclaw completion bash)"
        complete_words() { COMPREPLY=(); COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1));
                           _zeroclaw_completion zeroclaw; echo "${COMPREPLY[*]}"; }
        complete_words zeroclaw mem
        complete_words zeroclaw memory l
        complete_words zeroclaw completion ""
        complete_words zeroclaw status --log-level w
    """
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["memory", "list", "bash zsh fish", "warning"]
