"""How a memory operation fails, as agents and the operator see it.

Light on purpose (no LMDB, no trio): the error-code registry and the agent side read it.
"""

from __future__ import annotations

from ..turns import MEMORY_ERROR_CODES, MemoryErrorCode  # the one list (ADR 0048)

__all__ = ["MEMORY_ERROR_CODES", "MemoryErrorCode", "MemoryServiceError"]


class MemoryServiceError(Exception):
    def __init__(self, code: MemoryErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code: MemoryErrorCode = code
        self.detail = detail
