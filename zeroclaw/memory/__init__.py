"""Agent-scoped memory: the LMDB store, its text ranking, and (in the daemon) the service."""

from ._control import MemoryControlCommand
from ._lock import MemoryLock, MemoryLocked
from ._records import CORE_CATEGORIES, Record, Turn, new_id
from ._service import MAX_LIMIT, MemoryService, MemoryServiceError, memory_grants, operator_request
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
    "MemoryControlCommand",
    "MemoryInputError",
    "MemoryLock",
    "MemoryLocked",
    "MemoryService",
    "MemoryServiceError",
    "MemoryStore",
    "OperatorScope",
    "RecallHit",
    "Record",
    "Scope",
    "ScopeError",
    "StoreCorrupt",
    "Turn",
    "WriteOp",
    "memory_grants",
    "new_id",
    "operator_request",
    "tokenize",
]
