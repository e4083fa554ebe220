"""A circuit breaker per provider of a fallback chain (ADR 0058). Pure: it owns its state,
the caller passes the time.

    closed --`failures` consecutive failures--> open (for `open_secs`)
    open   --its time passed, a call asks-----> half_open (that one call is the trial)
    half_open --the trial succeeded-----------> closed
              --the trial failed--------------> open again, for twice as long (at most
                                                MAX_OPEN_FACTOR times `open_secs`)
              --the trial was abandoned-------> half_open, the next call is the trial

A failure is the provider's passing trouble only (connection, timeout, 429, 5xx: what makes
a chain ask the next one); any answer of the server, a refusal included, proves it is up
and counts as a success. While open (or while a trial is out) the chain skips it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..turns import BreakerState, ProviderHealth

MAX_OPEN_FACTOR = 10  # a provider that keeps failing is skipped for at most 10x open_secs
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class BreakerSettings:
    failures: int = 3  # consecutive failures that open it
    open_secs: float = 30.0  # how long it stays open the first time


class CircuitBreaker:
    def __init__(self, name: str, settings: BreakerSettings = BreakerSettings()) -> None:
        self.name = name
        self.settings = settings
        self.state: BreakerState = "closed"
        self.failures = 0  # consecutive
        self.open_until = 0.0
        self.open_for = settings.open_secs  # the length of the next opening
        self.trial_out = False  # half_open: the one trial call is running
        self.last_error = ""

    def allows(self, now: float) -> bool:
        """Whether a call may go to this provider now; an open breaker whose time passed
        lets this one call through as its trial."""
        if self.state == "closed":
            return True
        if self.state == "open":
            if now < self.open_until:
                return False
            self.state = "half_open"
        if self.trial_out:
            return False
        self.trial_out = True
        return True

    def succeeded(self) -> None:
        self.state = "closed"
        self.failures = 0
        self.trial_out = False
        self.open_for = self.settings.open_secs

    def failed(self, now: float, error: str) -> None:
        self.failures += 1
        self.last_error = error[:MAX_ERROR_CHARS]
        if self.state == "half_open":
            self.trial_out = False
            self._open(now, self.open_for)
            self.open_for = min(self.open_for * 2, self.settings.open_secs * MAX_OPEN_FACTOR)
        elif self.state == "closed" and self.failures >= self.settings.failures:
            self._open(now, self.open_for)
            self.open_for = min(self.open_for * 2, self.settings.open_secs * MAX_OPEN_FACTOR)

    def abandoned(self) -> None:
        """The call it allowed ended with neither answer nor failure (cancelled)."""
        self.trial_out = False

    def _open(self, now: float, secs: float) -> None:
        self.state = "open"
        self.open_until = now + secs

    def health(self, now: float) -> ProviderHealth:
        retry = max(0.0, self.open_until - now) if self.state == "open" else 0.0
        return ProviderHealth(
            self.name, self.state, self.failures, round(retry, 3), self.last_error
        )
