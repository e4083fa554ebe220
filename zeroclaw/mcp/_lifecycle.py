"""The life of one MCP server inside its agent, sans-IO (events in, actions out).

    idle --start--> starting --ready--> ready
    starting|ready --exited--> restarting (after a backoff) | failed (attempts used up)
    restarting --woke--> starting
    any --stop--> stopped (which absorbs every later event)

The backoff doubles from `base_secs` up to `max_secs`; `max_attempts` consecutive starts
that never reached `ready` end in `failed`, which stays until the agent restarts (a missing
or broken program is not retried forever). Reaching `ready` resets the count. An event a
state does not expect is a bug of the shell: `LifecycleError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..turns import McpServerState, McpServerStatus

State = Literal["idle", "starting", "ready", "restarting", "failed", "stopped"]


@dataclass(frozen=True, slots=True)
class Start:
    pass


@dataclass(frozen=True, slots=True)
class Ready:
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class Exited:
    detail: str


@dataclass(frozen=True, slots=True)
class Woke:
    pass


@dataclass(frozen=True, slots=True)
class Stop:
    pass


Event = Start | Ready | Exited | Woke | Stop


@dataclass(frozen=True, slots=True)
class Spawn:
    """Start the server (attempt `attempt`, from 1)."""

    attempt: int


@dataclass(frozen=True, slots=True)
class Report:
    """Tell the daemon (MCP_STATE, post and forget)."""

    state: McpServerState


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait this long, then feed `Woke()`."""

    secs: float


Action = Spawn | Report | Sleep


class LifecycleError(Exception):
    """An event the current state does not expect."""


class Lifecycle:
    def __init__(
        self,
        server: str,
        *,
        base_secs: float = 0.5,
        max_secs: float = 30.0,
        max_attempts: int = 5,
    ) -> None:
        self.server = server
        self.base_secs = base_secs
        self.max_secs = max_secs
        self.max_attempts = max_attempts
        self.state: State = "idle"
        self.restarts = 0  # how many times it was started again
        self.failures = 0  # consecutive starts that did not reach ready
        self.pid: int | None = None

    def backoff(self, failures: int) -> float:
        """The wait after the `failures`-th consecutive failure (from 1)."""
        return float(min(self.base_secs * 2 ** (failures - 1), self.max_secs))

    def _report(self, status: McpServerStatus, detail: str = "") -> Report:
        return Report(McpServerState(self.server, status, detail, self.restarts, self.pid))

    def handle(self, event: Event) -> tuple[Action, ...]:
        if self.state == "stopped":
            return ()
        if isinstance(event, Stop):
            self.state, self.pid = "stopped", None
            return (self._report("stopped"),)
        match self.state, event:
            case "idle", Start():
                self.state = "starting"
                return (self._report("starting"), Spawn(1))
            case "starting", Ready(pid=pid):
                self.state, self.pid, self.failures = "ready", pid, 0
                return (self._report("ready"),)
            case (("starting" | "ready"), Exited(detail=detail)):
                self.pid = None
                self.failures += 1
                if self.failures >= self.max_attempts:
                    self.state = "failed"
                    return (self._report("failed", detail),)
                self.state = "restarting"
                delay = self.backoff(self.failures)
                return (self._report("restarting", detail), Sleep(delay))
            case "restarting", Woke():
                self.state = "starting"
                self.restarts += 1
                return (self._report("starting"), Spawn(self.restarts + 1))
        raise LifecycleError(f"{self.server}: {type(event).__name__} while {self.state}")
