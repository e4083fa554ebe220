"""Agent-scoped memory: the LMDB store, its text ranking, and (in the daemon) the service."""

from ._args import (
    MAX_LIMIT,
    MEMORY_OPS,
    AppendTurnArgs,
    AppendTurnsArgs,
    ExportArgs,
    ForgetArgs,
    GetArgs,
    ListArgs,
    MemoryArgs,
    MemoryOp,
    PurgeArgs,
    RecallArgs,
    SessionArgs,
    StatsArgs,
    StoreArgs,
    TurnArg,
    decode_args,
)
from ._control import MemoryControlCommand
from ._errors import MEMORY_ERROR_CODES, MemoryErrorCode, MemoryServiceError
from ._lock import MemoryLock, MemoryLocked
from ._records import CORE_CATEGORIES, Record, SessionSummary, Turn, new_id
from ._service import MemoryGrants, MemoryService, memory_grants, operator_request
from ._sessions import list_sessions, show_session
from ._store import (
    MemoryInputError,
    MemoryStore,
    OperatorScope,
    RecallHit,
    Scope,
    ScopeError,
    StoreCorrupt,
    WriteOp,
)
from ._text import tokenize

__all__ = [
    "CORE_CATEGORIES",
    "MAX_LIMIT",
    "MEMORY_ERROR_CODES",
    "MEMORY_OPS",
    "AppendTurnArgs",
    "AppendTurnsArgs",
    "ExportArgs",
    "ForgetArgs",
    "GetArgs",
    "ListArgs",
    "MemoryArgs",
    "MemoryControlCommand",
    "MemoryErrorCode",
    "MemoryGrants",
    "MemoryInputError",
    "MemoryLock",
    "MemoryLocked",
    "MemoryOp",
    "MemoryService",
    "MemoryServiceError",
    "MemoryStore",
    "OperatorScope",
    "PurgeArgs",
    "RecallArgs",
    "RecallHit",
    "Record",
    "Scope",
    "ScopeError",
    "SessionArgs",
    "SessionSummary",
    "StatsArgs",
    "StoreArgs",
    "StoreCorrupt",
    "Turn",
    "TurnArg",
    "WriteOp",
    "decode_args",
    "list_sessions",
    "memory_grants",
    "new_id",
    "operator_request",
    "show_session",
    "tokenize",
]
