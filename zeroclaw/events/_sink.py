"""The daemon's event sink: a bounded ring plus live subscribers, fed synchronously.

`publish` never blocks and never fails: producers call it from inside their own hot paths
(the router's frame handler, the runner's transitions). A subscriber that does not keep up
loses the oldest events it has not read, and is told how many it lost. A subscriber that
waits for some kinds only (a reload) names them: the others never wake it (a turn publishes
several events, and every woken task costs the daemon a scheduler round; ADR 0068).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable

import trio

from ._types import Event, Published

RING_CAPACITY = 4096
SUBSCRIBER_BUFFER = 1024


class Subscription:
    """Events published after `subscribe()`, in order; `lost` counts what overflowed.
    Use it as a context manager: leaving it unsubscribes."""

    def __init__(
        self, sink: EventSink, buffer: int, kinds: tuple[type[Event], ...] | None = None
    ) -> None:
        self._sink = sink
        self.kinds = kinds  # None: every event
        self._queue: deque[Published] = deque(maxlen=buffer)
        self._wakeup = trio.Event()
        self.lost = 0

    def _offer(self, item: Published) -> None:
        if len(self._queue) == self._queue.maxlen:
            self.lost += 1
        self._queue.append(item)
        self._wakeup.set()

    def close(self) -> None:
        self._sink._subscribers.discard(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def ready(self) -> None:
        """Until an event is queued. Safe to cancel (a deadline for a keepalive): unlike
        the iterator, whose generator a cancellation ends for good, nothing is lost."""
        if not self._queue:
            self._wakeup = trio.Event()
            await self._wakeup.wait()

    def take(self) -> list[Published]:
        """The queued events, oldest first (none: an empty list)."""
        taken = list(self._queue)
        self._queue.clear()
        return taken

    async def __aiter__(self) -> AsyncIterator[Published]:
        while True:
            while self._queue:
                yield self._queue.popleft()
            self._wakeup = trio.Event()
            await self._wakeup.wait()


class EventSink:
    def __init__(
        self, capacity: int = RING_CAPACITY, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._ring: deque[Published] = deque(maxlen=capacity)
        self._subscribers: set[Subscription] = set()
        self._clock = clock
        self._seq = 0

    def publish(self, event: Event) -> Published:
        self._seq += 1
        item = Published(self._seq, self._clock(), event)
        self._ring.append(item)
        for subscriber in self._subscribers:
            if subscriber.kinds is None or isinstance(event, subscriber.kinds):
                subscriber._offer(item)
        return item

    def recent(self, limit: int | None = None) -> list[Published]:
        """The newest `limit` events kept in the ring (all of them when None), oldest first."""
        items = list(self._ring)
        return items if limit is None else items[-limit:] if limit > 0 else []

    def subscribe(
        self, buffer: int = SUBSCRIBER_BUFFER, *, kinds: tuple[type[Event], ...] | None = None
    ) -> Subscription:
        """Events published from now on; with `kinds`, only events of those types."""
        subscription = Subscription(self, buffer, kinds)
        self._subscribers.add(subscription)
        return subscription

    @property
    def last_seq(self) -> int:
        return self._seq
