"""The root `zeroclaw` command group: global options and the no-traceback error boundary."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import Any

import click

from .._version import __version__
from ..config import ConfigError
from ._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    CliState,
    print_config_error,
    with_config,
)


class _RootGroup(click.Group):
    """Turns every expected failure into a message and an exit code, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except ConfigError as exc:
            print_config_error(exc, _explicit_config(ctx))
            ctx.exit(EXIT_USAGE)
        except CliError as exc:
            click.echo(f"zeroclaw: error: {with_config(str(exc), _explicit_config(ctx))}", err=True)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly, like any Unix filter.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(141)
        except KeyboardInterrupt:
            click.echo("zeroclaw: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:
            if _debug(ctx):
                traceback.print_exc()
            else:
                click.echo(
                    f"zeroclaw: internal error: {type(exc).__name__}: {exc} "
                    "(run with --debug for a traceback)",
                    err=True,
                )
            ctx.exit(EXIT_FAILED)


def _explicit_config(ctx: click.Context) -> str | None:
    obj = ctx.find_root().obj
    return obj.config_path if isinstance(obj, CliState) else None


def _debug(ctx: click.Context) -> bool:
    obj = ctx.find_root().obj
    return isinstance(obj, CliState) and obj.debug


@click.group(cls=_RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="zeroclaw")
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    help="Config file. Default: $ZEROCLAW_CONFIG, $XDG_CONFIG_HOME/zeroclaw/zeroclaw.toml, "
    "then /etc/zeroclaw/zeroclaw.toml.",
)
@click.option("--agent", "-a", metavar="ALIAS", help="The agent a command talks to.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="warning",
    show_default=True,
    help="Log level for this command.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    config_path: str | None,
    agent: str | None,
    as_json: bool,
    debug: bool,
    log_level: str,
) -> None:
    """zeroclaw: a self-hosted multi-agent assistant daemon."""
    ctx.obj = CliState(config_path, agent, as_json, debug, log_level)
    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )


def main() -> None:
    cli(prog_name="zeroclaw")
