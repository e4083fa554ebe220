"""`zeroclaw doctor [--json] [--network]`: the checks of `zeroclaw.ops`, printed.

The facts are gathered once, the checks are pure (`zeroclaw/ops/_doctor.py`). Exit 0 unless
a check fails (warnings do not fail), 1 if one does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from ..config import ConfigError
from ..ops import gather_facts, run_checks
from ._app import cli
from ._common import json_option, report_checks, state, with_config


@cli.command("doctor")
@json_option
@click.option(
    "--network",
    is_flag=True,
    help="Also check that each model provider in use answers (one short GET per provider).",
)
def doctor_cmd(as_json: bool, network: bool) -> None:
    """Check the config, files, daemon, stores, sandbox and unit; say what is wrong and the fix."""
    path: Path | None = None
    errors: tuple[str, ...] = ()
    try:
        path = state().locate()
    except ConfigError as exc:
        errors = tuple(exc.lines())  # no config found: the config check says where we looked
    results = run_checks(gather_facts(path, network=network, locate_errors=errors))
    # A hint naming a command names it as the operator must run it: with their --config.
    report_checks(
        [replace(r, fix=with_config(r.fix, state().config_path)) for r in results], as_json
    )
