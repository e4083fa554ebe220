"""The supervisor daemon: agent processes, restart policy, signals, systemd, control socket."""

from ._daemon import DaemonError, run_daemon
from ._lifecycle import ExitStatus, InvalidTransition, Lifecycle, State, Transition
from ._spec import agent_environment, build_specs, diff_specs

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
