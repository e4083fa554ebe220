"""How a memory operation fails, as agents and the operator see it.

Light on purpose (no LMDB, no trio): the error-code registry and the agent side read it.
"""

from __future__ import annotations

from typing import Literal, get_args

# Every code a memory reply can carry; the README's "Error codes" section lists them.
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


class MemoryServiceError(Exception):
    def __init__(self, code: MemoryErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code: MemoryErrorCode = code
        self.detail = detail
