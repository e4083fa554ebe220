"""When to rescan after a change: once the watched state has stopped changing for a quiet
period (an editor's save is often several writes), and only if it differs from what the
last scan saw. A pure state machine fed (state, now) at each poll."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any


class Debounce:
    def __init__(self, quiet_secs: float) -> None:
        self.quiet_secs = quiet_secs
        self._scanned: Mapping[Any, Hashable] | None = None  # what the last scan saw
        self._last: Mapping[Any, Hashable] | None = None  # what the last poll saw
        self._since = 0.0  # when the last poll's state first appeared

    @property
    def pending(self) -> bool:
        """A change is waiting for its quiet period."""
        return self._last is not None and self._last != self._scanned

    def observe(self, state: Mapping[Any, Hashable], now: float) -> bool:
        """Feed one poll; True when a rescan should run now (it is then taken as done)."""
        if self._scanned is None:
            self._scanned = self._last = state
            return False
        if state != self._last:
            self._last, self._since = state, now
            return False
        if state != self._scanned and now - self._since >= self.quiet_secs:
            self._scanned = state
            return True
        return False
