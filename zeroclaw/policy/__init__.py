"""What an agent's tools may do: path access and shell commands. Pure decisions."""

from ._commands import CommandDecision, decide_command, parse
from ._landlock import SandboxPlan, SandboxUnavailable, abi_version, apply_sandbox, plan_for
from ._paths import (
    Grant,
    PathDecision,
    PathRules,
    check_path,
    decide,
    resolve_request,
    rules_for,
)

__all__ = [
    "CommandDecision",
    "Grant",
    "PathDecision",
    "PathRules",
    "SandboxPlan",
    "SandboxUnavailable",
    "abi_version",
    "apply_sandbox",
    "check_path",
    "decide",
    "decide_command",
    "parse",
    "plan_for",
    "resolve_request",
    "rules_for",
]
