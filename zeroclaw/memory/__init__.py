"""Agent-scoped memory: the LMDB store, its text ranking, and (in the daemon) the service."""

from ._records import CORE_CATEGORIES, Record, Turn, new_id
from ._store import (
    MemoryInputError,
    MemoryStore,
    OperatorScope,
    RecallHit,
    Scope,
    ScopeError,
    WriteOp,
)
from ._text import tokenize

__all__ = [
    "CORE_CATEGORIES",
    "MemoryInputError",
    "MemoryStore",
    "OperatorScope",
    "RecallHit",
    "Record",
    "Scope",
    "ScopeError",
    "Turn",
    "WriteOp",
    "new_id",
    "tokenize",
]
