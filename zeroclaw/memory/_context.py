"""What a turn is given from memory (ADR 0059), decided without I/O: the records recalled
for it, within its token budget, as the memory wire carries them."""

from __future__ import annotations

from collections.abc import Sequence

from .._tokens import cut_to_tokens, estimate_tokens
from ..turns import ContextTurn, MemorySummary, RecalledMemory
from ._records import Record, SessionDigest, Turn

# What the data block around one record costs beyond its key and content (its tag, the
# owning agent, category and dates), estimated on the high side.
MEMORY_FRAME_TOKENS = 24
# A record that does not fit whole is cut to what is left, if at least this much is.
MIN_CUT_TOKENS = 16


def memory_tokens(record: Record) -> int:
    """What one recalled record costs a turn's budget, its frame included."""
    return MEMORY_FRAME_TOKENS + estimate_tokens(record.key) + estimate_tokens(record.content)


def fit_memories(records: Sequence[Record], budget: int) -> list[RecalledMemory]:
    """The records, best first, while `budget` tokens last: the first that does not fit
    whole is cut to what is left (when at least MIN_CUT_TOKENS of content fit) and ends
    the list. A record larger than any budget (a 256 KiB one) is never sent whole."""
    out: list[RecalledMemory] = []
    left = budget
    for record in records:
        cost = memory_tokens(record)
        if cost <= left:
            out.append(recalled(record))
            left -= cost
            continue
        room = left - (cost - estimate_tokens(record.content))
        if room >= MIN_CUT_TOKENS:
            out.append(recalled(record, cut_to_tokens(record.content, room)))
        break
    return out


def recalled(record: Record, cut: str | None = None) -> RecalledMemory:
    return RecalledMemory(
        record.id,
        record.agent,
        record.key,
        record.content if cut is None else cut,
        record.category,
        record.created_at,
        record.updated_at,
        cut is not None,
    )


def context_turns(turns: Sequence[tuple[int, Turn]]) -> list[ContextTurn]:
    return [ContextTurn(seq, turn.role, turn.content, turn.at) for seq, turn in turns]


def memory_summary(digest: SessionDigest) -> MemorySummary:
    return MemorySummary(
        digest.summary, digest.first_seq, digest.through_seq, digest.turns, digest.at
    )
