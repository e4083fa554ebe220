"""The declared conformance matrix: boundary x path x profile -> expected outcome.

A cell names what it attacks (`boundary`), how the attempt travels (`path`), who attempts
it (`profile`, one agent per profile in the conformance daemon), the attempt itself
(`action`: an offline-grammar message, a probe, a frame) and the typed outcome the product
promises, with the layer that enforces it. The drivers (test_*.py) run every cell of their
path; `test_completeness` checks that every tool, channel type, control command, bus
service, risk level and grant mode of the product has cells here.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tests.conformance import _registries as registries

Kind = Literal["allowed", "refused", "kernel_denied"]
Layer = Literal[
    "tool",  # the tool's own argument checks
    "policy",  # the path/command policy inside the tool
    "engine",  # the turn engine (tools not granted, approvals)
    "memory_service",  # the daemon's memory service (per-namespace rights)
    "router",  # the bus router (peer policy, authentication)
    "control",  # the control socket (peer credentials)
    "channel",  # a channel's own gate (webhook signature, timestamp, replay)
    "zygote",  # what the zygote gives an agent process (its environment)
    "kernel",  # Landlock / the OS
    "kernel_stricter",  # the kernel denies what the policy allows (ADR 0039)
    "cli",  # the CLI's own checks
    "discovery",  # discovery's one redaction (ADR 0047)
    "listener",  # an HTTP listener's own bounds and credential (ADR 0045)
    "turn_service",  # the daemon names a turn's session from its origin (ADR 0041)
    "validator",  # the schema-validation worker pool (killed at its bound, ADR 0046)
    "mcp_host",  # the agent's MCP host: a server's environment, which tools it offers
    "adapter_service",  # the daemon's adapter service: admission, the endpoint rule (ADR 0054)
]

BOUNDARIES = (
    "workspace_files",
    "memory_namespaces",
    "session_transcripts",
    "peer_messaging",
    "delegation",
    "subagent_dispatch",
    "discovery_adapters",
    "secrets",
    "control_socket",
    "router",
    "discovery_redaction",
    "daemon_code",  # the daemon's own code: read-only to every agent (ADR 0044)
    "daemon_resources",  # what an outside client may hold: connections, descriptors, time
    "metrics",  # what the metrics tell, and to whom
    "origin_tools",  # which tools a turn of each origin kind gets (ADR 0042)
    "approvals",  # who answers a supervised approval, by origin kind (ADR 0042)
    "validation_bounds",  # a schema check ends at its bound, whatever the schema and instance
    "memory_quotas",  # an agent's memory stays within its caps, whatever is written
    # ADR 0059: what a turn of each origin is given from memory, and keeps at compaction
    "recalled_memory",
    # ADR 0053: an agent's MCP server, a child process inside the agent's sandbox, and the
    # MCP tools a turn gets by the agent's risk profile
    "mcp_server",
    "mcp_tools",
    # ADR 0056: an agent's skills, read through skill_read only, its own only
    "skills",
    # ADR 0054: what the daemon reaches over HTTP for an agent (an HTTP adapter, an MCP
    # server at an endpoint), and the credential it holds for it
    "http_adapters",
    # ADR 0043: what a process the daemon starts can reach as a process
    "process_signals",
    "capabilities",
    "network",
)
PATHS = (
    "policy",  # the pure decision functions, every corpus spelling
    "grammar/daemon",  # the offline grammar -> agent tool, turn in the daemon's agent
    "grammar/in_process",  # the same, `chat -m` with no daemon (the agent in the CLI)
    "cli/daemon",  # `zeroclaw ... --json` as an operator runs it
    "control_socket",  # raw control requests (another uid)
    "router",  # raw bus frames (unauthenticated, garbage, forged)
    "memory_service",  # a hostile agent's raw memory request on the bus
    "kernel",  # direct syscalls from inside an agent process
    "webhook",  # an inbound webhook channel
    "serial",  # an inbound serial channel
    "telegram",  # an inbound Telegram bot (long polling a loopback Bot API)
    "telegram_webhook",  # a Telegram bot in webhook mode: updates POSTed to the gateway
    "matrix",  # an inbound Matrix channel: its core's decisions and the host's routing
    "cli",  # the CLI chat channel (the cli channel type)
    "subagent_runtime",  # a sub-agent runtime's tools
    "discovery",  # what a discovery scan writes, prints, publishes and logs
    "http_listener",  # raw TCP to each HTTP listener of the model (ADR 0045)
    "sessions",  # a turn of each origin kind names each kind of session (ADR 0041)
    "origin",  # the daemon's pure origin -> tools / approval route decision (ADR 0042)
    "validator",  # the validation worker pool (real processes), then admit / verdict
    "memory_store",  # the memory service over a real LMDB store, with an agent's quota
    "discovery_probe",  # a program run under the probe sandbox (policy.decide_confinement)
    "mcp_server",  # an agent of a real daemon calls its real stdio MCP server's tools
    "context",  # a turn of each origin kind through the engine, its memory and provider
    "http_adapter",  # an agent of a real daemon invokes adapters the daemon reaches over HTTP
)
# profile -> the agent of the conformance daemon that plays it (and how approvals go).
PROFILES: dict[str, tuple[str, bool | None]] = {
    "readonly": ("ro", None),
    "supervised_approve": ("sup", True),
    "supervised_deny": ("sup", False),
    "full": ("full", None),
    "grant_read": ("g_read", True),
    "grant_write": ("g_write", True),
    "grant_read_write": ("g_rw", True),
    "read_memory_from": ("mem", None),
    # not agents: who else knocks
    "other_uid": ("", None),
    "unauthenticated": ("", None),
    "operator": ("", None),
    # the origin kinds (zeroclaw.bus.ORIGIN_KINDS), as origin cells name who starts the turn
    "origin_operator": ("", None),
    "origin_peer": ("", None),
    "origin_channel": ("", None),
    "origin_subagent": ("", None),
    "origin_schedule": ("", None),
    "origin_api": ("", None),
}
# Which profiles stand for which risk level / grant mode (completeness).
LEVEL_PROFILES = {"readonly": "readonly", "supervised": "supervised_approve", "full": "full"}
GRANT_PROFILES = {"read": "grant_read", "write": "grant_write", "read_write": "grant_read_write"}
CHANNEL_PATHS = {
    "cli": "cli",
    "webhook": "webhook",
    "serial": "serial",
    "telegram": "telegram",
    "matrix": "matrix",
}


@dataclass(frozen=True)
class Expect:
    kind: Kind
    code: str | None = None  # tool / service / route error code, errno name, or None
    layer: Layer = "policy"
    contract: str | None = None  # the issue-16 contract (C1..C5) this cell pins
    # A hole the suite found and the product has not closed yet: the table shows the cell
    # violated, the test xfails (strictly: once it holds, the mark must go).
    hole: str | None = None

    def describe(self) -> str:
        return self.kind + (f" {self.code}" if self.code else "")


@dataclass(frozen=True)
class Observed:
    kind: Kind
    code: str | None = None
    detail: str = ""

    def describe(self) -> str:
        return self.kind + (f" {self.code}" if self.code else "")


@dataclass(frozen=True)
class Cell:
    boundary: str
    path: str
    profile: str
    case: str
    action: str  # what is attempted (a template over the daemon's paths)
    expect: Expect
    tool: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        return f"{self.boundary}|{self.path}|{self.profile}|{self.case}"

    def holds(self, observed: Observed) -> bool:
        if observed.kind != self.expect.kind:
            return False
        return self.expect.code is None or observed.code == self.expect.code


def _abi() -> int:
    from zeroclaw.policy import abi_version

    return abi_version()


def _ok(layer: Layer = "policy", contract: str | None = None) -> Expect:
    return Expect("allowed", None, layer, contract)


def _no(code: str, layer: Layer = "policy", contract: str | None = None) -> Expect:
    return Expect("refused", code, layer, contract)


def _eacces(contract: str | None = None, layer: Layer = "kernel") -> Expect:
    return Expect("kernel_denied", "EACCES", layer, contract)


# ----------------------------------------------------------- grammar cells (daemon path)
# (boundary, case, action, tool, {profile: expect}); `{ws}` etc. are filled in per daemon.
_GRAMMAR: list[tuple[str, str, str, str, dict[str, Expect]]] = [
    # workspace files: own workspace
    (
        "workspace_files",
        "read own file",
        "read notes.txt",
        "file_read",
        {p: _ok() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "workspace_files",
        "list own workspace",
        "list .",
        "file_list",
        {p: _ok() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "workspace_files",
        "write own file",
        "write made.txt: x",
        "file_write",
        {
            "readonly": _no("read_only_profile"),
            "supervised_approve": _ok("engine"),
            "supervised_deny": _no("approval_denied", "engine"),
            "full": _ok(),
        },
    ),
    # outside the workspace: policy for workspace_only profiles, C1 for full
    (
        "workspace_files",
        "read outside file",
        "read {outside}/open.txt",
        "file_read",
        {
            "readonly": _no("path_not_allowed"),
            "supervised_approve": _no("path_not_allowed"),
            "full": _ok("policy", "C1"),
        },
    ),
    (
        "workspace_files",
        "read forbidden path",
        "read {outside}/forbidden/key",
        "file_read",
        {
            p: _no("forbidden_path", contract="C1" if p == "full" else None)
            for p in ("readonly", "supervised_approve", "full")
        },
    ),
    (
        "workspace_files",
        "read daemon memory file",
        "read {state}/memory/data.mdb",
        "file_read",
        {p: _no("forbidden_path") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "workspace_files",
        "read daemon config",
        "read {config}",
        "file_read",
        {p: _no("forbidden_path") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "workspace_files",
        "list runtime dir",
        "list {run}",
        "file_list",
        {p: _no("forbidden_path") for p in ("supervised_approve", "full")},
    ),
    (
        "workspace_files",
        "read entry created after start",
        "read {outside}/later.txt",
        "file_read",
        {
            "full": Expect("refused", "io_error", "kernel_stricter", "C1"),
            "supervised_approve": _no("path_not_allowed"),
        },
    ),
    (
        "workspace_files",
        "write outside file",
        "write {outside}/w.txt: x",
        "file_write",
        {"readonly": _no("read_only_profile"), "supervised_approve": _no("path_not_allowed")},
    ),
    # sibling workspaces (grants are outbound: g_* on owner's workspace)
    (
        "workspace_files",
        "read sibling file",
        "read {owner_ws}/shared.txt",
        "file_read",
        {
            "grant_read": _ok(),
            "grant_write": _no("path_not_allowed"),
            "grant_read_write": _ok(),
            "supervised_approve": _no("path_not_allowed"),
            "readonly": _no("path_not_allowed"),
        },
    ),
    (
        "workspace_files",
        "list sibling workspace",
        "list {owner_ws}",
        "file_list",
        {
            "grant_read": _ok(),
            "grant_write": _no("path_not_allowed"),
            "grant_read_write": _ok(),
            "supervised_approve": _no("path_not_allowed"),
        },
    ),
    (
        "workspace_files",
        "write sibling file",
        "write {owner_ws}/by-grant.txt: x",
        "file_write",
        {
            "grant_read": _no("path_not_allowed"),
            "grant_write": _ok("engine"),
            "grant_read_write": _ok("engine"),
            "supervised_approve": _no("path_not_allowed"),
        },
    ),
    # shell: the command policy through the daemon
    (
        "workspace_files",
        "shell allowed program",
        "run ls",
        "shell",
        {
            "readonly": _no("read_only_profile"),
            "supervised_approve": _ok("engine"),
            "supervised_deny": _ok("engine"),
            "full": _ok(),
        },
    ),
    (
        "workspace_files",
        "shell program outside allowlist",
        "run rm notes.txt",
        "shell",
        {p: _no("command_not_allowed") for p in ("supervised_approve", "full")},
    ),
    (
        "workspace_files",
        "shell reads outside path",
        "run cat {outside}/open.txt",
        "shell",
        {"supervised_approve": _no("path_not_allowed")},
    ),
    # memory namespaces
    (
        "memory_namespaces",
        "store",
        "remember: conformance note",
        "memory_store",
        {
            "readonly": _no("read_only_profile", "tool", "C2"),
            "supervised_approve": _ok("tool"),
            "full": _ok("tool"),
        },
    ),
    (
        "memory_namespaces",
        "forget own key",
        "forget no-such-key",
        "memory_forget",
        {"readonly": _no("read_only_profile", "tool", "C2"), "supervised_approve": _ok("tool")},
    ),
    (
        "memory_namespaces",
        "recall own",
        "recall conformance",
        "memory_recall",
        {p: _ok("tool") for p in ("readonly", "supervised_approve", "read_memory_from")},
    ),
    (
        "memory_namespaces",
        "recall granted namespace",
        "recall from owner: ownersecret",
        "memory_recall",
        {
            "read_memory_from": _ok("memory_service", "C3"),
            "supervised_approve": _no("forbidden", "memory_service", "C3"),
        },
    ),
    # peers and delegation (peer group: sup, ro, owner; delegates: sup, ro -> owner)
    (
        "peer_messaging",
        "ask a peer",
        "ask owner: hello",
        "send_message_to_peer",
        {"readonly": _ok("router", "C2"), "supervised_approve": _ok("router")},
    ),
    (
        # An ask is a question: the callee answers with its own peer_tools (none here), so
        # work asked for in a question is refused inside the callee's turn.
        "peer_messaging",
        "ask a peer for work",
        "ask owner: write asked.txt: x",
        "send_message_to_peer",
        {
            "readonly": _no("tool_not_granted", "engine"),
            "supervised_approve": _no("tool_not_granted", "engine"),
        },
    ),
    (
        "peer_messaging",
        "ask a non-peer",
        "ask g_read: hello",
        "send_message_to_peer",
        {"supervised_approve": _no("not_peers", "router")},
    ),
    (
        "delegation",
        "delegate to allowed",
        "delegate owner: recall x",
        "delegate",
        {"readonly": _no("read_only_profile", "tool", "C2"), "supervised_approve": _ok("router")},
    ),
    (
        "delegation",
        "delegate to not allowed",
        "delegate g_read: hi",
        "delegate",
        {"supervised_approve": _no("delegation_not_allowed", "router")},
    ),
    # sub-agents: `helper` lets the cli and sup call it; full is not offered the tools, so
    # the engine answers as for any tool the agent does not have
    (
        "subagent_dispatch",
        "dispatch an allowed sub-agent",
        "dispatch helper: it rained",
        "agent_dispatch",
        {"supervised_approve": _ok("router")},
    ),
    (
        "subagent_dispatch",
        "dispatch outside the allowlist",
        "dispatch helper: it rained",
        "agent_dispatch",
        {"full": _no("bad_arguments", "engine"), "readonly": _no("bad_arguments", "engine")},
    ),
    (
        "subagent_dispatch",
        "catalog",
        "catalog",
        "agent_catalog",
        {"supervised_approve": _ok("engine"), "full": _no("bad_arguments", "engine")},
    ),
    # discovery: manifests in adapters/ beside the config (grants in _world.py)
    (
        "discovery_adapters",
        "invoke with no adapters listed",
        "invoke reviewer: x",
        "invoke_adapter",
        {"grant_read_write": _no("bad_arguments", "engine")},  # no adapters: no tool
    ),
    (
        "discovery_adapters",
        "invoke unregistered adapter",
        "invoke someadapter: x",
        "invoke_adapter",
        {"supervised_approve": _no("adapter_not_granted", "tool")},
    ),
    (
        "discovery_adapters",
        "invoke a listed reading adapter",
        "invoke reviewer: look",
        "invoke_adapter",
        {p: _ok("tool") for p in ("readonly", "full", "grant_read")},
    ),
    (
        "discovery_adapters",
        "invoke an adapter not listed",
        "invoke writer for code.generate: x",
        "invoke_adapter",
        {"grant_read": _no("adapter_not_granted", "tool")},
    ),
    (
        "discovery_adapters",
        "invoke a listed writing adapter",
        "invoke writer for code.generate: x",
        "invoke_adapter",
        {
            "readonly": _no("read_only_profile", "tool"),
            "supervised_approve": _ok("engine"),
            "supervised_deny": _no("approval_denied", "engine"),
            "full": _ok("tool"),
        },
    ),
    (
        # `spy`, a program the daemon runs for the agent, asks the control socket to stop
        # another agent: the kernel scopes the abstract socket (ABI >= 6), else the control
        # server refuses what the daemon started (ADR 0011)
        "control_socket",
        "adapter the daemon runs connects to control",
        "invoke spy: x",
        "invoke_adapter",
        {
            "full": Expect("kernel_denied", "EPERM", "kernel")
            if _abi() >= 6
            else _no("forbidden", "control")
        },
    ),
    (
        # `dialer`, a program the daemon runs for full (offline: no port to reach), connects
        # to the daemon's own webhook listener: it runs outside full's Landlock domain, so
        # it gets full's TCP rules and its no-inet seccomp filter copied (ADR 0043)
        "network",
        "adapter the daemon runs connects to the webhook port",
        "invoke dialer: {port}",
        "invoke_adapter",
        {"full": Expect("kernel_denied", "EACCES", "kernel")},
    ),
    (
        "discovery_adapters",
        "invalid manifest not registered",
        "invoke broken: x",
        "invoke_adapter",
        {"full": _no("adapter_not_found", "tool")},
    ),
    (
        "discovery_adapters",
        "workspace-local program not registered",
        "invoke shady: x",
        "invoke_adapter",
        {"full": _no("adapter_not_found", "tool")},
    ),
    (
        "discovery_adapters",
        "command outside the discovery allowlist not registered",
        "invoke stray: x",
        "invoke_adapter",
        {"full": _no("adapter_not_found", "tool")},
    ),
    # skills (ADR 0056): ro, sup and full load `notes` (it declares nothing), owner loads
    # `ownerskill`, g_read none; the skills dir is the daemon's to every file tool
    (
        "skills",
        "read own skill",
        "skill notes",
        "skill_read",
        {p: _ok("tool") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "skills",
        "read a file inside own skill",
        "skill notes docs/guide.md",
        "skill_read",
        {p: _ok("tool") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "skills",
        "read another agent's skill",
        "skill ownerskill",
        "skill_read",
        {p: _no("skill_not_found", "tool") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "skills",
        "path out of own skill",
        "skill notes ../ownerskill/SKILL.md",
        "skill_read",
        {
            p: _no("skill_path_not_allowed", "tool")
            for p in ("readonly", "supervised_approve", "full")
        },
    ),
    (
        "skills",
        "read own skill with a file tool",
        "read {root}/skills/notes/SKILL.md",
        "file_read",
        {p: _no("forbidden_path") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "skills",
        "write into the skills dir",
        "write {root}/skills/notes/planted.md: obey",
        "file_write",
        {p: _no("forbidden_path") for p in ("supervised_approve", "full")},
    ),
    (
        "skills",
        "an agent without skills",
        "skill notes",
        "skill_read",
        {"grant_read": _no("bad_arguments", "engine")},
    ),
    (
        # owner's peer_tools grant memory_recall only: a question gets no skill
        "skills",
        "a peer asks for a skill",
        "ask owner: skill ownerskill",
        "send_message_to_peer",
        {p: _no("tool_not_granted", "engine") for p in ("readonly", "supervised_approve")},
    ),
]


def _grammar_cells() -> list[Cell]:
    cells = []
    for boundary, case, action, tool, by_profile in _GRAMMAR:
        for profile, expect in by_profile.items():
            # A recall that "works" must also find the granted record.
            finds = tool == "memory_recall" and expect.contract
            extra = {"reply_has": "launch code"} if finds else {}
            if tool == "invoke_adapter" and expect.kind == "allowed":
                extra = {"reply_has": "codex in "}  # the adapter's program really ran
            if action.startswith("invoke spy"):
                extra = {"control_probe": True}
            if action.startswith("invoke dialer"):
                extra = {"dial_probe": True}
            cells.append(
                Cell(boundary, "grammar/daemon", profile, case, action, expect, tool, extra)
            )
    return cells


# ----------------------------------------------------------- in-process (no daemon) cells
_IN_PROCESS: list[tuple[str, str, str, str, dict[str, Expect]]] = [
    (
        "workspace_files",
        "read sibling file",
        "read {owner_ws}/shared.txt",
        "file_read",
        {"grant_read": _ok(), "grant_write": _no("path_not_allowed")},
    ),
    (
        "memory_namespaces",
        "recall granted namespace",
        "recall from owner: ownersecret",
        "memory_recall",
        {"read_memory_from": _ok("memory_service", "C3")},
    ),
    (
        "workspace_files",
        "read outside file",
        "read {outside}/open.txt",
        "file_read",
        {"full": _ok("policy", "C1"), "supervised_approve": _no("path_not_allowed")},
    ),
    (
        "workspace_files",
        "read forbidden path",
        "read {outside}/forbidden/key",
        "file_read",
        {"full": _no("forbidden_path", contract="C1")},
    ),
    (
        "workspace_files",
        "kernel in force in-process",
        "read notes.txt",
        "file_read",
        {"full": Expect("allowed", "sandbox_in_force", "kernel", "C4")},
    ),
    (
        "workspace_files",
        "human line names the sandbox",
        "list .",
        "file_list",
        {"full": Expect("allowed", "under_landlock", "kernel", "C4")},
    ),
    (
        "memory_namespaces",
        "store",
        "remember: in-process note",
        "memory_store",
        {"readonly": _no("read_only_profile", "tool", "C2")},
    ),
    # `sandbox = "landlock"` and a CLI process the kernel gives no Landlock (a seccomp
    # filter hides it): exit 1, nothing run (the write's file is not made)
    (
        "workspace_files",
        "required landlock unavailable in-process",
        "write no-landlock.txt: x",
        "file_write",
        {"full": _no("sandbox_unavailable", "cli", "C4")},
    ),
]


def _in_process_cells() -> list[Cell]:
    return [
        Cell(
            b,
            "grammar/in_process",
            p,
            case,
            action,
            e,
            tool,
            {"reply_has": "launch code"} if tool == "memory_recall" else {},
        )
        for b, case, action, tool, by_profile in _IN_PROCESS
        for p, e in by_profile.items()
    ]


# ----------------------------------------------------------- kernel cells (probe agents)
# (case, op, path template, {profile: expect}); once per profile, not per spelling.
KERNEL_PROBES: list[tuple[str, str, str, dict[str, Expect]]] = [
    (
        "open own file",
        "read",
        "{ws}/notes.txt",
        {p: _ok("kernel") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "create in own workspace",
        "create",
        "{ws}/k-made.txt",
        {"readonly": _eacces(), "supervised_approve": _ok("kernel"), "full": _ok("kernel")},
    ),
    (
        "open outside file",
        "read",
        "{outside}/open.txt",
        {"readonly": _eacces(), "supervised_approve": _eacces(), "full": _ok("kernel", "C1")},
    ),
    (
        "open forbidden path",
        "read",
        "{outside}/forbidden/key",
        {
            p: _eacces("C1" if p == "full" else None)
            for p in ("readonly", "supervised_approve", "full")
        },
    ),
    (
        "open daemon memory file",
        "read",
        "{state}/memory/data.mdb",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "open daemon config",
        "read",
        "{config}",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "open daemon runtime dir",
        "read",
        "{run}",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "open sibling workspace",
        "read",
        "{owner_ws}/shared.txt",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "create outside",
        "create",
        "{outside}/k-out.txt",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
]
KERNEL_PROBES.append(
    (
        "open init's environ",
        "read",
        "/proc/1/environ",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    )
)
# Sibling grants in the kernel: what Landlock gives each grant mode on owner's workspace.
KERNEL_PROBES += [
    (
        "open granted sibling file",
        "read",
        "{owner_ws}/shared.txt",
        {"grant_read": _ok("kernel"), "grant_write": _eacces(), "grant_read_write": _ok("kernel")},
    ),
    (
        "create in sibling workspace",
        "create",
        "{owner_ws}/k-made-by-{alias}.txt",
        {
            "grant_read": _eacces(),
            "grant_write": _ok("kernel"),
            "grant_read_write": _ok("kernel"),
            "supervised_approve": _eacces(),
        },
    ),
]
# Skills in the kernel (ADR 0056): k_ro, k_sup and k_full load `notes`; the skills dir is
# carved out of every grant, each agent's own skill folders read only.
SKILL_PROBES: list[tuple[str, str, str, dict[str, Expect]]] = [
    (
        "open own skill file",
        "read",
        "{root}/skills/notes/SKILL.md",
        {p: _ok("kernel") for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "open another agent's skill",
        "read",
        "{root}/skills/ownerskill/SKILL.md",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "create in own skill folder",
        "create",
        "{root}/skills/notes/k-made-by-{alias}.txt",
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
]
KERNEL_PROBES += SKILL_PROBES
KERNEL_AGENTS = {
    "readonly": "k_ro",
    "supervised_approve": "k_sup",
    "full": "k_full",
    "grant_read": "k_gr",
    "grant_write": "k_gw",
    "grant_read_write": "k_grw",
}


def _kernel_cells() -> list[Cell]:
    cells = []
    skill_cases = {case for case, _, _, _ in SKILL_PROBES}
    for case, op, path, by_profile in KERNEL_PROBES:
        for profile, expect in by_profile.items():
            boundary = "skills" if case in skill_cases else "workspace_files"
            cells.append(Cell(boundary, "kernel", profile, case, f"{op} {path}", expect))
    return cells


# ----------------------------------------------------------- process confinement (ADR 0043)
# Who a process of each kind must not signal, and what else it tries as a process.
SIGNAL_TARGETS = ("daemon", "zygote", "sibling")
AS_ROOT_CASES = ("raw socket", "setuid 1")  # what only a capability would allow


def confinement_kinds() -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """Each process kind of the product (zeroclaw.policy.PROCESS_KINDS) -> the path its
    cells travel, the profiles that play it and its cases. A new kind without an entry
    here fails every conformance test (KeyError) and test_completeness."""
    from zeroclaw.policy import PROCESS_KINDS

    signals = tuple(f"signal {t}" for t in SIGNAL_TARGETS)
    everything = (*signals, *AS_ROOT_CASES, "capabilities", "tcp connect")
    # A program (command, probe) is judged by what it exits with: no raw socket or setuid
    # of its own; no capability says the same of them.
    program = (*signals, "capabilities", "tcp connect")
    known = {
        "agent": ("kernel", tuple(KERNEL_AGENTS), everything),
        "subagent_runtime": ("subagent_runtime", ("operator",), everything),
        "command": ("kernel", ("supervised_approve",), program),
        "probe": ("discovery_probe", ("operator",), program),
    }
    return {kind: known[kind] for kind in PROCESS_KINDS}


def _confinement_expect(case: str, kind: str) -> tuple[str, Expect]:
    abi = _abi()
    if case.startswith("signal "):
        if abi >= 6:
            return "process_signals", Expect("kernel_denied", "EPERM", "kernel")
        return "process_signals", Expect("allowed", None, "kernel")  # status says so
    if case == "tcp connect":  # an offline process: no port at all
        if abi >= 4:
            return "network", Expect("kernel_denied", "EACCES", "kernel")
        return "network", Expect("allowed", None, "kernel")
    if case == "capabilities":
        return "capabilities", Expect("kernel_denied", "no_capabilities", "kernel")
    if case == "raw socket" and kind in ("agent", "subagent_runtime"):
        # offline: no IPv4/IPv6 socket at all (the seccomp filter), before any capability
        return "capabilities", Expect("kernel_denied", "EACCES", "kernel")
    return "capabilities", Expect("kernel_denied", "EPERM", "kernel")


def _confinement_cells() -> list[Cell]:
    cells = []
    for kind, (path, profiles, cases) in confinement_kinds().items():
        for profile in profiles:
            for case in cases:
                boundary, expect = _confinement_expect(case, kind)
                cells.append(
                    Cell(
                        boundary,
                        path,
                        profile,
                        f"{kind}: {case}",
                        case,
                        expect,
                        extra={"kind": kind},
                    )
                )
    return cells


# ----------------------------------------------------------- control socket (another uid)
def _control_cells() -> list[Cell]:
    from tests.conformance._registries import control_commands

    return [
        Cell(
            "control_socket",
            "control_socket",
            "other_uid",
            f"{tag} as uid 65534",
            tag,
            _no("forbidden", "control"),
        )
        for tag in sorted(control_commands())
    ] + [
        # Landlock ABI >= 6 scopes abstract unix sockets: the kernel stops the connect;
        # on an older kernel the control server refuses the agent's process (ADR 0030).
        Cell(
            "control_socket",
            "kernel",
            "supervised_approve",
            "agent connects to control",
            "control",
            Expect("kernel_denied", "EPERM", "kernel")
            if _abi() >= 6
            else _no("forbidden", "control"),
        ),
    ]


# ----------------------------------------------------------- router and bus services
def _router_cells() -> list[Cell]:
    from tests.conformance._registries import bus_services

    cells = [
        Cell(
            "router",
            "router",
            "unauthenticated",
            f"service {name} without CURVE keys",
            name,
            Expect("refused", "no_handshake", "router"),
        )
        for name in sorted(bus_services())
    ]
    cells += [
        Cell(
            "memory_namespaces",
            "memory_service",
            "readonly",
            "raw store from readonly",
            "store",
            _no("read_only_profile", "memory_service", "C2"),
        ),
        # A store names no namespace: whatever the body claims, it lands in the sender's.
        Cell(
            "memory_namespaces",
            "memory_service",
            "supervised_approve",
            "raw store claiming another namespace",
            "store_foreign",
            Expect("refused", None, "memory_service"),
        ),
        Cell(
            "delegation",
            "router",
            "readonly",
            "forged delegation frame",
            "delegate",
            _no("read_only_profile", "router", "C2"),
        ),
        # A question that claims every tool from a turn the daemon never opened (ADR 0052).
        Cell(
            "peer_messaging",
            "router",
            "supervised_approve",
            "ask claiming a grant its turn lacks",
            "ask_forged_grant",
            _no("tool_not_granted", "router"),
        ),
        # A dispatch whose body claims an allowed caller: the router's identity decides.
        Cell(
            "subagent_dispatch",
            "router",
            "readonly",
            "forged dispatch claiming a caller",
            "dispatch_forged",
            _no("subagent_caller_not_allowed", "router"),
        ),
        *(
            Cell(
                "memory_namespaces",
                "memory_service",
                "supervised_approve",
                f"raw {op} of another namespace",
                f"{op}_foreign",
                _no("forbidden", "memory_service"),
            )
            for op in ("recall", "export")
        ),
        Cell(
            "session_transcripts",
            "memory_service",
            "supervised_approve",
            "raw read of another agent's session",
            "session_foreign",
            Expect("refused", None, "memory_service"),
        ),
        Cell(
            "memory_namespaces",
            "memory_service",
            "supervised_approve",
            "raw forget of another agent's id",
            "forget_foreign_id",
            _no("forbidden", "memory_service", "C5"),
        ),
        # C5 keeps today's answer for a missing id: nothing forgotten, no error.
        Cell(
            "memory_namespaces",
            "memory_service",
            "supervised_approve",
            "raw forget of a missing id",
            "forget_missing_id",
            Expect("allowed", "forgotten_false", "memory_service", "C5"),
        ),
    ]
    return cells


# ----------------------------------------------------------- CLI and channels
def _cli_cells() -> list[Cell]:
    return [
        # Read after the channels and probes ran: the webhook's secret was used by then.
        *(
            Cell(
                "secrets",
                "cli/daemon",
                "operator",
                f"{what} carries no known secret",
                what,
                Expect("refused", "no_secret", "cli"),
            )
            for what in ("status --json", "events --json", "daemon log (debug)")
        ),
        Cell(
            "workspace_files",
            "cli",
            "readonly",
            "cli chat --json write",
            "write x.txt: y",
            _no("read_only_profile"),
            "file_write",
        ),
        Cell(
            "memory_namespaces",
            "cli",
            "readonly",
            "cli chat --json store",
            "remember: from the cli",
            _no("read_only_profile", "tool", "C2"),
            "memory_store",
        ),
    ]


def _subagent_cells() -> list[Cell]:
    """The runtime's own tools, in an invocation the operator dispatches (`--task`)."""
    return [
        Cell(
            "subagent_dispatch",
            "subagent_runtime",
            "operator",
            f"skill_read {name}",
            f"read {path}",
            _no("subagent_skill_path_not_allowed", "tool"),
            "skill_read",
        )
        for name, path in (
            # one spelling: each invocation starts a runtime (~10 s); skill_read's path
            # rule is tested per spelling in tests/subagents
            ("dotdot to the config", "../../../zeroclaw.toml"),
        )
    ]


def _channel_cells() -> list[Cell]:
    cells = []
    for path in ("webhook", "serial", "telegram"):
        write = f"write {path}.txt: x"
        cells += [
            Cell(
                "workspace_files",
                path,
                "supervised_approve",
                f"{path} write approved",
                write,
                _ok("engine"),
                "file_write",
            ),
            Cell(
                "workspace_files",
                path,
                "supervised_deny",
                f"{path} write denied",
                write,
                _no("approval_denied", "engine"),
                "file_write",
            ),
            Cell(
                "workspace_files",
                path,
                "supervised_approve",
                f"{path} read outside",
                "read {outside}/open.txt",
                _no("path_not_allowed"),
                "file_read",
            ),
            Cell(
                "workspace_files",
                path,
                "supervised_approve",
                f"{path} run outside path",
                "run cat {outside}/open.txt",
                _no("path_not_allowed"),
                "shell",
            ),
        ]
    cells += [
        Cell(
            "router",
            "webhook",
            "unauthenticated",
            "webhook without signature",
            "unsigned",
            _no("stale_timestamp", "channel"),  # no timestamp header: checked first
        ),
        Cell(
            "router",
            "webhook",
            "unauthenticated",
            "webhook wrong secret",
            "wrong_secret",
            _no("bad_signature", "channel"),
        ),
        Cell(
            "router",
            "webhook",
            "unauthenticated",
            "webhook replayed request",
            "replay",
            _no("replay", "channel"),
        ),
        # Telegram (ADR 0065): a user id no peer group admits gets one line and no turn; a
        # user who is not one of the channel's approvers cannot press Approve (the turn
        # waits on, and the approver's Deny ends it).
        Cell(
            "router",
            "telegram",
            "unauthenticated",
            "telegram sender no group admits",
            "write {ws}/telegram-stranger.txt: x",
            _no("sender_not_accepted", "channel"),
            "file_write",
        ),
        Cell(
            "router",
            "telegram",
            "supervised_deny",
            "telegram approval pressed by a non-approver",
            "write {ws}/telegram-pressed.txt: x",
            _no("not_an_approver", "channel"),
            "file_write",
        ),
        # Telegram's webhook mode (ADR 0065, amended): the gateway's POST /telegram/<alias>
        # takes an update only with the secret token the bot gave setWebhook at its start,
        # only for a bot serving in webhook mode, each update id once; the sender is then
        # admitted by the peer groups as a poll's would be.
        Cell(
            "router",
            "telegram_webhook",
            "unauthenticated",
            "telegram webhook without the secret token",
            "no_secret",
            _no("telegram_secret_mismatch", "channel"),
        ),
        Cell(
            "router",
            "telegram_webhook",
            "unauthenticated",
            "telegram webhook wrong secret token",
            "wrong_secret",
            _no("telegram_secret_mismatch", "channel"),
        ),
        Cell(
            "router",
            "telegram_webhook",
            "unauthenticated",
            "telegram webhook to a polling bot's path",
            "other_path",
            _no("unknown_endpoint", "channel"),
        ),
        Cell(
            "router",
            "telegram_webhook",
            "unauthenticated",
            "telegram webhook replayed update",
            "replay",
            _no("repeated", "channel"),
        ),
        Cell(
            "router",
            "telegram_webhook",
            "unauthenticated",
            "telegram webhook sender no group admits",
            "stranger",
            _no("sender_not_accepted", "channel"),
        ),
    ]
    return cells


def _matrix_cells() -> list[Cell]:
    """The Matrix channel's own gate (ADR 0066): who gets the bot into a room, whose message
    reaches an agent, who answers an approval; driven through MatrixCore and the host's
    routing over a real config (tests/conformance/test_matrix_cells.py)."""
    stranger, admitted = "unauthenticated", "supervised_approve"
    return [
        Cell(
            "router",
            "matrix",
            stranger,
            "matrix invite from a sender no group admits",
            "invite_stranger",
            _no("invite_refused", "channel"),
        ),
        Cell(
            "router",
            "matrix",
            admitted,
            "matrix invite from an admitted sender",
            "invite_admitted",
            _ok("channel"),
        ),
        Cell(
            "router",
            "matrix",
            stranger,
            "matrix message from a sender no group admits",
            "message_stranger",
            _no("sender_not_accepted", "channel"),
        ),
        Cell(
            "router",
            "matrix",
            admitted,
            "matrix message from an admitted sender",
            "message_admitted",
            _ok("channel"),
        ),
        Cell(
            "router",
            "matrix",
            admitted,
            "matrix message flood from one sender",
            "flood",
            _no("rate_limited", "channel"),
        ),
        Cell(
            "router",
            "matrix",
            admitted,
            "matrix end-to-end encrypted room",
            "encrypted_room",
            _no("encrypted_room", "channel"),
        ),
        Cell(
            "approvals",
            "matrix",
            admitted,
            "matrix approval answered by the sender, no approver",
            "answer_not_approver",
            _no("not_an_approver", "channel"),
        ),
        Cell(
            "approvals",
            "matrix",
            admitted,
            "matrix approval answered from another room",
            "answer_other_room",
            _no("unknown_approval", "channel"),
        ),
        Cell(
            "approvals",
            "matrix",
            "supervised_approve",
            "matrix approval answered by an approver",
            "answer_approver",
            _ok("channel"),
        ),
    ]


# ----------------------------------------------------------- sessions by origin (ADR 0041)
# Every origin kind of the product (bus.ORIGIN_KINDS; test_completeness reads it) x every
# kind of session it might try to read. An origin kind is driven the ways listed here
# (via, profile): a new kind without an entry has no cells, and test_completeness fails.
SESSION_KINDS = ("own", "operator_default", "peer", "other_sender")
ORIGIN_DRIVERS: dict[str, tuple[tuple[str, str], ...]] = {
    "operator": (("cli", "operator"),),  # control-socket chat with a --session name
    "channel": (("webhook", "supervised_approve"), ("serial", "supervised_approve")),
    "peer": (("ask", "readonly"),),  # ro asks sup: the router stamps ro's session
    "subagent": (("key", "operator"),),  # runtimes keep no transcript: the daemon's key
    # a schedule's `session` names one of its own (schedule:<agent>.<name>/<session>),
    # whatever it says: the daemon's key against the stored keys
    "schedule": (("schedule", "operator"),),
    "api": (("api", "supervised_approve"),),  # the gateway's `user` field names the session
}


def _session_expect(origin: str, session_kind: str) -> Expect:
    if session_kind == "own" or (origin == "operator" and session_kind == "operator_default"):
        return _ok("turn_service")
    if origin == "operator":  # it reads them with `sessions show`, never continues them
        return _no("bad_request", "turn_service")
    return _no("own_session_only", "turn_service")


def _session_cells() -> list[Cell]:
    return [
        Cell(
            "session_transcripts",
            "sessions",
            profile,
            f"{origin} via {via} reads {session_kind}",
            "history",
            _session_expect(origin, session_kind),
            extra={"origin": origin, "via": via, "session_kind": session_kind},
        )
        for origin, drivers in ORIGIN_DRIVERS.items()
        for via, profile in drivers
        for session_kind in SESSION_KINDS
    ]


# ----------------------------------------------------------- the pure policy (corpus)
CORPUS = Path(__file__).parent / "corpus"


def corpus(name: str) -> list[dict[str, Any]]:
    with (CORPUS / f"{name}.toml").open("rb") as fh:
        return list(tomllib.load(fh)["entry"])


def _expect_word(word: str, layer: Layer = "policy") -> Expect:
    return _ok(layer) if word == "ok" else _no(word, layer)


def _policy_cells() -> list[Cell]:
    cells = []
    for entry in corpus("paths"):
        for profile, word in entry["expect"].items():
            cells.append(
                Cell(
                    entry["boundary"],
                    "policy",
                    profile,
                    entry["id"],
                    entry["spelling"],
                    _expect_word(word),
                    extra=entry,
                )
            )
    for entry in corpus("commands"):
        for profile, word in entry["expect"].items():
            cells.append(
                Cell(
                    entry["boundary"],
                    "policy",
                    profile,
                    entry["id"],
                    entry["command"],
                    _expect_word(word),
                    "shell",
                    extra=entry,
                )
            )
    for entry in corpus("frames"):
        path = entry.get("path", "router")
        layer: Layer = "memory_service" if path == "memory_service" else "router"
        cells.append(
            Cell(
                entry["boundary"],
                path,
                entry["profile"],
                entry["id"],
                entry["frame"],
                Expect(
                    entry.get("kind", "refused"), entry["expect"], layer, hole=entry.get("hole")
                ),
                extra=entry,
            )
        )
    return cells


def daemon_corpus_cells() -> list[Cell]:
    """Every path spelling through the daemon's agent: as `read SPELLING` for the profiles
    the corpus names, or (`daemon = false`) in the entry's own grammar message for one;
    every command spelling as `run COMMAND` for supervised_approve."""
    cells = []
    for entry in corpus("paths"):
        if not entry.get("daemon", True):
            # one profile where the tool layer decides, in a spelling the grammar carries
            cells.append(
                Cell(
                    entry["boundary"],
                    "grammar/daemon",
                    "supervised_approve",
                    "corpus " + entry["id"],
                    entry.get("daemon_action", f"read {entry['spelling']}"),
                    _expect_word(entry["daemon_expect"], "tool"),
                    "shell" if entry.get("daemon_action", "").startswith("run ") else "file_read",
                    extra=entry,
                )
            )
            if "daemon_write" in entry:
                cells.append(
                    Cell(
                        entry["boundary"],
                        "grammar/daemon",
                        "full",
                        f"corpus {entry['id']} (write)",
                        f"write {entry['spelling']}: x",
                        _expect_word(entry["daemon_write"], "tool"),
                        "file_write",
                        extra=entry,
                    )
                )
            continue
        for profile, word in entry["expect"].items():
            if profile in ("supervised_approve", "full"):
                cells.append(
                    Cell(
                        entry["boundary"],
                        "grammar/daemon",
                        profile,
                        "corpus " + entry["id"],
                        f"read {entry['spelling']}",
                        _expect_word(word),
                        "file_read",
                        extra=entry,
                    )
                )
    for entry in corpus("commands"):
        if "supervised_approve" in entry["expect"]:
            word = entry.get("daemon_expect", entry["expect"]["supervised_approve"])
            cells.append(
                Cell(
                    entry["boundary"],
                    "grammar/daemon",
                    "supervised_approve",
                    "corpus command " + entry["id"],
                    f"run {entry['command']}",
                    _expect_word(word, "tool" if word == "exit_status" else "policy"),
                    "shell",
                    extra=entry,
                )
            )
    return cells


def _discovery_cells() -> list[Cell]:
    """Every output surface x every kind of secret, read from the product (ADR 0047): a
    planted secret of that kind never reaches that surface."""
    return [
        Cell(
            "discovery_redaction",
            "discovery",
            "operator",
            f"{kind} in {surface}",
            kind,
            Expect("refused", "no_secret", "discovery"),
            extra={"surface": surface},
        )
        for surface in sorted(registries.discovery_surfaces())
        for kind in sorted(registries.secret_kinds())
    ]


# ----------------------------------------------------------- the daemon's code (ADR 0044)
# One tool cell and one kernel cell per kind of code path the product computes
# (zeroclaw.policy.CODE_PATH_KINDS) and per risk level: a new kind without cells fails
# test_completeness. `{code_<kind>}` is the first path of that kind the conformance daemon
# found at its start; a kind with no path on this installation is skipped by the drivers.
PLANTED = "zc-planted"  # every file a cell tries to make starts so (removed afterwards)
CODE_PROFILES = ("readonly", "supervised_approve", "full")


def code_target(kind: str, how: str) -> str:
    """Where a cell plants a file of its kind: a .pth inside a code directory; beside the
    interpreter or the script (files: the running interpreter written in place is ETXTBSY,
    and either would be replaced through its directory, with a file made there)."""
    if kind in ("interpreter", "script"):  # files
        return f"{{code_{kind}}}.{PLANTED}-{how}-{{alias}}"
    return f"{{code_{kind}}}/{PLANTED}-{how}-{{alias}}.pth"


def code_kernel_probes() -> list[tuple[str, str, str, dict[str, Expect]]]:
    from zeroclaw.policy import CODE_PATH_KINDS

    return [
        (
            f"create in daemon code ({kind})",
            "create",
            code_target(kind, "kernel"),
            {p: _eacces() for p in CODE_PROFILES},
        )
        for kind in CODE_PATH_KINDS
    ]


def _daemon_code_cells() -> list[Cell]:
    from zeroclaw.policy import CODE_PATH_KINDS

    cells = []
    for kind in CODE_PATH_KINDS:
        for profile in CODE_PROFILES:
            cells.append(
                Cell(
                    "daemon_code",
                    "grammar/daemon",
                    profile,
                    f"write daemon code ({kind})",
                    f"write {code_target(kind, 'tool')}: planted",
                    _no("forbidden_path"),
                    "file_write",
                    {"code_kind": kind},
                )
            )
    for case, op, path, by_profile in code_kernel_probes():
        kind = case[case.index("(") + 1 : -1]
        for profile, expect in by_profile.items():
            cells.append(
                Cell(
                    "daemon_code",
                    "kernel",
                    profile,
                    case,
                    f"{op} {path}",
                    expect,
                    None,
                    {"code_kind": kind},
                )
            )
    return cells


# ----------------------------------------------------------- HTTP listeners (ADR 0045)
# What each HTTP listener kind of the config model (`_registries.http_listeners`) refuses
# a request without its credential with; a new listener kind fails here until it has one.
LISTENER_CREDENTIAL = {
    "daemon.metrics_limits": ("metrics", "unauthorized"),
    "channels.webhook.*.limits": ("router", "stale_timestamp"),
    "gateway.limits": ("router", "invalid_api_key"),  # the OpenAI API's 401 (issue 29)
}
# case -> (profile, boundary, action, expect); `cut`: closed before the client was done.
LISTENER_CASES: dict[str, tuple[str, str, str, Expect]] = {
    "slow header cut": (
        "unauthenticated",
        "daemon_resources",
        "slow_header",
        _no("cut", "listener"),
    ),
    "slow body cut": ("unauthenticated", "daemon_resources", "slow_body", _no("cut", "listener")),
    "over the connection cap": (
        "unauthenticated",
        "daemon_resources",
        "over_cap",
        _no("over_cap", "listener"),
    ),
    "descriptors exhausted, the operator is served": (
        "operator",
        "daemon_resources",
        "flood_then_status",
        _ok("listener"),
    ),
}


def _listener_cells() -> list[Cell]:
    from tests.conformance._registries import http_listeners

    cells = []
    for listener in sorted(http_listeners()):
        boundary, refusal = LISTENER_CREDENTIAL[listener]
        kind = (
            listener.split(".")[1]
            if listener.startswith("channels.")
            else listener.split(".")[0].replace("daemon", "metrics")
        )
        for case, (profile, where, action, expect) in LISTENER_CASES.items():
            cells.append(
                Cell(
                    where,
                    "http_listener",
                    profile,
                    f"{kind}: {case}",
                    action,
                    expect,
                    extra={"listener": listener},
                )
            )
        cells += [
            Cell(
                boundary,
                "http_listener",
                "unauthenticated",
                f"{kind}: no credential",
                "no_credential",
                _no(refusal, "listener" if boundary == "metrics" else "channel"),
                extra={"listener": listener},
            ),
            Cell(
                boundary,
                "http_listener",
                "readonly",
                f"{kind}: an agent without the credential",
                "agent_no_credential",
                _no(refusal, "zygote" if boundary == "metrics" else "channel"),
                extra={"listener": listener},
            ),
        ]
    return cells


# ----------------------------------------------------------- origin x tool (ADR 0042)
ORIGIN_MCP_TOOL = "mcp__h__echo"  # an allowed tool of a server the origin cells' agent uses


def _origin_cells() -> list[Cell]:
    """Every origin kind x every agent tool, both read from the product: with the default
    config (no peer_tools, no group tools, no schedule tools) only the operator's turn may
    use an agent tool; a grant (peer_tools for a peer, a peer group's tools for an outside
    sender, a schedule's tools for its runs) gives exactly that tool. A sub-agent turn runs
    on a sub-agent runtime, whose only tools are its own. Then who answers each kind's
    approvals, by the group's `approvals`."""
    from tests.conformance._registries import agent_tools, origin_kinds

    cells = []
    for kind in sorted(origin_kinds()):
        # An MCP server's tool (ADR 0053) is granted by its name like any agent tool.
        for tool in (*sorted(agent_tools()), ORIGIN_MCP_TOOL):
            default = {
                "operator": _ok("engine"),
                # the runtime has no agent tool at all: not a grant it lacks, a tool it
                # does not know
                "subagent": _no("bad_arguments", "engine"),
            }.get(kind, _no("tool_not_granted", "engine"))
            cells.append(
                Cell(
                    "origin_tools",
                    "origin",
                    f"origin_{kind}",
                    f"{tool} by default",
                    tool,
                    default,
                    tool,
                    extra={"kind": kind, "grant": ()},
                )
            )
            # A schedule's `tools` grant its runs a tool, but never a reminder tool (a
            # schedule does not make schedules: the config refuses it).
            grantable = kind in ("peer", "channel", "api") or (
                kind == "schedule" and not tool.startswith("schedule_")
            )
            if grantable:
                cells.append(
                    Cell(
                        "origin_tools",
                        "origin",
                        f"origin_{kind}",
                        f"{tool} when granted",
                        tool,
                        _ok("engine"),
                        tool,
                        extra={"kind": kind, "grant": (tool,)},
                    )
                )
        for setting in ("operator", "sender"):
            route = {
                "operator": "channel",  # its own CLI asks inline
                "channel": "operator" if setting == "operator" else "channel",
                "peer": "none",  # nobody to ask: denied
                "subagent": "none",  # a runtime never talks to users: denied
                "schedule": "operator",  # nobody is at a schedule: the operator's queue
                "api": "operator",  # the OpenAI API cannot ask its client (issue 29)
            }[kind]
            cells.append(
                Cell(
                    "approvals",
                    "origin",
                    f"origin_{kind}",
                    f"approvals = {setting}",
                    setting,
                    Expect("allowed", route, "engine"),
                    extra={"kind": kind, "approvals": setting},
                )
            )
    return cells


# ----------------------------------------------------------- validation bounds and quotas
# One (schema, instance) per way a check ends; the driver checks the pool's outcome has
# that tag, then what `admit` (input) and `verdict` (output) make of it.
def _items(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"items": schema}}


VALIDATION_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "valid": (_items({"type": "array"}), {"items": [1, 2]}),
    "invalid": (_items({"type": "array", "maxItems": 1}), {"items": [1, 2]}),
    "unusable": (_items({"$ref": "#/$defs/missing"}), {"items": [1]}),
    # uniqueItems over objects is quadratic in jsonschema: minutes, killed at the bound
    "out_of_bound": (
        _items({"type": "array", "uniqueItems": True}),
        {"items": [{"k": i} for i in range(20_000)]},
    ),
}
VALIDATION_EXPECT = {
    ("input", "valid"): _ok("validator"),
    ("input", "invalid"): _no("subagent_input_invalid", "validator"),
    ("input", "unusable"): _no("subagent_input_invalid", "validator"),
    ("input", "out_of_bound"): _no("subagent_validation_timeout", "validator"),
    ("output", "valid"): _ok("validator"),
    ("output", "invalid"): _no("subagent_output_invalid", "validator"),
    ("output", "unusable"): _no("subagent_output_invalid", "validator"),
    ("output", "out_of_bound"): _no("subagent_validation_timeout", "validator"),
}
# One attempt per quota kind that goes past that cap (refused), and one that stays within
# it or is kept within it by dropping the oldest turns (allowed).
QUOTA_ATTEMPTS: dict[str, tuple[str, str]] = {
    "records": ("store one record more than max_records", "store up to max_records"),
    "bytes": ("store past max_bytes", "replace a record with a smaller one over the cap"),
    "session_turns": (
        "append more turns at once than max_session_turns",
        "append past max_session_turns (oldest dropped)",
    ),
    "session_bytes": (
        "append more bytes at once than max_session_bytes",
        "append past max_session_bytes (oldest dropped)",
    ),
    "transcript_bytes": ("fill max_transcript_bytes over sessions", "append within it"),
    "sender_bytes": ("fill one outside sender's share", "another sender appends"),
}


def _bounds_quota_cells() -> list[Cell]:
    from zeroclaw.memory import QUOTA_KINDS
    from zeroclaw.subagents import VALIDATION_OUTCOMES

    cells = [
        Cell(
            "validation_bounds",
            "validator",
            "operator",
            f"{side} {outcome}",
            outcome,
            VALIDATION_EXPECT[(side, outcome)],
            extra={"side": side},
        )
        for side in ("input", "output")
        for outcome in VALIDATION_OUTCOMES
    ]
    for kind in QUOTA_KINDS:
        over, within = QUOTA_ATTEMPTS[kind]
        cells += [
            Cell(
                "memory_quotas",
                "memory_store",
                "supervised_approve",
                f"{kind}: {over}",
                kind,
                _no("quota_exceeded", "memory_service"),
                extra={"over": True},
            ),
            Cell(
                "memory_quotas",
                "memory_store",
                "supervised_approve",
                f"{kind}: {within}",
                kind,
                _ok("memory_service"),
                extra={"over": False},
            ),
        ]
    return cells


# ----------------------------------------------------------- MCP servers and tools (ADR 0053)
# The conformance daemon's MCP agents (one per risk level) use the hostile server `h`
# (tests/mcp/hostile_server.py, mode ok) with tools echo and read (annotated read-only), write
# and env (not), and a second server `h2` whose `env` names another variable. The server's
# own replies say what the kernel let it do ("refused: EACCES").
MCP_AGENTS = {
    "readonly": ("m_ro", None),
    "supervised_approve": ("m_sup", True),
    "supervised_deny": ("m_sup", False),
    "full": ("m_full", None),
}
MCP_NAMED = "ZC_MCP_NAMED"  # named by h's env
MCP_OTHER = "ZC_MCP_OTHER"  # named by h2's env only: in the agent's environment, not h's
# (case, tool, action, {profile: expect}); action is an offline-grammar message template.
MCP_SERVER_CASES: list[tuple[str, str, str, dict[str, Expect]]] = [
    (
        "server writes own workspace",
        "write",
        'mcp h write {{"path": "{ws}/m-made.txt"}}',
        {
            "readonly": _no("mcp_tool_not_allowed", "engine"),
            "supervised_approve": _ok("kernel"),
            "full": _ok("kernel"),
        },
    ),
    (
        "server writes outside the workspace",
        "write",
        'mcp h write {{"path": "{outside}/m-out-{alias}.txt"}}',
        {
            "readonly": _no("mcp_tool_not_allowed", "engine"),
            "supervised_approve": _eacces(),
            "full": _eacces(),
        },
    ),
    (
        "server reads daemon config",
        "read",
        'mcp h read {{"path": "{config}"}}',
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "server reads daemon memory file",
        "read",
        'mcp h read {{"path": "{state}/memory/data.mdb"}}',
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "server reads sibling workspace",
        "read",
        'mcp h read {{"path": "{owner_ws}/shared.txt"}}',
        {p: _eacces() for p in ("readonly", "supervised_approve", "full")},
    ),
    (
        "server environment holds only named variables",
        "env",
        "mcp h env",
        {
            "readonly": _no("mcp_tool_not_allowed", "engine"),
            "supervised_approve": _ok("mcp_host"),
            "full": _ok("mcp_host"),
        },
    ),
]
MCP_TOOL_CASES: list[tuple[str, str, str, dict[str, Expect]]] = [
    (
        "read-only tool",
        "echo",
        'mcp h echo {{"text": "hello"}}',
        {
            "readonly": _ok("engine"),
            "supervised_approve": _ok("engine"),
            "supervised_deny": _ok("engine"),  # asks nobody: no approval to deny
            "full": _ok("engine"),
        },
    ),
    (
        "tool not read-only",
        "write",
        'mcp h write {{"path": "m-asked.txt"}}',
        {
            "readonly": _no("mcp_tool_not_allowed", "engine"),
            "supervised_approve": _ok("engine"),
            "supervised_deny": _no("approval_denied", "engine"),
            "full": _ok("engine"),
        },
    ),
    (
        # allowed and read-only, but its description is over zeroclaw.mcp.MAX_TOOL_SPEC_BYTES:
        # the model would read it at every turn, so it is never offered
        "tool too large to offer",
        "bloat",
        "mcp h bloat",
        {
            p: _no("mcp_schema_too_large", "mcp_host")
            for p in ("readonly", "supervised_approve", "full")
        },
    ),
    (
        "tool outside the config's allowlist",
        "fail",
        "mcp h fail",
        {
            p: _no("mcp_tool_not_allowed", "engine")
            for p in ("readonly", "supervised_approve", "full")
        },
    ),
]


def _mcp_cells() -> list[Cell]:
    return [
        Cell(
            boundary,
            "mcp_server",
            profile,
            case,
            action,
            expect,
            f"mcp__h__{tool}",
            extra={"mcp_case": case},
        )
        for boundary, table in (("mcp_server", MCP_SERVER_CASES), ("mcp_tools", MCP_TOOL_CASES))
        for case, tool, action, by_profile in table
        for profile, expect in by_profile.items()
    ]


# ----------------------------------------------------------- a turn's context (ADR 0059)
# What a turn of each origin is given from memory: the agent's own records, those of a
# namespace it may read (`read_memory_from`), those of one it may not, and the facts a
# compaction of its session keeps. A turn is given what its toolset's memory_recall would
# give it, and keeps the facts its memory_store could have stored.
CONTEXT_CASES = (
    "own records",
    "a granted namespace",
    "an ungranted namespace",
    "facts at compaction",
)
# what a peer, a sender or a schedule's run may be granted
CONTEXT_GRANT = ("memory_recall", "memory_store")


def _context_expect(case: str, given: bool) -> Expect:
    if case == "an ungranted namespace":
        return _no("forbidden", "memory_service") if given else _no("tool_not_granted", "engine")
    if not given:
        return _no("tool_not_granted", "engine")
    return _ok("memory_service" if case == "a granted namespace" else "engine")


def _context_cells() -> list[Cell]:
    from tests.conformance._registries import origin_kinds

    cells = []
    for kind in sorted(origin_kinds()):
        grants: list[tuple[str, ...]] = [()]
        if kind in ("peer", "channel", "schedule", "api"):
            grants.append(CONTEXT_GRANT)
        for grant in grants:
            given = kind == "operator" or bool(grant)
            for case in CONTEXT_CASES:
                cells.append(
                    Cell(
                        "recalled_memory",
                        "context",
                        f"origin_{kind}",
                        f"{case} {'when granted' if grant else 'by default'}",
                        case,
                        _context_expect(case, given),
                        extra={"kind": kind, "grant": grant},
                    )
                )
    return cells


# ----------------------------------------------------------- adapters over HTTP (ADR 0054)
# The HTTP adapter daemon's agents (one per risk level) list `api` (chat.reply, with the
# bearer token of HTTP_ADAPTER_KEY_ENV, at a real service whose reply says whether the token
# came), `tickets` (ticket.create: writes_external), `far` (an endpoint no profile lists: a
# loopback listener nothing accepts, so any connect would sit in its backlog) and the MCP
# server `remote` over streamable HTTP (its tool `echo` through the alias remote.echo).
HTTP_ADAPTER_AGENTS = {
    "readonly": ("h_ro", None),
    "supervised_approve": ("h_sup", True),
    "supervised_deny": ("h_sup", False),
    "full": ("h_full", None),
}
HTTP_ADAPTER_KEY_ENV = "ZC_CONFORMANCE_ADAPTER_KEY"
_LEVELS = ("readonly", "supervised_approve", "full")
# (case, adapter kind, action, {profile: expect}); action "environ": the agents' own report.
HTTP_ADAPTER_CASES: list[tuple[str, str, str, dict[str, Expect]]] = [
    (
        "listed endpoint, capability without side effect",
        "http_adapter",
        "invoke api: hello",
        {
            p: _ok("adapter_service")
            for p in ("readonly", "supervised_approve", "supervised_deny", "full")
        },
    ),
    (
        "endpoint not in the profile",
        "http_adapter",
        "invoke far: hello",
        {p: _no("endpoint_not_allowed", "adapter_service") for p in _LEVELS},
    ),
    (
        "adapter key in the agent's environment",
        "http_adapter",
        "environ",
        {p: _no("not_in_environment", "zygote") for p in _LEVELS},
    ),
    (
        "writes_external capability",
        "http_adapter",
        "invoke tickets: open one",
        {
            "readonly": _no("read_only_profile", "adapter_service"),
            "supervised_approve": _ok("engine"),
            "supervised_deny": _no("approval_denied", "engine"),
            "full": _ok("adapter_service"),
        },
    ),
    (
        "MCP server over HTTP: a tool not annotated read-only",
        "mcp_server",
        'invoke for remote.echo: {{"text": "over http"}}',
        {
            "readonly": _no("mcp_tool_not_allowed", "adapter_service"),
            "supervised_approve": _ok("engine"),
            "supervised_deny": _no("approval_denied", "engine"),
            "full": _ok("adapter_service"),
        },
    ),
    (
        "MCP server over HTTP: endpoint not in the profile",
        "mcp_server",
        'invoke for faraway.echo: {{"text": "x"}}',
        {
            # a readonly agent is refused first: no tool it cannot call is reached for
            "readonly": _no("mcp_tool_not_allowed", "adapter_service"),
            "supervised_approve": _no("endpoint_not_allowed", "adapter_service"),
            "full": _no("endpoint_not_allowed", "adapter_service"),
        },
    ),
]


def _http_adapter_cells() -> list[Cell]:
    return [
        Cell(
            "http_adapters",
            "http_adapter",
            profile,
            case,
            action,
            expect,
            None if action == "environ" else "invoke_adapter",
            extra={"adapter_kind": kind},
        )
        for case, kind, action, by_profile in HTTP_ADAPTER_CASES
        for profile, expect in by_profile.items()
    ]


def all_cells() -> list[Cell]:
    cells = [
        *_context_cells(),
        *_mcp_cells(),
        *_http_adapter_cells(),
        *_discovery_cells(),
        *_origin_cells(),
        *_grammar_cells(),
        *daemon_corpus_cells(),
        *_in_process_cells(),
        *_kernel_cells(),
        *_control_cells(),
        *_router_cells(),
        *_cli_cells(),
        *_channel_cells(),
        *_matrix_cells(),
        *_subagent_cells(),
        *_bounds_quota_cells(),
        *_policy_cells(),
        *_daemon_code_cells(),
        *_listener_cells(),
        *_session_cells(),
        *_confinement_cells(),
    ]
    keys = [c.key for c in cells]
    dupes = {k for k in keys if keys.count(k) > 1}
    assert not dupes, f"cells declared twice: {sorted(dupes)}"
    return cells


def cells_on(path: str) -> list[Cell]:
    return [c for c in all_cells() if c.path == path]
