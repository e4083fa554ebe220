"""The supervisor daemon: agent processes, restart policy, signals, systemd, control socket.

The daemon itself loads on first use: the zygote imports this package and must stay light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._lifecycle import ExitStatus, InvalidTransition, Lifecycle, State, Transition

if TYPE_CHECKING:
    from ._daemon import DaemonError, run_daemon
    from ._spec import agent_environment, build_specs, diff_specs

_LAZY = {
    "DaemonError": "._daemon",
    "run_daemon": "._daemon",
    "agent_environment": "._spec",
    "build_specs": "._spec",
    "diff_specs": "._spec",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DaemonError",
    "ExitStatus",
    "InvalidTransition",
    "Lifecycle",
    "State",
    "Transition",
    "agent_environment",
    "build_specs",
    "diff_specs",
    "run_daemon",
]
