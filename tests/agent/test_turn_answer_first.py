"""A turn's answer is heard before its transcript append is answered (ADR 0038), and the
next turn of the same session still reads a history that holds it."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import msgspec
import trio
import trio.testing

from tests.agent.helpers import local_engine
from zeroclaw._ops import Operation
from zeroclaw.agent._turn import TurnEngine, TurnResult
from zeroclaw.cli._local_reach import LocalReach
from zeroclaw.providers import OfflineProvider
from zeroclaw.turns import MEMORY_APPEND_TURNS, MEMORY_SESSION, SessionArgs

Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)


class HeldAppends:
    """Wraps the engine's reach: transcript appends wait for `release`; every memory op
    is logged as it starts and as it ends."""

    def __init__(self, reach: LocalReach) -> None:
        self.reach = reach
        self.release = trio.Event()
        self.log: list[str] = []
        self.append_started = trio.Event()

    async def memory(self, op: Operation[Req, Ans], request: Req) -> Ans:
        session = getattr(request, "session", None)
        self.log.append(f"{op.name} {session}")
        if op is MEMORY_APPEND_TURNS:
            self.append_started.set()
            await self.release.wait()
        result = await self.reach.memory(op, request)
        self.log.append(f"{op.name} {session} done")
        return result


async def test_the_answer_is_heard_before_the_transcript_append_is_answered(
    tmp_path: Path,
) -> None:
    async with local_engine(OfflineProvider(), tmp_path) as (engine, reach):
        held = HeldAppends(reach)
        engine.reach = held
        answered: list[TurnResult] = []
        returned: list[TurnResult] = []

        async def turn() -> None:
            returned.append(await engine.run_turn("hello", on_answer=answered.append))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn)
            await held.append_started.wait()
            assert [r.reply for r in answered] and not returned  # answer out, append held
            held.release.set()
        assert returned == answered


async def _turn(engine: TurnEngine, text: str, session: str, done: list[str]) -> None:
    await engine.run_turn(text, session=session)
    done.append(text)


async def test_the_next_turn_of_a_session_reads_history_after_the_last_append(
    tmp_path: Path,
) -> None:
    async with local_engine(OfflineProvider(), tmp_path) as (engine, reach):
        held = HeldAppends(reach)
        engine.reach = held
        done: list[str] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_turn, engine, "first", "s1", done)
            await held.append_started.wait()
            nursery.start_soon(_turn, engine, "second", "s1", done)
            nursery.start_soon(_turn, engine, "other", "s2", done)
            await trio.testing.wait_all_tasks_blocked()
            # The other session went ahead to its own (held) append; s1's second turn did
            # not read its history while the first turn's append was still on its way.
            assert held.log.count("context s1") == 1
            assert "context s2" in held.log
            held.release.set()
        assert held.log.index("context s1", held.log.index("append_turns s1 done")) > 0
        transcript = await reach.memory(MEMORY_SESSION, SessionArgs(session="s1"))
        assert [t.content for t in transcript.turns if t.role == "user"] == [
            "first",
            "second",
        ]
