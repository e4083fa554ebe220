"""The supervisor daemon: agent processes, restart policy, signals, systemd, control socket.

The daemon itself loads on first use: the zygote imports this package and must stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._lifecycle import ExitStatus, InvalidTransition, Lifecycle, State, Transition

if TYPE_CHECKING:
    from ._daemon import DaemonError, run_daemon
    from ._environment import agent_environment
    from ._spec import build_specs, diff_specs

_LAZY = {
    "DaemonError": "._daemon",
    "run_daemon": "._daemon",
    "agent_environment": "._environment",
    "build_specs": "._spec",
    "diff_specs": "._spec",
}


_load = lazy_attributes(__name__, _LAZY)


def __getattr__(name: str) -> object:
    return _load(name, globals())


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
