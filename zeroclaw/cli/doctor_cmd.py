"""`zeroclaw doctor [--json] [--network]`: the checks of `zeroclaw.ops`, printed.

The facts are gathered once, the checks are pure (`zeroclaw/ops/_doctor.py`). Exit 0 unless
a check fails (warnings do not fail), 1 if one does.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, replace
from pathlib import Path

import click

from ..config import ConfigError
from ..ops import gather_facts, run_checks
from ._app import cli
from ._common import EXIT_FAILED, emit_json, json_option, state, wants_json, with_config


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
    results = [replace(r, fix=with_config(r.fix, state().config_path)) for r in results]
    failed = any(r.status == "fail" for r in results)
    if wants_json(as_json):
        emit_json({"ok": not failed, "checks": [asdict(r) for r in results]})
    else:
        for r in results:
            click.echo(f"{r.status.upper():4}  {r.name}: {r.message}")
            if r.fix and r.status != "ok":
                click.echo(f"      fix: {r.fix}")
    if failed:
        sys.exit(EXIT_FAILED)
