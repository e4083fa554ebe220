"""What every tool returns, the hourly action budget, and the approval hook."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

import trio

from ..turns import MemoryErrorCode

# Every way a tool call can fail, as the model and the operator see it (ADR 0013). A tool
# never raises: each failure is one of these, with a detail for people.
ToolErrorCode = Literal[
    # refusals by policy
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
    "depth_exceeded",
    "bad_arguments",
    # failures of the action itself
    "not_found",
    "not_a_regular_file",
    "not_a_directory",
    "no_space",
    "too_large",
    "io_error",  # any other OS error; the detail names the errno (EACCES, EIO, ...)
    "timeout",
    "exit_status",
    # failures reported by a daemon service (memory: every MemoryErrorCode) or the bus
    MemoryErrorCode,
    "unknown_service",
    "malformed",
    # a bug: the call raised; logged once with its traceback, the agent carries on
    "internal_error",
    "sandbox_failed",
    "exec_refused",
    "tool_not_granted",  # a peer's turn: not in the callee's peer_tools
    # discovered adapters (issue 15), from the daemon's adapter service
    # (zeroclaw.discovery.AdapterRefusalCode; read_only_profile and bad_arguments above)
    "adapter_not_found",
    "adapter_not_granted",
    "adapter_unsupported",
    "capability_not_offered",
    # sub-agents (issue 12), passed on from the daemon's dispatch service: a dispatch it
    # refused before anything ran (zeroclaw.subagents.DispatchRefusalCode) ...
    "subagent_not_found",
    "subagent_caller_not_allowed",
    "subagent_input_invalid",  # the detail names the JSON pointer into the input
    "subagent_concurrency_limit",
    "subagent_idempotency_conflict",
    "subagent_validation_timeout",  # validating its input or result outlived the bound
    # ... or how an invocation that ran did not succeed (zeroclaw.subagents.InvocationErrorCode)
    "subagent_output_invalid",
    "subagent_no_result",
    "subagent_provider_error",
    "subagent_runtime_failed",
    "subagent_timed_out",
    "subagent_cancelled",
    "daemon_restarted",
    "subagent_internal_error",
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
    data: dict[str, Any] = field(default_factory=dict)

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
