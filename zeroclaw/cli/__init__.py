"""The `zeroclaw` command line (click), one module per command group.

The command modules are imported when their command runs (`_app.LAZY_COMMANDS`), not here:
a one-shot command loads only what it needs (ADR 0035)."""

from ._app import cli, main
from ._common import CliErrorCode

__all__ = ["CliErrorCode", "cli", "main"]
