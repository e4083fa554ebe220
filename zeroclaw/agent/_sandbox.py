"""The agent's Landlock ruleset, built in one place for the daemon's agent process and for
the agent the CLI runs in-process without a daemon (ADR 0039), and how the in-process
chat applies it.

In-process, the agent shares the CLI's address space with the memory store it opened, so
the kernel cannot keep the agent from the store: the in-process ruleset is the agent's
plus the CLI's own files (the store's directory and lock file, which the CLI reopens at
every turn, and the chat history's directory). Everything else is the same rule for rule;
the tools' policy still refuses those files to the agent.
"""

from __future__ import annotations

import logging
import os
import platform
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from ..policy import (
    NOT_EXECUTABLE,
    READ,
    ForAgent,
    ProcessConfinement,
    ProcessKind,
    SandboxPlan,
    SandboxUnavailable,
    abi_version,
    apply_sandbox,
    cap_last_cap,
    decide_confinement,
    plan_for,
    plan_readonly,
    url_port,
    user_namespace_filter,
)
from ._spec import AgentSpec

log = logging.getLogger("zeroclaw.agent")

# Every right on the CLI's own files: LMDB creates, writes and locks them.
_ALL = -1


def command_home_root(spec: AgentSpec) -> str:
    """Where this agent's shell commands get their private homes: in the daemon's runtime
    dir, outside every workspace, so no file tool of any agent reaches it."""
    return os.path.join(spec.runtime_dir, "homes", spec.alias)


def subagent_plan(spec: AgentSpec) -> SandboxPlan:
    """The ruleset of a sub-agent revision's runtime (issue 12): its snapshot and the
    system read, nothing written; with bound MCP servers (issue 26), the root of their
    private homes writable (not executable), as an agent's commands' homes are."""
    assert spec.subagent is not None
    plan = plan_readonly(spec.subagent.snapshot, spec.protected_paths, spec.code_paths)
    if not spec.mcp_servers:
        return plan
    return SandboxPlan((*plan.rules, (command_home_root(spec), NOT_EXECUTABLE)))


def agent_plan(spec: AgentSpec) -> SandboxPlan:
    """The ruleset of a (non sub-agent) agent: its workspace, its grants, the system and
    Python paths and the daemon's code (read only, ADR 0044), and with `full` /
    `unrestricted_filesystem` the whole filesystem around
    the protected paths, its forbidden paths and every other agent's workspace; plus the
    root of its commands' private homes (ADR 0012), and its skills' folders read only
    (ADR 0056: the skills dirs are protected, so only these few are reachable)."""
    grants = [(path, mode) for path, mode in spec.access.values()]
    others = {*spec.other_workspaces, *(path for path, _ in spec.access.values())}
    plan = plan_for(
        spec.workspace,
        grants,
        protected=spec.protected_paths,
        anywhere=not spec.risk.workspace_only,
        may_write=spec.risk.may_act,
        excluded=sorted({*spec.risk.forbidden_paths, *others} - {spec.workspace}),
        code=spec.code_paths,
    )
    skills = tuple((skill.folder, READ) for skill in spec.skills)
    return SandboxPlan((*plan.rules, (command_home_root(spec), NOT_EXECUTABLE), *skills))


def connect_ports(spec: AgentSpec) -> tuple[int, ...]:
    """The TCP ports this agent connects to: its providers' (none offline, the base_url's
    port for an HTTP provider, ADR 0043; each of a fallback chain, ADR 0058) and its HTTP
    MCP servers' (each listed in its profile's allowed_endpoints, which the config rules
    checked; ADR 0053)."""
    urls = [getattr(member.config, "base_url", None) for member in spec.provider_chain()]
    urls += [server.url for server in spec.mcp_servers if server.transport == "http"]
    ports = (url_port(url) for url in urls if isinstance(url, str) and url)
    return tuple(sorted({port for port in ports if port is not None}))


def agent_confinement(spec: AgentSpec, abi: int, last_cap: int) -> ProcessConfinement:
    """What this agent's (or sub-agent runtime's) process gets besides its file rules on
    a kernel with Landlock ABI `abi`: both scopes, TCP connect to its provider's port
    only, no capability (ADR 0043)."""
    kind: ProcessKind = "subagent_runtime" if spec.subagent is not None else "agent"
    return decide_confinement(kind, abi, cap_last_cap=last_cap, connect_ports=connect_ports(spec))


def for_agent(spec: AgentSpec) -> ForAgent:
    """What a process the daemon runs for this agent gets of the agent's confinement, on
    this kernel and machine."""
    confinement = agent_confinement(spec, abi_version(), cap_last_cap())
    seccomp = (
        user_namespace_filter(platform.machine(), no_inet=True)
        if confinement.no_inet_sockets
        else None
    )
    return ForAgent(confinement, seccomp or b"")


def describe_sandbox(abi: int, rules: int, confinement: ProcessConfinement) -> str:
    """The agent's account of its sandbox, for the Hello (`status`) and its log."""
    gaps = confinement.describe()
    return f"landlock ABI {abi}, {rules} rules" + (f", {gaps}" if gaps else "")


class InProcessSandboxRequired(Exception):
    """`sandbox = "landlock"` and Landlock cannot be applied to this process: nothing runs."""


@dataclass(frozen=True)
class InProcessSandbox:
    in_force: bool
    summary: str


def confine_in_process(spec: AgentSpec, cli_paths: Sequence[str]) -> InProcessSandbox:
    """Apply `agent_plan(spec)` (plus `cli_paths`, the CLI's own files: a path ending in
    `.lock` is a file, any other a directory) to this process, for good, as the
    daemon's agent would be confined. `sandbox = "none"`: nothing. `auto` without Landlock:
    not confined. `landlock` without it: InProcessSandboxRequired, before anything ran.

    The commands' home root is made first and becomes the temporary directory, where the
    shell tool makes each command's private home when no daemon gave it one."""
    if spec.risk.sandbox == "none":
        return InProcessSandbox(False, 'sandbox = "none"')
    home_root = command_home_root(spec)
    for path in cli_paths:  # they must exist before the rules: a rule needs an open fd
        try:
            if path.endswith(".lock"):
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
            else:
                os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as exc:  # no rule for it: what needs it then fails and says so
            log.warning("cannot prepare %s for the in-process chat: %s", path, exc)
    try:
        os.makedirs(home_root, mode=0o700, exist_ok=True)
    except OSError as exc:
        log.warning("cannot prepare %s for shell commands: %s", home_root, exc)
    plan = agent_plan(spec)
    plan = SandboxPlan((*plan.rules, *((path, _ALL) for path in cli_paths)))
    # The same scopes and TCP rules as the daemon's agent; the capabilities stay: this
    # process is the operator's CLI, which reopens the store it owns.
    confinement = agent_confinement(spec, abi_version(), cap_last_cap())
    try:
        abi = apply_sandbox(plan, confinement)
    except SandboxUnavailable as exc:
        if spec.risk.sandbox == "landlock":
            raise InProcessSandboxRequired(
                f'agent {spec.alias}: sandbox = "landlock" but {exc}; nothing was run '
                '(start the daemon on a kernel with Landlock, or set sandbox = "auto")'
            ) from None
        return InProcessSandbox(False, str(exc))
    tempfile.tempdir = home_root
    return InProcessSandbox(True, describe_sandbox(abi, len(plan.rules), confinement))
