"""What every tool returns, the hourly action budget, and the approval hook."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

import trio

from .._decode import DecodeErrorCode
from .._process import StartFailure
from ..policy import PathRefusal
from ..turns import (
    AdapterRefusalCode,
    DispatchRefusalCode,
    HttpAdapterErrorCode,
    InvocationErrorCode,
    McpErrorCode,
    MemoryErrorCode,
)

# Every way a tool call can fail, as the model and the operator see it (ADR 0013). A tool
# never raises: each failure is one of these, with a detail for people. A family another
# package owns is named, not copied (issue 25: one list per family).
ToolOwnErrorCode = Literal[
    # refusals by policy (besides policy.PathRefusal)
    "command_not_allowed",
    "approval_denied",
    "rate_limited",
    # the bus's refusals a tool passes on (a part of bus.RefusalCode)
    "not_peers",
    "unknown_agent",
    "unavailable",
    "delegation_not_allowed",
    "depth_exceeded",
    "budget_exceeded",  # the peer's budget (or the asker's origin's on it) is spent
    # failures of the action itself (besides _process.StartFailure)
    "not_found",
    "not_a_regular_file",
    "not_a_directory",
    "no_space",
    "timeout",
    "exit_status",
    # failures reported by a daemon service (memory: MemoryErrorCode, below) or the bus
    "unknown_service",
    # a bug: the call raised; logged once with its traceback, the agent carries on
    "internal_error",
    "tool_not_granted",  # a peer's turn: not in the callee's peer_tools
    # skill_read (ADR 0056): not one of this agent's skills; a path leading out of it
    "skill_not_found",
    "skill_path_not_allowed",
]
ToolErrorCode = Literal[
    PathRefusal,
    ToolOwnErrorCode,
    StartFailure,  # io_error names the errno (EACCES, EIO, ...); bad_arguments
    DecodeErrorCode,  # too_large, malformed
    MemoryErrorCode,  # the memory service's answers to the memory tools
    AdapterRefusalCode,  # discovered adapters (issue 15), from the daemon's adapter service
    HttpAdapterErrorCode,  # an HTTP adapter's request that ended badly (ADR 0054)
    DispatchRefusalCode,  # sub-agents (issue 12): a dispatch the daemon refused ...
    InvocationErrorCode,  # ... or how an invocation that ran did not succeed
    McpErrorCode,  # MCP servers' tools (issue 26)
]
ERROR_CODES: tuple[str, ...] = get_args(ToolErrorCode)


def as_tool_error(code: str | None, fallback: ToolErrorCode) -> ToolErrorCode:
    """A code that crossed a process boundary or came from a decision typed `str`, as a
    member of the set (`fallback` when it is not one)."""
    return cast(ToolErrorCode, code) if code in ERROR_CODES else fallback


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    output: str = ""
    error_code: ToolErrorCode | None = None
    detail: str = ""
    data: dict[str, object] = field(default_factory=dict)  # shown to the model as JSON

    @classmethod
    def refused(cls, code: ToolErrorCode, detail: str) -> ToolResult:
        return cls(False, "", code, detail)


# Asked before a medium-risk action under a supervised profile; False (or no approver at
# all, or a timeout) is a denial.
Approver = Callable[[str], Awaitable[bool]]


async def ask_approval(approver: Approver | None, what: str, timeout_secs: float) -> bool:
    """The approval step: yes only if someone can be asked and says yes in time."""
    if approver is None:
        return False
    with trio.move_on_after(timeout_secs):
        return await approver(what)
    return False


class ActionBudget:
    """At most `limit` tool actions in any rolling hour. Pure: the caller passes `now`."""

    def __init__(self, limit: int, window_secs: float = 3600.0) -> None:
        self.limit = limit
        self.window = window_secs
        self._times: deque[float] = deque()

    def take(self, now: float) -> bool:
        while self._times and self._times[0] <= now - self.window:
            self._times.popleft()
        if len(self._times) >= self.limit:
            return False
        self._times.append(now)
        return True

    def remaining(self, now: float) -> int:
        while self._times and self._times[0] <= now - self.window:
            self._times.popleft()
        return max(self.limit - len(self._times), 0)
