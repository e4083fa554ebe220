"""The per-agent lifecycle state machine and restart policy. Pure: no clock, no I/O.

    stopped ──start──▶ starting ──ready──▶ running
       ▲                  │                  │
       │               exited             exited
       │                  ▼                  ▼
    stopping ◀─stop─  backoff ──delay──▶ starting     (or ──▶ fatal)

A run shorter than `stable_after_secs` is a failure; failures back off exponentially from
`backoff_initial_secs` to `backoff_max_secs`; more than `max_restarts` failures inside
`window_secs` is `fatal`, left only by an operator start/restart or a reload.
Every method takes `now` (monotonic seconds), so tests drive it with a fake clock. Two
layers, h11-style:

- transitions (`start`, `spawned`, `ready`, `exited`, `stop`) each return the Transition
  they made;
- events (`command`, `process_spawned`, `spawn_failed`, `process_ready`, `process_exited`,
  `process_hung`, `activity`, `on_deadline`) return the Actions the runner must carry
  out: start a process, signal its group, report removal. Every timer (backoff, start
  timeout, stop grace, idle stop) is a deadline the machine owns: the runner waits for
  its inbox until `next_deadline()` and then calls `on_deadline(now)`, which re-checks
  the deadline against `now` before acting.

An agent that exits with EX_CONFIG (78) cannot start as configured (a provider whose key
variable is unset, a required sandbox missing): retrying would change nothing, so it is
fatal at once, with its last error line as the reason.
"""

from __future__ import annotations

import enum
import signal
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # a type only: the zygote imports this package and must not load pydantic
    from ..config import RestartPolicy


class State(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    FATAL = "fatal"
    STOPPING = "stopping"


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How a process ended: an exit code or a signal."""

    code: int | None = None
    signal: int | None = None

    @classmethod
    def from_wait_status(cls, status: int) -> ExitStatus:
        import os

        if os.WIFSIGNALED(status):
            return cls(signal=os.WTERMSIG(status))
        return cls(code=os.waitstatus_to_exitcode(status))

    def describe(self) -> str:
        if self.signal is not None:
            try:
                return f"killed by {signal.Signals(self.signal).name}"
            except ValueError:
                return f"killed by signal {self.signal}"
        return f"exit code {self.code}"


SPAWN_FAILED = ExitStatus(code=127)
EX_CONFIG = 78  # sysexits: the agent cannot start as configured; retrying changes nothing


class InvalidTransition(Exception):
    """An event arrived in a state where it means nothing (a bug in the caller)."""


@dataclass(frozen=True, slots=True)
class Transition:
    alias: str
    old: State
    new: State
    reason: str
    pid: int | None = None
    exit: ExitStatus | None = None
    delay: float | None = None  # seconds until the next start, when new is BACKOFF
    failures_in_window: int = 0


ExitCause = Literal["stopped", "signal", "config", "spawn_failed", "exit_status"]


def exit_cause(t: Transition) -> ExitCause | None:
    """Why the process of a transition ended, as a small fixed set (metrics count exits by
    it); None when the transition is not an exit."""
    if t.exit is None:
        return None
    if t.new == State.STOPPED:
        return "stopped"
    if t.exit is SPAWN_FAILED:
        return "spawn_failed"
    if t.exit.code == EX_CONFIG:
        return "config"
    if t.exit.signal is not None:
        return "signal"
    return "exit_status"


@dataclass(frozen=True, slots=True)
class StartProcess:
    """Spawn a process for the start just made; report `process_spawned` or `spawn_failed`."""


@dataclass(frozen=True, slots=True)
class SignalGroup:
    """Signal the agent's process group."""

    signum: int
    reason: str


@dataclass(frozen=True, slots=True)
class Removed:
    """The agent was removed from the config and has stopped: its runner ends."""


Action = Transition | StartProcess | SignalGroup | Removed
CommandKind = Literal["start", "stop", "restart", "remove"]


@dataclass(frozen=True, slots=True)
class Timers:
    """The deadlines the machine keeps besides the restart policy's backoff."""

    grace_secs: float = 10.0  # SIGTERM to SIGKILL
    start_timeout_secs: float = 20.0  # spawn to ready
    idle_stop_secs: float | None = None  # on-demand agents only: stop after this idle time


@dataclass
class Lifecycle:
    alias: str
    policy: RestartPolicy
    timers: Timers = field(default_factory=Timers)
    state: State = State.STOPPED
    since: float = 0.0
    pid: int | None = None
    started_at: float | None = None
    restarts: int = 0  # automatic restarts performed since the last operator reset
    starts: int = 0  # every start ever, so a waiter can tell a new start from an old state
    last_exit: ExitStatus | None = None
    next_start_at: float | None = None
    last_error: str | None = None  # the last error line the agent reported before exiting
    last_activity: float = 0.0
    busy_turns: int = 0  # turns the agent is working on: never idle while > 0
    kill_at: float | None = None  # STOPPING: when SIGTERM becomes SIGKILL
    start_deadline: float | None = None  # STARTING: when a start that is not ready fails
    restart_after_stop: bool = False
    removing: bool = False
    _failures: deque[float] = field(default_factory=deque)
    _consecutive_failures: int = 0

    # --- helpers -------------------------------------------------------------------------

    def _go(self, now: float, new: State, reason: str, **extra: object) -> Transition:
        old = self.state
        self.state = new
        self.since = now
        return Transition(self.alias, old, new, reason, pid=self.pid, **extra)  # type: ignore[arg-type]

    def _require(self, event: str, *allowed: State) -> None:
        if self.state not in allowed:
            raise InvalidTransition(f"{self.alias}: {event} while {self.state}")

    def _prune(self, now: float) -> None:
        while self._failures and self._failures[0] <= now - self.policy.window_secs:
            self._failures.popleft()

    def failures_in_window(self, now: float) -> int:
        self._prune(now)
        return len(self._failures)

    def backoff_delay(self) -> float:
        """Delay after the n-th consecutive failure: initial · 2^(n-1), capped at max."""
        n = max(self._consecutive_failures, 1)
        p = self.policy
        # Cap the exponent so huge failure counts cannot overflow the float.
        return float(min(p.backoff_initial_secs * 2 ** min(n - 1, 64), p.backoff_max_secs))

    # --- events --------------------------------------------------------------------------

    def start(self, now: float, *, operator: bool = False) -> Transition:
        """Begin a start. From `fatal` only when an operator asks; an operator also resets."""
        if operator:
            self._require("start", State.STOPPED, State.BACKOFF, State.FATAL)
            self.reset()
        else:
            self._require("start", State.STOPPED, State.BACKOFF)
        if self.state == State.BACKOFF:
            self.restarts += 1
        self.next_start_at = None
        self.pid = None
        self.starts += 1
        return self._go(now, State.STARTING, "operator start" if operator else "start")

    def spawned(self, now: float, pid: int) -> None:
        self._require("spawned", State.STARTING, State.STOPPING)
        self.pid = pid
        self.started_at = now

    def ready(self, now: float) -> Transition:
        self._require("ready", State.STARTING)
        return self._go(now, State.RUNNING, "agent is ready")

    def exited(self, now: float, status: ExitStatus) -> Transition:
        """The process ended. While stopping that is the goal; otherwise it is judged."""
        self._require("exited", State.STARTING, State.RUNNING, State.STOPPING)
        self.last_exit = status
        pid = self.pid
        if self.state == State.STOPPING:
            t = self._go(now, State.STOPPED, f"stopped ({status.describe()})", exit=status)
            self.pid = None
            return t
        if status.code == EX_CONFIG:
            self._failures.append(now)
            t = self._go(
                now,
                State.FATAL,
                f"cannot start as configured: {self.last_error or status.describe()}; fix the "
                "config and reload, or restart it",
                exit=status,
                failures_in_window=self.failures_in_window(now),
            )
            self.pid = None
            return t
        run = now - (self.started_at if self.started_at is not None else now)
        if run < self.policy.stable_after_secs or self.state == State.STARTING:
            self._failures.append(now)
            self._consecutive_failures += 1
            failed = True
        else:
            # A long, healthy run: the next restart starts the backoff over.
            self._consecutive_failures = 0
            failed = False
        count = self.failures_in_window(now)
        self.pid = pid
        if failed and count > self.policy.max_restarts:
            t = self._go(
                now,
                State.FATAL,
                f"{count} failures within {self.policy.window_secs:g}s "
                f"(max_restarts={self.policy.max_restarts}); giving up until an operator "
                "restarts it or the config is reloaded",
                exit=status,
                failures_in_window=count,
            )
            self.pid = None
            return t
        delay = self.backoff_delay() if failed else self.policy.backoff_initial_secs
        self.next_start_at = now + delay
        why = f"run of {run:.1f}s was {'a failure' if failed else 'stable'}"
        t = self._go(now, State.BACKOFF, why, exit=status, delay=delay, failures_in_window=count)
        self.pid = None
        return t

    def stop(self, now: float, reason: str = "stop requested") -> Transition:
        """Ask for a stop. Without a live process this is immediate."""
        if self.state in (State.STARTING, State.RUNNING) and self.pid is not None:
            return self._go(now, State.STOPPING, reason)
        if self.state == State.STOPPING:
            return Transition(self.alias, self.state, self.state, "already stopping", pid=self.pid)
        self.next_start_at = None
        return self._go(now, State.STOPPED, reason)

    def due(self, now: float) -> bool:
        """Whether a backoff has elapsed and the agent should start again."""
        return (
            self.state == State.BACKOFF
            and self.next_start_at is not None
            and now >= self.next_start_at
        )

    def reset(self) -> None:
        """Forget failures (operator restart, reload)."""
        self._failures.clear()
        self._consecutive_failures = 0
        self.restarts = 0

    # --- events: what happened, in; what to do, out --------------------------------------

    def command(
        self, now: float, kind: CommandKind, reason: str = "", *, operator: bool = False
    ) -> list[Action]:
        """An operator, the supervisor or a reload asks for something."""
        if kind == "start":
            self.last_activity = now
            if self.state in (State.STOPPED, State.BACKOFF) or (
                self.state == State.FATAL and operator
            ):
                return self._begin_start(now, operator=operator)
            return []
        if kind == "stop":
            self.restart_after_stop = False
            return self._request_stop(now, reason or "stop requested")
        if kind == "restart":
            if self.state in (State.STARTING, State.RUNNING) and self.pid is not None:
                self.restart_after_stop = True
                return self._request_stop(now, reason or "restart requested")
            if self.state == State.STOPPING:
                self.restart_after_stop = True
                return []
            if self.state == State.STARTING:
                return []  # a start is already under way (its process not spawned yet)
            return self._begin_start(now, operator=True)
        self.removing = True
        self.restart_after_stop = False
        actions = self._request_stop(now, reason or "removed from config")
        if self.state == State.STOPPED:
            actions.append(Removed())
        return actions

    def process_spawned(self, now: float, pid: int) -> list[Action]:
        self.spawned(now, pid)
        self.start_deadline = now + self.timers.start_timeout_secs
        if self.state == State.STOPPING and self.kill_at is None:
            # Stopped while the spawn was under way: the new process is told at once.
            self.kill_at = now + self.timers.grace_secs
            return [SignalGroup(signal.SIGTERM, "stopped while starting")]
        return []

    def spawn_failed(self, now: float, error: str) -> list[Action]:
        """The zygote could not start a process: judged like an exit at once."""
        self.pid = None
        self.last_error = error
        return self._after_exit(now, SPAWN_FAILED)

    def process_ready(self, now: float, pid: int) -> list[Action]:
        if pid != self.pid or self.state != State.STARTING:
            return []  # a late hello from an earlier process
        self.start_deadline = None
        self.last_activity = now
        return [self.ready(now)]

    def process_exited(
        self, now: float, pid: int, status: ExitStatus, error_line: str | None = None
    ) -> list[Action]:
        if pid != self.pid:
            return []  # a stale report about an earlier process
        if error_line:
            self.last_error = error_line
        return self._after_exit(now, status)

    def process_hung(self, now: float, pid: int) -> list[Action]:
        if pid != self.pid or self.state not in (State.RUNNING, State.STARTING):
            return []
        return [SignalGroup(signal.SIGKILL, "stopped answering liveness checks")]

    def activity(self, now: float, busy_turns: int | None = None) -> None:
        """Traffic to or from the agent, or its count of running turns changed."""
        self.last_activity = max(self.last_activity, now)
        if busy_turns is not None:
            self.busy_turns = max(busy_turns, 0)

    def next_deadline(self) -> float:
        if self.state == State.BACKOFF and self.next_start_at is not None:
            return self.next_start_at
        if self.state == State.STOPPING and self.kill_at is not None:
            return self.kill_at
        if self.state == State.STARTING and self.start_deadline is not None:
            return self.start_deadline
        idle = self.timers.idle_stop_secs
        if self.state == State.RUNNING and idle is not None and self.busy_turns == 0:
            return self.last_activity + idle
        return float("inf")

    def on_deadline(self, now: float) -> list[Action]:
        """A deadline may have passed: each is checked against `now` before it acts."""
        if self.due(now):
            return self._begin_start(now, operator=False)
        if self.state == State.STOPPING and self.kill_at is not None and now >= self.kill_at:
            self.kill_at = None
            return [SignalGroup(signal.SIGKILL, f"did not stop within {self.timers.grace_secs:g}s")]
        if (
            self.state == State.STARTING
            and self.start_deadline is not None
            and now >= self.start_deadline
        ):
            self.start_deadline = None
            return [
                SignalGroup(signal.SIGKILL, f"not ready within {self.timers.start_timeout_secs:g}s")
            ]
        idle = self.timers.idle_stop_secs
        if (
            self.state == State.RUNNING
            and idle is not None
            and self.busy_turns == 0
            and now >= self.last_activity + idle
        ):
            return self._request_stop(now, f"idle for {idle:g}s")
        return []

    # --- event helpers ---------------------------------------------------------------------

    def _begin_start(self, now: float, *, operator: bool) -> list[Action]:
        self.busy_turns = 0
        return [self.start(now, operator=operator), StartProcess()]

    def _request_stop(self, now: float, reason: str) -> list[Action]:
        actions: list[Action] = [self.stop(now, reason)]
        if self.state == State.STOPPING and self.kill_at is None and self.pid is not None:
            self.kill_at = now + self.timers.grace_secs
            actions.append(SignalGroup(signal.SIGTERM, reason))
        return actions

    def _after_exit(self, now: float, status: ExitStatus) -> list[Action]:
        self.kill_at = None
        self.start_deadline = None
        self.busy_turns = 0
        actions: list[Action] = [self.exited(now, status)]
        if self.state == State.STOPPED:
            if self.removing:
                actions.append(Removed())
            elif self.restart_after_stop:
                self.restart_after_stop = False
                actions.extend(self._begin_start(now, operator=True))
        return actions
