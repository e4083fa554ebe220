"""The per-agent lifecycle state machine and restart policy. Pure: no clock, no I/O.

    stopped ──start──▶ starting ──ready──▶ running
       ▲                  │                  │
       │               exited             exited
       │                  ▼                  ▼
    stopping ◀─stop─  backoff ──delay──▶ starting     (or ──▶ fatal)

A run shorter than `stable_after_secs` is a failure; failures back off exponentially from
`backoff_initial_secs` to `backoff_max_secs`; more than `max_restarts` failures inside
`window_secs` is `fatal`, left only by an operator start/restart or a reload.
Every method takes `now` (monotonic seconds) and returns the Transition it made, so the
trio shell can log it and tests can drive it with a fake clock.
"""

from __future__ import annotations

import enum
import signal
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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


@dataclass
class Lifecycle:
    alias: str
    policy: RestartPolicy
    state: State = State.STOPPED
    since: float = 0.0
    pid: int | None = None
    started_at: float | None = None
    restarts: int = 0  # automatic restarts performed since the last operator reset
    starts: int = 0  # every start ever, so a waiter can tell a new start from an old state
    last_exit: ExitStatus | None = None
    next_start_at: float | None = None
    _failures: deque[float] = field(default_factory=deque)
    _consecutive_failures: int = 0
    _restart_pending: bool = False

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
            if self._restart_pending:
                self._restart_pending = False
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
