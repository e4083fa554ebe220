"""What every tool returns, the hourly action budget, and the approval hook."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

ERROR_CODES = (
    "path_not_allowed",
    "forbidden_path",
    "read_only_profile",
    "command_not_allowed",
    "approval_denied",
    "rate_limited",
    "not_peers",
    "unknown_agent",
    "unavailable",
    "delegation_not_allowed",
    "tool_not_granted",
)


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    output: str = ""
    error_code: str | None = None  # one of ERROR_CODES, or a tool-specific failure
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def refused(cls, code: str, detail: str) -> ToolResult:
        return cls(False, "", code, detail)


# Asked before a medium-risk action under a supervised profile; False (or no approver at
# all, or a timeout) is a denial.
Approver = Callable[[str], Awaitable[bool]]


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
