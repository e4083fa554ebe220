"""What every command shares: the global options' state, exit codes, output helpers."""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..config import Config, ConfigError, load_config, locate_config

SCHEMA_VERSION = 1

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_DAEMON = 3


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Click callback for float options: `nan` and `inf` are usage errors, not filters that
    silently match nothing (or everything)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value!r} is not a finite number")
    return value


class CliError(Exception):
    """An operation failed in a way the operator can act on; printed without a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class CliState:
    """The root group's options, reachable from every command."""

    config_path: str | None
    agent: str | None
    json: bool
    debug: bool
    log_level: str

    def locate(self) -> Path:
        return locate_config(self.config_path, os.environ)

    def load(self) -> tuple[Path, Config]:
        path = self.locate()
        return path, load_config(path)


def state() -> CliState:
    obj = click.get_current_context().find_root().obj
    assert isinstance(obj, CliState)
    return obj


def wants_json(local_flag: bool) -> bool:
    """`--json` may be given globally or on the command."""
    return local_flag or state().json


def emit_json(payload: dict[str, Any]) -> None:
    payload = {"schema_version": SCHEMA_VERSION, **payload}
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def with_config(text: str, config_path: str | None) -> str:
    """A hint names a command as the operator must run it: with the --config they passed
    (a plain `zeroclaw daemon` would look at another config, or none)."""
    if not config_path:
        return text
    return text.replace("'zeroclaw ", f"'zeroclaw --config {shlex.quote(config_path)} ")


def print_config_error(exc: ConfigError, config_path: str | None = None) -> None:
    for line in exc.lines():
        click.echo(with_config(line, config_path), err=True)


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON (with schema_version)."
)
