"""One conversation's turns (a Matrix room's, a Telegram chat's) one at a time, in the order
their messages were taken. A lock alone does not keep that order: trio runs tasks spawned
together in either order (it reverses a batch half the time), so the turn of a second
message could take the lock before the first's. Here each message takes its place in its
conversation's queue when it is taken, and its turn waits until it is first."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

K = TypeVar("K", bound=Hashable)


@dataclass(eq=False, slots=True)
class Place(Generic[K]):
    key: K
    first: trio.Event = field(default_factory=trio.Event)


class InOrder(Generic[K]):
    def __init__(self) -> None:
        self._queues: dict[K, deque[Place[K]]] = {}

    def take(self, key: K) -> Place[K]:
        """A place behind the messages of `key` taken before (call it in their order)."""
        place = Place(key)
        queue = self._queues.setdefault(key, deque())
        queue.append(place)
        if len(queue) == 1:
            place.first.set()
        return place

    @asynccontextmanager
    async def turn(self, place: Place[K]) -> AsyncIterator[None]:
        """Until the turns before it have ended, then the conversation is the block's. A
        place left while waiting (cancelled) lets nobody ahead of their turn."""
        try:
            await place.first.wait()
            yield
        finally:
            queue = self._queues[place.key]
            was_first = queue[0] is place
            queue.remove(place)
            if not queue:
                del self._queues[place.key]
            elif was_first:
                queue[0].first.set()

    def __len__(self) -> int:
        """Conversations with a turn running or waiting."""
        return len(self._queues)
