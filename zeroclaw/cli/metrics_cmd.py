"""`zeroclaw metrics`: the daemon's metrics in the Prometheus text format (ADR 0029)."""

from __future__ import annotations

import sys

from ..control import Metrics
from ._app import cli
from ._common import EXIT_FAILED, CliError, emit_json, json_option, wants_json
from .daemon_cmd import call


@cli.command("metrics")
@json_option
def metrics_cmd(as_json: bool) -> None:
    """Print the daemon's metrics in the Prometheus text format, exactly as the
    `[daemon] metrics_listen` HTTP listener serves them at /metrics."""
    reply = call(Metrics())
    data = reply.data
    if not reply.ok or data is None:
        raise CliError(f"metrics failed ({reply.error}): {reply.message}", EXIT_FAILED)
    if wants_json(as_json):
        emit_json({"text": data.text})
        return
    sys.stdout.write(data.text)  # as it is: a scraper's parser reads it
