"""Memory quotas as pure decisions: current usage plus a request -> allowed, or refused by
one quota kind (ADR 0046).

What is counted (exactly, by the store, in the write transaction that changes it):
- an agent's records: how many, and their bytes (UTF-8 key + content, + 64 each);
- each session's transcript: turns and bytes (UTF-8 content of each turn, + 64 each);
- an agent's transcripts together: bytes;
- an outside sender's share: the bytes of every session whose key names that sender
  (`sender_share`).

Records are refused at their caps: a memory is never dropped behind an agent's back. A
transcript keeps its newest turns: appending past a session's caps drops the oldest turns
of that session, and says how many. Only what dropping within the session cannot make fit
(one append larger than a session may hold, an agent's or a sender's whole transcript
total) is refused. A replacement or a removal that shrinks usage is always allowed, so a
store over a cap that an operator lowered can still be cleaned up by its agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

QuotaKind = Literal[
    "records",  # records in an agent's memory
    "bytes",  # bytes of an agent's records
    "session_turns",  # turns one append brings to a session (more than it may ever hold)
    "session_bytes",  # bytes one append brings to a session (more than it may ever hold)
    "transcript_bytes",  # bytes of all of an agent's session transcripts
    "sender_bytes",  # bytes of all the sessions of one outside sender (its share)
]
QUOTA_KINDS: tuple[str, ...] = get_args(QuotaKind)

MIB = 1 << 20


@dataclass(frozen=True)
class MemoryQuota:
    """One agent's caps (`[agents.<a>.memory]`); the defaults bound a store to well under
    what its map starts with, whatever outside senders send."""

    max_records: int = 10_000
    max_bytes: int = 64 * MIB
    max_session_turns: int = 400
    max_session_bytes: int = 1 * MIB
    max_transcript_bytes: int = 64 * MIB
    max_sender_bytes: int = 4 * MIB

    def cap(self, kind: QuotaKind) -> int:
        return int(getattr(self, f"max_{kind}"))


DEFAULT_QUOTA = MemoryQuota()


@dataclass(frozen=True)
class Allowed:
    pass


@dataclass(frozen=True)
class OverQuota:
    kind: QuotaKind
    cap: int
    detail: str


@dataclass(frozen=True)
class KeepNewest:
    """Append, after dropping the `drop` oldest turns of the session (`dropped_bytes`)."""

    drop: int = 0
    dropped_bytes: int = 0


# The part of an agent's max_transcript_bytes all outside senders' sessions together may
# hold: the rest stays for the operator's own sessions.
OUTSIDE_TRANSCRIPT_SHARE = 0.5


def sender_share(session: str) -> str | None:
    """The outside sender a session key belongs to, or None: keys of the form
    `<channel>:<sender>/<name>` (how sessions are namespaced by origin) share one quota
    per `<channel>:<sender>`. The operator's and peers' keys have no share."""
    owner, slash, _ = session.partition("/")
    return owner if slash and ":" in owner else None


def store_decision(
    quota: MemoryQuota,
    *,
    records: int,
    record_bytes: int,
    new_bytes: int,
    old_bytes: int | None,
) -> Allowed | OverQuota:
    """Storing a record of `new_bytes` into a memory holding `records` of `record_bytes`;
    `old_bytes` is the size of the record it replaces (same key), None for a new key."""
    if old_bytes is None and records + 1 > quota.max_records:
        return OverQuota(
            "records",
            quota.max_records,
            f"the agent's memory holds {records} records, its cap (max_records = "
            f"{quota.max_records}); forget some first",
        )
    after = record_bytes - (old_bytes or 0) + new_bytes
    if after > quota.max_bytes and new_bytes > (old_bytes or 0):
        return OverQuota(
            "bytes",
            quota.max_bytes,
            f"the agent's records would hold {after} bytes, over its cap (max_bytes = "
            f"{quota.max_bytes}); forget some first",
        )
    return Allowed()


def transcript_decision(
    quota: MemoryQuota,
    *,
    turns: int,
    session_bytes: int,
    oldest: Iterable[int],
    new: Sequence[int],
    transcript_bytes: int,
    share_bytes: int | None,
    outside_bytes: int = 0,
) -> KeepNewest | OverQuota:
    """Appending turns of sizes `new` to a session of `turns` turns and `session_bytes`
    bytes, whose turns are `oldest` in size, oldest first (read only as far as needed).
    `transcript_bytes`: all of the agent's sessions; `share_bytes`: all of this session's
    sender's sessions, None when the session belongs to no outside sender; `outside_bytes`:
    every such sender's sessions together, which may hold at most OUTSIDE_TRANSCRIPT_SHARE
    of the agent's cap (senders are as many as the names a channel's secret signs: without
    it, a few of them filled the cap and the operator's turns were no longer kept)."""
    added = sum(new)
    if len(new) > quota.max_session_turns:
        return OverQuota(
            "session_turns",
            quota.max_session_turns,
            f"{len(new)} turns at once; a session keeps at most {quota.max_session_turns}",
        )
    if added > quota.max_session_bytes:
        return OverQuota(
            "session_bytes",
            quota.max_session_bytes,
            f"{added} bytes at once; a session keeps at most {quota.max_session_bytes}",
        )
    drop = dropped = 0
    sizes = iter(oldest)
    while (
        turns - drop + len(new) > quota.max_session_turns
        or session_bytes - dropped + added > quota.max_session_bytes
    ):
        size = next(sizes, None)
        if size is None:  # counters say more than the turns hold: nothing left to drop
            break
        drop += 1
        dropped += size
    over = _totals_decision(
        quota,
        growth=added - dropped,
        transcript_bytes=transcript_bytes,
        share_bytes=share_bytes,
        outside_bytes=outside_bytes,
    )
    return over if over is not None else KeepNewest(drop, dropped)


def _totals_decision(
    quota: MemoryQuota,
    *,
    growth: int,
    transcript_bytes: int,
    share_bytes: int | None,
    outside_bytes: int,
) -> OverQuota | None:
    """The caps over several sessions, when a write grows the transcripts by `growth`
    bytes: the agent's total, the session's sender's share, all senders' part."""
    if transcript_bytes + growth > quota.max_transcript_bytes:
        return OverQuota(
            "transcript_bytes",
            quota.max_transcript_bytes,
            f"the agent's session transcripts would hold {transcript_bytes + growth} "
            f"bytes, over its cap (max_transcript_bytes = {quota.max_transcript_bytes})",
        )
    if share_bytes is not None and share_bytes + growth > quota.max_sender_bytes:
        return OverQuota(
            "sender_bytes",
            quota.max_sender_bytes,
            f"this sender's sessions would hold {share_bytes + growth} bytes, over "
            f"its share (max_sender_bytes = {quota.max_sender_bytes})",
        )
    outside_cap = int(quota.max_transcript_bytes * OUTSIDE_TRANSCRIPT_SHARE)
    if share_bytes is not None and outside_bytes + growth > outside_cap:
        return OverQuota(
            "sender_bytes",
            outside_cap,
            f"the outside senders' sessions together would hold "
            f"{outside_bytes + growth} bytes, over their part of the agent's "
            f"transcripts ({outside_cap} of max_transcript_bytes = "
            f"{quota.max_transcript_bytes}); the rest is kept for the operator",
        )
    return None


def compaction_decision(
    quota: MemoryQuota,
    *,
    session_bytes: int,
    growth: int,
    transcript_bytes: int,
    share_bytes: int | None,
    outside_bytes: int = 0,
) -> Allowed | OverQuota:
    """A compaction replaces a session's oldest turns (and its earlier summary) by a new
    summary, which counts in the session's bytes like a turn (ADR 0059); `growth` is what
    that changes them by. One that shrinks the session is always allowed; one that grows
    it (a summary larger than what it replaces) is held to the same caps as an append."""
    if growth <= 0:
        return Allowed()
    if session_bytes + growth > quota.max_session_bytes:
        return OverQuota(
            "session_bytes",
            quota.max_session_bytes,
            f"the session would hold {session_bytes + growth} bytes with its summary; a "
            f"session keeps at most {quota.max_session_bytes}",
        )
    over = _totals_decision(
        quota,
        growth=growth,
        transcript_bytes=transcript_bytes,
        share_bytes=share_bytes,
        outside_bytes=outside_bytes,
    )
    return over if over is not None else Allowed()
