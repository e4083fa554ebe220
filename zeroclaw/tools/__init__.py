"""The agent's tools, each checked against its risk profile before it touches anything.

A tool is one `Tool` (spec, argument struct, `run(ctx, args)`); a `Toolset` is the value a
runtime is given (`DEFAULT_TOOLSET`: every built-in tool; `agent_toolset` adds the
sub-agent tools an agent's spec grants: `agent_catalog`, `agent_dispatch`, facades, and
`skill_read` over its loaded skills).
"""

from ._adapter import ADAPTER_TOOL, INVOKE_ADAPTER, InvokeAdapterArgs, adapter_ruleset
from ._base import (
    ERROR_CODES,
    ActionBudget,
    Approver,
    ToolErrorCode,
    ToolResult,
    as_tool_error,
    ask_approval,
)
from ._builtin import DEFAULT_TOOLSET
from ._dispatch import (
    AGENT_CATALOG,
    AGENT_DISPATCH,
    DISPATCH_TOOL_NAMES,
    agent_toolset,
    dispatch_result,
    facade_tool,
    render_catalog,
    schema_summary,
)
from ._files import file_list, file_read, file_write
from ._orphans import CommandReaper, become_subreaper
from ._reminders import REMINDER_TOOL_NAMES, REMINDER_TOOLS
from ._shell import (
    ShellDecision,
    ShellSettings,
    ShellVerdict,
    decide_shell,
    run_shell,
    shell_environment,
)
from ._skills import SkillReadArgs, read_skill_file, skill_tool
from ._snapshot import (
    MAX_SKILL_READ_BYTES,
    SKILL_READ,
    SKILL_READ_SPEC,
    SNAPSHOT_ERROR_CODES,
    SUBMIT_RESULT,
    SnapshotErrorCode,
    SnapshotResult,
    skill_read,
    submit_result,
    submit_spec,
    wraps_result,
)
from ._toolset import BadArguments, Reach, Tool, ToolContext, Toolset

__all__ = [
    "ADAPTER_TOOL",
    "AGENT_CATALOG",
    "AGENT_DISPATCH",
    "DEFAULT_TOOLSET",
    "DISPATCH_TOOL_NAMES",
    "ERROR_CODES",
    "INVOKE_ADAPTER",
    "MAX_SKILL_READ_BYTES",
    "REMINDER_TOOLS",
    "REMINDER_TOOL_NAMES",
    "SKILL_READ",
    "SKILL_READ_SPEC",
    "SNAPSHOT_ERROR_CODES",
    "SUBMIT_RESULT",
    "ActionBudget",
    "Approver",
    "BadArguments",
    "CommandReaper",
    "InvokeAdapterArgs",
    "Reach",
    "ShellDecision",
    "ShellSettings",
    "ShellVerdict",
    "SkillReadArgs",
    "SnapshotErrorCode",
    "SnapshotResult",
    "Tool",
    "ToolContext",
    "ToolErrorCode",
    "ToolResult",
    "Toolset",
    "adapter_ruleset",
    "agent_toolset",
    "as_tool_error",
    "ask_approval",
    "become_subreaper",
    "decide_shell",
    "dispatch_result",
    "facade_tool",
    "file_list",
    "file_read",
    "file_write",
    "read_skill_file",
    "render_catalog",
    "run_shell",
    "schema_summary",
    "shell_environment",
    "skill_read",
    "skill_tool",
    "submit_result",
    "submit_spec",
    "wraps_result",
]
