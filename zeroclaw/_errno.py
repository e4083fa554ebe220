"""Why a connection failed, in an operator's words: the first errno an HTTP client's error
carries somewhere in its causes (httpx wraps the OSError of each address it tried — trio's
happy eyeballs group them — in errors of its own that have none)."""

from __future__ import annotations

import errno
import os


def first_errno(exc: BaseException) -> int | None:
    """The first errno in `exc`, its group members, causes and contexts; None if none."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return current.errno
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def errno_reason(cause: int) -> str:
    """`Connection refused (ECONNREFUSED)`."""
    return f"{os.strerror(cause)} ({errno.errorcode.get(cause, cause)})"
