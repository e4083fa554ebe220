"""The `zeroclaw` command line (click), one module per command group."""

from . import config_cmd as _config_cmd  # noqa: F401  (registers `zeroclaw config`)
from . import daemon_cmd as _daemon_cmd  # noqa: F401  (registers daemon, status, agents, ...)
from ._app import cli, main

__all__ = ["cli", "main"]
