"""Memory records and their ids."""

from __future__ import annotations

import os
import threading
import time

import msgspec

CORE_CATEGORIES = ("core", "daily", "conversation")
MAX_CONTENT_BYTES = 256 * 1024
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Record(msgspec.Struct, frozen=True, omit_defaults=True):
    id: str
    agent: str
    key: str
    content: str
    category: str
    created_at: float
    updated_at: float
    session: str | None = None
    length: int = 0  # tokens, for BM25


class Turn(msgspec.Struct, frozen=True):
    """One entry of a conversation transcript."""

    role: str  # "user" | "assistant" | "tool"
    content: str
    at: float


class SessionDigest(msgspec.Struct, frozen=True):
    """What a session's compaction kept of the turns it dropped (ADR 0059): the summary its
    agent's provider wrote, and the range of turns it covers (sequence numbers, inclusive;
    `turns` of them were still held when they were dropped)."""

    summary: str
    first_seq: int
    through_seq: int
    turns: int
    at: float


class SessionSummary(msgspec.Struct, frozen=True):
    """One stored session of a namespace: its key, how many turns, when it last changed."""

    session: str
    turns: int
    last_at: float


_lock = threading.Lock()
_last = [0, 0]


def new_id(now: float | None = None) -> str:
    """26-char, lexicographically sortable by creation time, unique within this process
    (a monotonic counter breaks ties in the same millisecond) and across processes (random)."""
    ms = int((time.time() if now is None else now) * 1000)
    with _lock:
        if ms <= _last[0]:
            ms = _last[0]
            _last[1] += 1
        else:
            _last[0], _last[1] = ms, 0
        counter = _last[1]
    value = (ms << 80) | ((counter & 0xFFFF) << 64) | int.from_bytes(os.urandom(8), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def valid_category(category: str) -> bool:
    return 0 < len(category) <= 32 and category.replace("_", "").replace("-", "").isalnum()
