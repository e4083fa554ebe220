"""What an agent's tools may do: path access and shell commands. Pure decisions.

The pure decisions load with the package; what reaches the kernel (Landlock, seccomp,
capabilities, through ctypes) and the interpreter's code paths on first use, so a one-shot
command whose replies only name a sandbox gap does not load them (ADR 0067).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._commands import INTERPRETERS, CommandDecision, PathCheck, Risk, decide_command, parse
from ._confine import (
    PROCESS_KINDS,
    ROOT_FIX,
    ForAgent,
    Gap,
    ProcessConfinement,
    ProcessKind,
    confinement_gaps,
    decide_confinement,
    root_warning,
    url_port,
)
from ._paths import (
    Access,
    Grant,
    GrantMode,
    PathDecision,
    PathRefusal,
    PathRules,
    check_path,
    decide,
    resolve_request,
    rules_for,
)

if TYPE_CHECKING:
    from ._caps import cap_last_cap, drop_capabilities
    from ._code import (
        CODE_PATH_KINDS,
        CodePath,
        CodePathKind,
        InterpreterFacts,
        code_paths,
        code_roots,
        daemon_code_paths,
        inside_code,
    )
    from ._interpreters import program_executables
    from ._landlock import (
        NOT_EXECUTABLE,
        READ,
        SYSTEM_READ_ONLY,
        SYSTEM_SECRETS,
        SandboxPlan,
        SandboxUnavailable,
        abi_version,
        apply_sandbox,
        build_ruleset,
        command_executables,
        enforce_ruleset,
        plan_command_sandbox,
        plan_for,
        plan_readonly,
        process_gaps,
        sandbox_summary,
    )
    from ._seccomp import forbid_user_namespaces, user_namespace_filter

_load = lazy_attributes(
    __name__,
    {
        "cap_last_cap": "._caps",
        "drop_capabilities": "._caps",
        "CODE_PATH_KINDS": "._code",
        "CodePath": "._code",
        "CodePathKind": "._code",
        "InterpreterFacts": "._code",
        "code_paths": "._code",
        "code_roots": "._code",
        "daemon_code_paths": "._code",
        "inside_code": "._code",
        "program_executables": "._interpreters",
        "NOT_EXECUTABLE": "._landlock",
        "READ": "._landlock",
        "SYSTEM_READ_ONLY": "._landlock",
        "SYSTEM_SECRETS": "._landlock",
        "SandboxPlan": "._landlock",
        "SandboxUnavailable": "._landlock",
        "abi_version": "._landlock",
        "apply_sandbox": "._landlock",
        "build_ruleset": "._landlock",
        "command_executables": "._landlock",
        "enforce_ruleset": "._landlock",
        "plan_command_sandbox": "._landlock",
        "plan_for": "._landlock",
        "plan_readonly": "._landlock",
        "process_gaps": "._landlock",
        "sandbox_summary": "._landlock",
        "forbid_user_namespaces": "._seccomp",
        "user_namespace_filter": "._seccomp",
    },
)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "CODE_PATH_KINDS",
    "INTERPRETERS",
    "NOT_EXECUTABLE",
    "PROCESS_KINDS",
    "READ",
    "ROOT_FIX",
    "SYSTEM_READ_ONLY",
    "SYSTEM_SECRETS",
    "Access",
    "CodePath",
    "CodePathKind",
    "CommandDecision",
    "ForAgent",
    "Gap",
    "Grant",
    "GrantMode",
    "InterpreterFacts",
    "PathCheck",
    "PathDecision",
    "PathRefusal",
    "PathRules",
    "ProcessConfinement",
    "ProcessKind",
    "Risk",
    "SandboxPlan",
    "SandboxUnavailable",
    "abi_version",
    "apply_sandbox",
    "build_ruleset",
    "cap_last_cap",
    "check_path",
    "code_paths",
    "code_roots",
    "command_executables",
    "confinement_gaps",
    "daemon_code_paths",
    "decide",
    "decide_command",
    "decide_confinement",
    "drop_capabilities",
    "enforce_ruleset",
    "forbid_user_namespaces",
    "inside_code",
    "parse",
    "plan_command_sandbox",
    "plan_for",
    "plan_readonly",
    "process_gaps",
    "program_executables",
    "resolve_request",
    "root_warning",
    "rules_for",
    "sandbox_summary",
    "url_port",
    "user_namespace_filter",
]
