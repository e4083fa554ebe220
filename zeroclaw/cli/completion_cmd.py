"""`zeroclaw completion bash|zsh|fish`: the shell completion script, from click's own
completion machinery (the same as `_ZEROCLAW_COMPLETE=bash_source zeroclaw` prints)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from ._app import cli

SHELLS = ("bash", "zsh", "fish")
PROG = "zeroclaw"
COMPLETE_VAR = "_ZEROCLAW_COMPLETE"


def completion_script(shell: str) -> str:
    """The script that makes `shell` complete zeroclaw's commands, options and choices."""
    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - SHELLS are all click's
        raise click.BadParameter(f"no completion for {shell}")
    return cls(cli, {}, PROG, COMPLETE_VAR).source()


@cli.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_cmd(shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash:  eval "$(zeroclaw completion bash)"         (in ~/.bashrc)
    zsh:   eval "$(zeroclaw completion zsh)"          (in ~/.zshrc)
    fish:  zeroclaw completion fish > ~/.config/fish/completions/zeroclaw.fish
    """
    click.echo(completion_script(shell), nl=False)
