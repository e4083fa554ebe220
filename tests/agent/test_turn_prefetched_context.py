"""A chat turn's context read by the daemon for the turn (ADR 0068): the engine awaits it
while it reads its identity files and takes it in place of its own MEMORY_CONTEXT request
only when it answers that very request and shows everything this process last wrote to
the session; otherwise (or when none came) it asks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from tests.agent.helpers import local_engine
from zeroclaw._ops import Operation
from zeroclaw.agent._context import SessionMarks, context_request
from zeroclaw.cli._local_reach import LocalReach
from zeroclaw.providers import Conversation, OfflineProvider
from zeroclaw.providers._types import OnDelta, Step
from zeroclaw.turns import (
    MEMORY_CONTEXT,
    MEMORY_STORE,
    ContextTurn,
    MemoryContext,
    MemorySummary,
    PrefetchedContext,
    StoreArgs,
)

Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)


class CountedReach:
    """The engine's reach, counting the context requests it makes."""

    def __init__(self, reach: LocalReach) -> None:
        self.reach = reach
        self.asked = 0

    async def memory(self, op: Operation[Req, Ans], request: Req) -> Ans:
        if op is MEMORY_CONTEXT:
            self.asked += 1
        return await self.reach.memory(op, request)


def sent(context: PrefetchedContext | None) -> Callable[[], Awaitable[PrefetchedContext | None]]:
    """The daemon's context as the runtime hands it to the engine."""

    async def arrived() -> PrefetchedContext | None:
        return context

    return arrived


class Recording(OfflineProvider):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[Conversation] = []

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        self.asked.append(conversation)
        return await super().complete(conversation, on_delta)


async def test_a_context_read_ahead_is_taken_in_place_of_the_request(tmp_path: Path) -> None:
    async with local_engine(OfflineProvider(), tmp_path) as (engine, reach):
        await reach.memory(MEMORY_STORE, StoreArgs(key="release", content="we ship on friday"))
        request = context_request(engine.spec.memory, "s", "context friday", engine.toolset)
        ahead = PrefetchedContext(request, await reach.memory(MEMORY_CONTEXT, request))
        counted = CountedReach(reach)
        engine.reach = counted
        reply = (await engine.run_turn("context friday", session="s", prefetched=sent(ahead))).reply
    assert counted.asked == 0
    assert "we ship on friday" in reply


async def test_a_context_read_for_another_request_is_asked_for_again(tmp_path: Path) -> None:
    async with local_engine(OfflineProvider(), tmp_path) as (engine, reach):
        await reach.memory(MEMORY_STORE, StoreArgs(key="release", content="we ship on friday"))
        # Read for other words (so recalled nothing): not this turn's request.
        other = context_request(engine.spec.memory, "s", "context tacos", engine.toolset)
        ahead = PrefetchedContext(other, await reach.memory(MEMORY_CONTEXT, other))
        counted = CountedReach(reach)
        engine.reach = counted
        reply = (await engine.run_turn("context friday", session="s", prefetched=sent(ahead))).reply
    assert counted.asked == 1
    assert "we ship on friday" in reply


async def test_a_context_read_before_the_sessions_last_append_is_asked_for_again(
    tmp_path: Path,
) -> None:
    provider = Recording()
    async with local_engine(provider, tmp_path) as (engine, reach):
        request = context_request(engine.spec.memory, "s", "second", engine.toolset)
        # Read ahead while the session was empty; the first turn's append lands after it.
        stale = PrefetchedContext(request, await reach.memory(MEMORY_CONTEXT, request))
        await engine.run_turn("first", session="s")
        counted = CountedReach(reach)
        engine.reach = counted
        await engine.run_turn("second", session="s", prefetched=sent(stale))
        assert counted.asked == 1
        # Read after the second turn's append: it shows it, and is taken.
        request = context_request(engine.spec.memory, "s", "third", engine.toolset)
        fresh = PrefetchedContext(request, await reach.memory(MEMORY_CONTEXT, request))
        await engine.run_turn("third", session="s", prefetched=sent(fresh))
    assert fresh.found.last_seq == 3  # four turns: 0..3
    assert counted.asked == 1
    assert provider.asked[1].history[0].content == "first"
    assert provider.asked[2].history[2].content == "second"


def found(last_seq: int, through_seq: int | None = None) -> MemoryContext:
    summary = None if through_seq is None else MemorySummary("s", 0, through_seq, 2, 0.0)
    turns = [ContextTurn(last_seq, "assistant", "ok", 0.0)] if last_seq else []
    return MemoryContext(turns, summary, last_seq=last_seq)


def test_marks_tell_a_context_older_than_the_last_append_or_compaction() -> None:
    marks = SessionMarks()
    assert marks.current("s", found(0))  # never written by this process
    marks.appended("s", 3)
    assert not marks.current("s", found(1)) and marks.current("s", found(3))
    marks.compacted("s", 1)
    assert not marks.current("s", found(3)) and marks.current("s", found(3, through_seq=1))
    marks.appended("s", 5)  # the summary's mark stays
    assert not marks.current("s", found(5)) and marks.current("s", found(5, through_seq=1))


def test_once_a_session_is_forgotten_no_unknown_session_counts_as_current() -> None:
    marks = SessionMarks(limit=2)
    marks.appended("a", 1)
    marks.appended("b", 1)
    assert marks.current("never", found(0))
    marks.appended("c", 1)  # "a" is forgotten
    assert not marks.current("a", found(1)) and not marks.current("never", found(0))
    assert marks.current("c", found(1))


async def test_a_turn_whose_context_did_not_come_asks_for_it(tmp_path: Path) -> None:
    async with local_engine(OfflineProvider(), tmp_path) as (engine, reach):
        await reach.memory(MEMORY_STORE, StoreArgs(key="release", content="we ship on friday"))
        counted = CountedReach(reach)
        engine.reach = counted
        reply = (await engine.run_turn("context friday", session="s", prefetched=sent(None))).reply
    assert counted.asked == 1 and "we ship on friday" in reply
