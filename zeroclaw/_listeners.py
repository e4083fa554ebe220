"""Every HTTP listener of this process by name: the connections each holds open and those
it cut, by cause. The listeners (`_asgi.serve_guarded`) count here; the metrics read it
without loading the HTTP server, which a daemon without a listener never imports."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import trio

from ._http_guard import Cut


@dataclass
class ListenerCounts:
    """One listener's connections: open now, and those it cut, by cause (kept across
    restarts of the listener, so the metrics counters only grow)."""

    open: int = 0
    cut: Counter[Cut] = field(default_factory=Counter)
    closed: trio.Event = field(default_factory=trio.Event)  # set at a close (then a new one)

    def note_closed(self) -> None:
        self.open -= 1
        self.closed.set()
        self.closed = trio.Event()


class ListenerBook:
    """Every HTTP listener of this process by name, for the metrics."""

    def __init__(self) -> None:
        self._counts: dict[str, ListenerCounts] = {}

    def counts(self, name: str) -> ListenerCounts:
        return self._counts.setdefault(name, ListenerCounts())

    def snapshot(self) -> dict[str, ListenerCounts]:
        return dict(self._counts)


LISTENERS = ListenerBook()
