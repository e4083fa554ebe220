"""What a turn is given from memory, and the compaction of its session (ADR 0059).

Before the first model call, one memory request (`MEMORY_CONTEXT`) brings the session's
newest turns within the agent's history budget, the session's summary, the turns a
compaction should summarise when some no longer fit, and the records recalled for the
turn's text within the recall budget. Recall runs only in a turn whose toolset holds
`memory_recall`: it gives the model what that tool would, so an origin that is not granted
the tool (a peer, an outside sender, by default) is not given the agent's memories either.

After the turn was answered and kept, a due compaction asks the agent's own provider for a
summary of those turns (merged with the session's summary) and sends it with the facts the
summary names in one `MEMORY_COMPACT`, which stores the facts, keeps the summary and drops
the turns in one transaction. The facts are kept only when the turn's toolset holds
`memory_store` and the profile may write: what that tool could have stored. A summary that
fails (the provider, an empty answer, the service's refusal) keeps the turns and is logged;
the next turn of the session tries again.

A chat turn's context usually follows the turn's message: the daemon reads it while the
message travels and sends it behind it (ADR 0068); the agent takes it when it answers the
very request the agent would make and is not older than what this process last wrote to
the session (`SessionMarks`); else the agent asks, as it always does for a peer's question.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from .._ops import CallRefused
from ..providers import (
    SUMMARY_INSTRUCTIONS,
    SUMMARY_REQUEST,
    Conversation,
    HistoryTurn,
    Provider,
    ProviderError,
    Recalled,
    Recap,
    estimate_usage,
    parse_summary,
)
from ..tools import Reach, Toolset
from ..turns import (
    MAX_FACT_BYTES,
    MAX_FACTS,
    MAX_SUMMARY_BYTES,
    MEMORY_COMPACT,
    MEMORY_CONTEXT,
    CompactArgs,
    ContextArgs,
    ContextTurn,
    MemoryCompacted,
    MemoryContext,
    PrefetchedContext,
    StepUsage,
    context_args,
)
from ._spec import MemorySpec

log = logging.getLogger("zeroclaw.agent")

SUMMARY_SHARE = 4  # a summary takes at most 1/SUMMARY_SHARE of the history budget
CHAT_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class TurnContext:
    history: tuple[HistoryTurn, ...] = ()
    memories: tuple[Recalled, ...] = ()
    recap: Recap | None = None
    cut: bool = False  # older turns that no summary covers are left out
    overflow: tuple[ContextTurn, ...] = ()  # the turns a compaction should summarise


MAX_MARKS = 4096  # sessions whose last write a process remembers


def context_request(memory: MemorySpec, session: str, text: str, tools: Toolset) -> ContextArgs:
    """The one request a turn makes before its first model call."""
    return context_args(
        session,
        text,
        history_tokens=memory.history_budget_tokens,
        compact=memory.compact,
        recall=memory.recall and "memory_recall" in tools,
        recall_k=memory.recall_k,
        recall_tokens=memory.recall_budget_tokens,
    )


class SessionMarks:
    """What this process last wrote to each session: its newest turn's sequence number and
    how far its summary reaches. A context read before that write was committed (the
    daemon reads a chat turn's ahead, as the turn opens, while the previous turn's append
    may still be on its way) shows less, and is not taken (ADR 0068). Pure.

    At most `limit` sessions are remembered, the least recently written forgotten first;
    once one was forgotten, a session not remembered is no proof of freshness any more,
    and its context is asked for again."""

    def __init__(self, limit: int = MAX_MARKS) -> None:
        self.limit = limit
        self._marks: dict[str, tuple[int, int]] = {}
        self._forgot = False

    def appended(self, session: str, seq: int) -> None:
        _, through = self._marks.pop(session, (0, 0))
        self._keep(session, (seq, through))

    def compacted(self, session: str, through_seq: int) -> None:
        last, _ = self._marks.pop(session, (0, 0))
        self._keep(session, (last, through_seq))

    def _keep(self, session: str, mark: tuple[int, int]) -> None:
        self._marks[session] = mark
        if len(self._marks) > self.limit:
            del self._marks[next(iter(self._marks))]
            self._forgot = True

    def current(self, session: str, found: MemoryContext) -> bool:
        """Whether `found`, read for `session`, shows everything this process wrote to it."""
        mark = self._marks.get(session)
        if mark is None:
            return not self._forgot
        through = found.summary.through_seq if found.summary is not None else 0
        return found.last_seq >= mark[0] and through >= mark[1]


def prefetched_context(
    prefetched: PrefetchedContext | None, request: ContextArgs, marks: SessionMarks
) -> TurnContext | None:
    """The context the daemon read ahead, when it answers `request` and is current."""
    if prefetched is None or prefetched.args != request:
        return None
    if not marks.current(request.session, prefetched.found):
        return None
    return turn_context(prefetched.found)


def turn_context(found: MemoryContext) -> TurnContext:
    summary = found.summary
    return TurnContext(
        history=tuple(HistoryTurn(t.role, t.content) for t in found.turns if t.role in CHAT_ROLES),
        memories=tuple(
            Recalled(m.agent, m.key, m.content, m.category, m.updated_at, m.cut)
            for m in found.memories
        ),
        recap=None
        if summary is None
        else Recap(
            summary.summary, summary.first_seq, summary.through_seq, summary.turns, summary.at
        ),
        cut=found.cut,
        overflow=tuple(found.overflow),
    )


async def fetch_context(reach: Reach, request: ContextArgs) -> TurnContext:
    """What the turn is given; nothing when memory refuses (the turn still runs)."""
    session = request.session
    try:
        found = await reach.memory(MEMORY_CONTEXT, request)
    except CallRefused as refused:
        log.warning(
            "session %r: no context from memory: %s %s", session, refused.code, refused.detail
        )
        return TurnContext()
    return turn_context(found)


def summary_conversation(alias: str, context: TurnContext) -> Conversation:
    """What the provider is asked for a compaction's summary."""
    turns = tuple(HistoryTurn(t.role, t.content) for t in context.overflow if t.role in CHAT_ROLES)
    return Conversation(
        alias,
        SUMMARY_INSTRUCTIONS,
        turns,
        SUMMARY_REQUEST,
        recap=context.recap,
        purpose="summary",
    )


async def _ignore(text: str) -> None:
    return None


async def compact_session(
    reach: Reach,
    provider: Provider,
    alias: str,
    memory: MemorySpec,
    session: str,
    context: TurnContext,
    *,
    keep_facts: bool,
    on_step: Callable[[StepUsage], None] = lambda step: None,
) -> MemoryCompacted | None:
    """Summarise `context.overflow` and compact the session with it; any failure keeps the
    turns and says so in the log (and is None). `on_step`: what the summary step used (it
    is metered like a turn's)."""
    first, last = context.overflow[0].seq, context.overflow[-1].seq
    kept = f"agent {alias}: session {session!r} not compacted (turns {first}-{last} kept)"
    conversation = summary_conversation(alias, context)
    try:
        step = await provider.complete(conversation, _ignore)
    except ProviderError as exc:
        log.warning("%s: the summary failed: %s", kept, exc)
        return None
    tokens = step.usage or estimate_usage(conversation, step)
    on_step(StepUsage(step.provider or provider.name, tokens, step.failed))
    summarised = parse_summary(
        step.text or "",
        max_tokens=memory.history_budget_tokens // SUMMARY_SHARE,
        max_facts=MAX_FACTS,
        max_fact_bytes=MAX_FACT_BYTES,
    )
    if summarised is None:
        log.warning("%s: the provider's answer held no summary", kept)
        return None
    request = CompactArgs(
        session=session,
        from_seq=first,
        through_seq=last,
        summary=summarised.summary.encode()[:MAX_SUMMARY_BYTES].decode(errors="ignore"),
        facts=list(summarised.facts) if keep_facts else [],
    )
    try:
        done = await reach.memory(MEMORY_COMPACT, request)
    except CallRefused as refused:
        log.warning("%s: %s %s", kept, refused.code, refused.detail)
        return None
    log.info(
        "agent %s: session %r compacted: turns %d-%d summarised, %d facts kept",
        alias,
        session,
        first,
        last,
        len(done.facts),
    )
    return done
