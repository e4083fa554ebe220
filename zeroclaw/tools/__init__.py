"""The agent's tools, each checked against its risk profile before it touches anything."""

from ._base import ERROR_CODES, ActionBudget, Approver, ToolResult
from ._files import file_list, file_read, file_write
from ._shell import run_shell, shell_environment

__all__ = [
    "ERROR_CODES",
    "ActionBudget",
    "Approver",
    "ToolResult",
    "file_list",
    "file_read",
    "file_write",
    "run_shell",
    "shell_environment",
]
