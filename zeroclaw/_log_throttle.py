"""At most one log line per kind of event per interval, carrying how many it stands for.

Events an outsider can cause at will (a bus client with a wrong key retries every 100 ms
by default) must not turn into one log line each. Pure: the caller passes the time.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass
class _Window:
    until: float
    suppressed: int = 0


class LogThrottle(Generic[K]):
    """The first event of a kind is logged at once; the rest, until `interval` has passed,
    are counted and reported by the next line of that kind, or by `flush`."""

    def __init__(self, interval: float, *, overflow_key: K, max_keys: int = 256) -> None:
        self.interval = interval
        self.overflow_key = overflow_key  # new kinds count as this once max_keys are held
        self.max_keys = max_keys
        self._windows: dict[K, _Window] = {}

    def event(self, key: K, now: float) -> int:
        """How many events a line logged now should report; 0 means log nothing now."""
        window = self._windows.get(key)
        if window is None and len(self._windows) >= self.max_keys:
            key = self.overflow_key  # a flood of distinct kinds is one kind of flood
            window = self._windows.get(key)
        if window is None or now >= window.until:
            earlier = window.suppressed if window is not None else 0
            self._windows[key] = _Window(now + self.interval)
            return earlier + 1
        window.suppressed += 1
        return 0

    def next_flush(self) -> float:
        """When `flush` next has a count to report (inf: none is held back)."""
        return min((w.until for w in self._windows.values() if w.suppressed), default=math.inf)

    def flush(self, now: float) -> list[tuple[K, int]]:
        """(key, count) for every ended interval that held unreported events; ended
        intervals are forgotten."""
        due = []
        for key, window in list(self._windows.items()):
            if now >= window.until:
                if window.suppressed:
                    due.append((key, window.suppressed))
                del self._windows[key]
        return due
