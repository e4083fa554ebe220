"""The agent's tools, each checked against its risk profile before it touches anything."""

from ._base import ERROR_CODES, ActionBudget, Approver, ToolErrorCode, ToolResult, as_tool_error
from ._files import file_list, file_read, file_write
from ._shell import run_shell, shell_environment

__all__ = [
    "ERROR_CODES",
    "ActionBudget",
    "Approver",
    "ToolErrorCode",
    "ToolResult",
    "as_tool_error",
    "file_list",
    "file_read",
    "file_write",
    "run_shell",
    "shell_environment",
]
