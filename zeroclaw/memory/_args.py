"""The operator's memory arguments (a control request's `args`), as the operation's struct.

A body comes from an agent (through the router) or from the operator (control socket, or
the CLI without a daemon); whatever it holds, `decode_args` returns the operation's struct
or raises MemoryServiceError("bad_request") saying which field is wrong. Fields a struct
does not name are ignored, so nothing in a body can name the namespace a write lands in:
writes have no such field, and the service takes the namespace from the scope.
"""

from __future__ import annotations

import msgspec

from ..turns import (
    MEMORY_OPERATIONS,
    MemoryArgs,
)
from ._errors import MemoryServiceError


def decode_args(op: str, body: object) -> MemoryArgs:
    """The operation's argument struct from a body (None is an empty body)."""
    operation = MEMORY_OPERATIONS.get(op)
    if operation is None:
        raise MemoryServiceError("bad_request", f"unknown memory operation {op[:64]!r}")
    try:
        args: MemoryArgs = msgspec.convert({} if body is None else body, operation.request)
        return args
    except msgspec.ValidationError as exc:
        raise MemoryServiceError("bad_request", f"bad {op} arguments: {exc}") from None
