"""The `zeroclaw` command line (click), one module per command group."""

from . import chat_cmd as _chat_cmd  # noqa: F401  (registers `zeroclaw chat`)
from . import completion_cmd as _completion_cmd  # noqa: F401  (registers `zeroclaw completion`)
from . import config_cmd as _config_cmd  # noqa: F401  (registers `zeroclaw config`)
from . import daemon_cmd as _daemon_cmd  # noqa: F401  (registers daemon, status, agents, ...)
from . import discover_cmd as _discover_cmd  # noqa: F401  (registers `zeroclaw discover`)
from . import doctor_cmd as _doctor_cmd  # noqa: F401  (registers `zeroclaw doctor`)
from . import events_cmd as _events_cmd  # noqa: F401  (registers `zeroclaw events`)
from . import memory_cmd as _memory_cmd  # noqa: F401  (registers `zeroclaw memory`)
from . import metrics_cmd as _metrics_cmd  # noqa: F401  (registers `zeroclaw metrics`)
from . import route_cmd as _route_cmd  # noqa: F401  (registers `zeroclaw route`)
from . import service_cmd as _service_cmd  # noqa: F401  (registers `zeroclaw service`)
from . import subagents_cmd as _subagents_cmd  # noqa: F401  (subagents, dispatch, invocations)
from ._app import cli, main
from ._common import CliErrorCode

__all__ = ["CliErrorCode", "cli", "main"]
