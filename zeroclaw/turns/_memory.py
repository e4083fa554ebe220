"""The memory service's wire: each operation once, with its request and answer structs.

Agent -> daemon: requests to the `MEMORY_SERVICE` service; the operator's control socket
carries the same structs. The caller is the router's authenticated identity (or the
operator), never a field here: fields a struct does not name are ignored, and no write
names a namespace, so nothing in a body can say where a write lands. Neutral: agents import
it without the store (ADR 0048).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal, get_args

import msgspec

from .._ops import Operation

MEMORY_SERVICE = "memory"
MAX_KEY_BYTES = 256
MAX_SESSION_BYTES = 128

MAX_LIMIT = 1000  # records or hits one list/recall returns
MAX_TURNS = 16  # turns in one append_turns (a user message and its answer, with tool turns)
# A turn's context (ADR 0059): what one context may ask for and one compaction may write.
MAX_CONTEXT_TOKENS = 1_000_000  # a history or recall budget
MAX_RECALL_K = 50  # records recalled into one turn
MAX_QUERY_BYTES = 16 * 1024  # the recall query (the turn's text, cut by the engine)
MAX_SUMMARY_BYTES = 64 * 1024  # a session's summary
MAX_FACTS = 16  # facts one compaction stores
MAX_FACT_BYTES = 4096  # one fact
COMPACTED_CATEGORY = "compacted"  # the category of the facts a compaction stores
# Ids are 26 characters and aliases at most 32: anything longer names nothing. Lookups are
# bounded here because LMDB refuses an empty key or one over 511 bytes with an error that
# would read as a storage fault (and, in a write, fail every other write of its batch).
MAX_NAME_BYTES = 64

Bounds = dict[str, tuple[int, int]]  # field -> (fewest, most) UTF-8 bytes, when given

Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)]

MemoryOp = Literal[
    "store",
    "forget",
    "append_turn",
    "append_turns",
    "get",
    "list",
    "recall",
    "session",
    "stats",
    "export",
    "purge",
    "context",
    "compact",
]
MEMORY_OPS: tuple[str, ...] = get_args(MemoryOp)
WRITE_OPS = frozenset({"store", "forget", "append_turn", "append_turns", "compact"})
READ_OPS = frozenset({"get", "list", "recall", "session", "stats", "export", "context"})

# Every code a memory refusal carries: the one list (the README's "Error codes" section,
# the tools' and the control socket's codes are built from it).
MemoryErrorCode = Literal[
    "bad_request",  # a body that does not fit its operation, or an unknown operation
    "forbidden",  # outside the caller's scope (another namespace, purge by an agent)
    "storage_error",  # the store failed (a damaged page, an LMDB error); the daemon lives
    "busy",  # too many writes queued
    "unknown_agent",  # the operator named no configured agent
    "read_only_profile",  # a store or forget by an agent whose risk profile is readonly
    "session_not_found",  # `sessions show`: the agent has no session of that key
    "quota_exceeded",  # the agent's records, bytes or a sender's transcript share are at the cap
]
MEMORY_ERROR_CODES: tuple[str, ...] = get_args(MemoryErrorCode)


class _Args(msgspec.Struct, frozen=True, kw_only=True):
    # A list field's bounds apply to each of its items.
    _BOUNDS: ClassVar[Bounds] = {}

    def __post_init__(self) -> None:
        for name, (low, high) in self._BOUNDS.items():
            value = getattr(self, name)
            for item in value if isinstance(value, list) else [value]:
                size = len(item.encode("utf-8", "replace")) if isinstance(item, str) else low
                if not low <= size <= high:
                    raise ValueError(f"{name!r} must be {low}..{high} bytes")


class StoreArgs(_Args, frozen=True):
    # key, content and category are checked by the store, the one place that writes them
    key: str
    content: str
    category: str = "core"
    session: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"session": (0, MAX_SESSION_BYTES)}


class ForgetArgs(_Args, frozen=True):
    key: str | None = None
    id: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"key": (1, MAX_KEY_BYTES), "id": (1, MAX_NAME_BYTES)}


class AppendTurnArgs(_Args, frozen=True):
    session: str
    role: str  # checked against the store's TURN_ROLES, in the one place that writes turns
    content: str


class TurnArg(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    role: str
    content: str


class AppendTurnsArgs(_Args, frozen=True):
    session: str
    turns: Annotated[list[TurnArg], msgspec.Meta(min_length=1, max_length=MAX_TURNS)]


class GetArgs(_Args, frozen=True):
    key: str | None = None
    id: str | None = None
    agent: str | None = None  # a readable namespace; the caller's own when None
    _BOUNDS: ClassVar[Bounds] = {
        "key": (1, MAX_KEY_BYTES),
        "id": (1, MAX_NAME_BYTES),
        "agent": (0, MAX_NAME_BYTES),
    }


class ListArgs(_Args, frozen=True):
    agents: list[str] | None = None
    category: str | None = None
    since: float | None = None
    until: float | None = None
    limit: Limit = 50
    before: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"agents": (0, MAX_NAME_BYTES)}

    def __post_init__(self) -> None:
        super().__post_init__()
        # msgspec has no finiteness constraint; NaN would compare false everywhere.
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name!r} must be a finite number")


class RecallArgs(_Args, frozen=True):
    query: str = ""
    agents: list[str] | None = None
    limit: Limit = 10
    # An agent's recall tool naming other namespaces searches its own too (ADR 0039).
    with_own: bool = False
    _BOUNDS: ClassVar[Bounds] = {"agents": (0, MAX_NAME_BYTES)}


class SessionArgs(_Args, frozen=True):
    session: str = ""
    limit: Limit = 200
    _BOUNDS: ClassVar[Bounds] = {"session": (0, MAX_SESSION_BYTES)}


class StatsArgs(_Args, frozen=True):
    pass


class ExportArgs(_Args, frozen=True):
    agent: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"agent": (0, MAX_NAME_BYTES)}


class PurgeArgs(_Args, frozen=True):
    agent: str = ""
    _BOUNDS: ClassVar[Bounds] = {"agent": (0, MAX_NAME_BYTES)}


Tokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_CONTEXT_TOKENS)]
Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class ContextArgs(_Args, frozen=True):
    """What a turn is given before its first model call, in one request (ADR 0059): the
    newest turns of `session` that fit in `history_tokens` together with the session's
    summary; with `compact`, the older turns a compaction should summarise when some no
    longer fit; with `recall_k`, the caller's records (and those of the namespaces it may
    read, chosen by the service, never named here) that rank best against `query`, within
    `recall_tokens`."""

    session: str
    history_tokens: Tokens = 8000
    compact: bool = False
    query: str = ""
    recall_k: Annotated[int, msgspec.Meta(ge=0, le=MAX_RECALL_K)] = 0
    recall_tokens: Tokens = 0
    _BOUNDS: ClassVar[Bounds] = {
        "session": (1, MAX_SESSION_BYTES),
        "query": (0, MAX_QUERY_BYTES),
    }


RECALL_QUERY_CHARS = 2000  # a long message is recalled for by its start


def context_args(
    session: str,
    text: str,
    *,
    history_tokens: int,
    compact: bool,
    recall: bool,
    recall_k: int,
    recall_tokens: int,
) -> ContextArgs:
    """The one request a turn makes before its first model call (ADR 0059), from the agent's
    `[agents.<a>.memory]` settings; `recall`: whether this turn recalls at all (its toolset
    holds `memory_recall` and the agent recalls). Pure: the agent and the daemon, which
    reads it ahead for a chat turn (ADR 0068), build the same request from the same
    settings."""
    return ContextArgs(
        session=session,
        history_tokens=history_tokens,
        compact=compact,
        query=text[:RECALL_QUERY_CHARS] if recall else "",
        recall_k=recall_k if recall else 0,
        recall_tokens=recall_tokens if recall else 0,
    )


class CompactArgs(_Args, frozen=True):
    """Replace the turns of `session` up to `through_seq` by `summary` (which covers them
    and the session's earlier summary), storing `facts` as records of category
    `compacted` in the same transaction. Idempotent: a range already compacted changes
    nothing."""

    session: str
    from_seq: Seq
    through_seq: Seq
    summary: str
    facts: Annotated[list[str], msgspec.Meta(max_length=MAX_FACTS)] = msgspec.field(
        default_factory=list
    )
    _BOUNDS: ClassVar[Bounds] = {
        "session": (1, MAX_SESSION_BYTES),
        "summary": (1, MAX_SUMMARY_BYTES),
        "facts": (1, MAX_FACT_BYTES),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.from_seq > self.through_seq:
            raise ValueError("'from_seq' must not be after 'through_seq'")


MemoryArgs = (
    StoreArgs
    | ForgetArgs
    | AppendTurnArgs
    | AppendTurnsArgs
    | GetArgs
    | ListArgs
    | RecallArgs
    | SessionArgs
    | StatsArgs
    | ExportArgs
    | PurgeArgs
    | ContextArgs
    | CompactArgs
)


# --- answers ------------------------------------------------------------------------------


class MemoryRecord(msgspec.Struct, frozen=True):
    id: str
    agent: str
    key: str
    content: str
    category: str
    session: str | None
    created_at: float
    updated_at: float


class MemoryHit(MemoryRecord, frozen=True):
    score: float


class MemoryStored(msgspec.Struct, frozen=True):
    record: MemoryRecord


class MemoryFound(msgspec.Struct, frozen=True):
    record: MemoryRecord | None


class MemoryRecords(msgspec.Struct, frozen=True):
    records: list[MemoryRecord]


class MemoryHits(msgspec.Struct, frozen=True):
    hits: list[MemoryHit]


class MemoryQuotaInfo(msgspec.Struct, frozen=True):
    """An agent's memory caps (`[agents.<a>.memory]`, ADR 0046)."""

    max_records: int
    max_bytes: int
    max_session_turns: int
    max_session_bytes: int
    max_transcript_bytes: int
    max_sender_bytes: int


class NamespaceCounts(msgspec.Struct, frozen=True):
    records: int
    session_turns: int
    record_bytes: int = 0  # UTF-8 keys and contents of the records
    transcript_bytes: int = 0  # UTF-8 contents of every session's turns
    quota: MemoryQuotaInfo | None = None  # None: not a configured agent
    # Since the daemon started: writes refused by quota kind, oldest turns dropped.
    quota_refusals: dict[str, int] = msgspec.field(default_factory=dict)
    turns_dropped: int = 0


class MemoryStats(msgspec.Struct, frozen=True):
    namespaces: dict[str, NamespaceCounts]
    commits: int
    committed_ops: int
    map_growths: int


class MemoryForgotten(msgspec.Struct, frozen=True):
    forgotten: bool


class MemoryPurged(msgspec.Struct, frozen=True):
    purged: int


class MemoryAppended(msgspec.Struct, frozen=True):
    """An append_turn(s): the sequence number of the session's last turn."""

    seq: int


class SessionTurn(msgspec.Struct, frozen=True):
    role: str
    content: str
    at: float


class MemorySession(msgspec.Struct, frozen=True):
    turns: list[SessionTurn]


class ContextTurn(msgspec.Struct, frozen=True):
    """A turn of a session, with its sequence number (what a compaction names)."""

    seq: int
    role: str
    content: str
    at: float


class MemorySummary(msgspec.Struct, frozen=True):
    """A session's summary and the turns it covers (`first_seq`..`through_seq`)."""

    summary: str
    first_seq: int
    through_seq: int
    turns: int
    at: float


class RecalledMemory(msgspec.Struct, frozen=True):
    """A record recalled into a turn; `cut` when its content was cut to the budget."""

    id: str
    agent: str
    key: str
    content: str
    category: str
    created_at: float
    updated_at: float
    cut: bool = False


class MemoryContext(msgspec.Struct, frozen=True):
    turns: list[ContextTurn]  # the newest that fit, oldest first
    summary: MemorySummary | None = None
    cut: bool = False  # older turns that no summary covers did not fit
    overflow: list[ContextTurn] = msgspec.field(default_factory=list)  # to summarise
    memories: list[RecalledMemory] = msgspec.field(default_factory=list)  # best first
    # The sequence number of the session's newest turn when it was read (0: none), shown
    # or not: what tells an agent that a context read ahead of its turn predates the
    # session's last append (ADR 0068).
    last_seq: int = 0


class PrefetchedContext(msgspec.Struct, frozen=True):
    """A turn's context the daemon read as it opened the turn (ADR 0068), with the request
    it answers: the agent takes it in place of its own MEMORY_CONTEXT request when that
    request would be the same and the context is not older than what the agent last wrote
    to the session."""

    args: ContextArgs
    found: MemoryContext


class MemoryCompacted(msgspec.Struct, frozen=True):
    summary: MemorySummary
    dropped: int  # turns dropped
    facts: list[str]  # the keys of the facts stored
    already: bool = False  # an earlier compaction covered the range: nothing changed


MemoryReply = (
    MemoryStored
    | MemoryFound
    | MemoryRecords
    | MemoryHits
    | MemoryStats
    | MemoryForgotten
    | MemoryPurged
    | MemoryAppended
    | MemorySession
    | MemoryContext
    | MemoryCompacted
)

# --- the operations -----------------------------------------------------------------------

MEMORY_STORE = Operation(MEMORY_SERVICE, "store", StoreArgs, MemoryStored, MEMORY_ERROR_CODES)
MEMORY_FORGET = Operation(MEMORY_SERVICE, "forget", ForgetArgs, MemoryForgotten, MEMORY_ERROR_CODES)
MEMORY_APPEND_TURN = Operation(
    MEMORY_SERVICE, "append_turn", AppendTurnArgs, MemoryAppended, MEMORY_ERROR_CODES
)
MEMORY_APPEND_TURNS = Operation(
    MEMORY_SERVICE, "append_turns", AppendTurnsArgs, MemoryAppended, MEMORY_ERROR_CODES
)
MEMORY_GET = Operation(MEMORY_SERVICE, "get", GetArgs, MemoryFound, MEMORY_ERROR_CODES)
MEMORY_LIST = Operation(MEMORY_SERVICE, "list", ListArgs, MemoryRecords, MEMORY_ERROR_CODES)
MEMORY_RECALL = Operation(MEMORY_SERVICE, "recall", RecallArgs, MemoryHits, MEMORY_ERROR_CODES)
MEMORY_SESSION = Operation(
    MEMORY_SERVICE, "session", SessionArgs, MemorySession, MEMORY_ERROR_CODES
)
MEMORY_STATS = Operation(MEMORY_SERVICE, "stats", StatsArgs, MemoryStats, MEMORY_ERROR_CODES)
MEMORY_EXPORT = Operation(MEMORY_SERVICE, "export", ExportArgs, MemoryRecords, MEMORY_ERROR_CODES)
MEMORY_PURGE = Operation(MEMORY_SERVICE, "purge", PurgeArgs, MemoryPurged, MEMORY_ERROR_CODES)
MEMORY_CONTEXT = Operation(
    MEMORY_SERVICE, "context", ContextArgs, MemoryContext, MEMORY_ERROR_CODES
)
MEMORY_COMPACT = Operation(
    MEMORY_SERVICE, "compact", CompactArgs, MemoryCompacted, MEMORY_ERROR_CODES
)

# op name -> its operation, in MemoryOp's order (a test holds the two to each other).
MEMORY_OPERATIONS: dict[str, Operation[Any, Any]] = {
    op.name: op
    for op in (
        MEMORY_STORE,
        MEMORY_FORGET,
        MEMORY_APPEND_TURN,
        MEMORY_APPEND_TURNS,
        MEMORY_GET,
        MEMORY_LIST,
        MEMORY_RECALL,
        MEMORY_SESSION,
        MEMORY_STATS,
        MEMORY_EXPORT,
        MEMORY_PURGE,
        MEMORY_CONTEXT,
        MEMORY_COMPACT,
    )
}
