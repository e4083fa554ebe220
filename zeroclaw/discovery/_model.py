"""What discovery finds and what it decides, as data: the found item, its health and
diagnostics, and the registration decision with its reason.

Every closed set is a `Literal` (the README's error table and mypy see them); every struct is
a msgspec struct, so the same value is printed by `--json`, kept in the cache and carried
by events. Found is not registered, registered is not authorised, authorised is not
executed: this module only describes the first two.
"""

from __future__ import annotations

from typing import Literal

import msgspec

SCHEMA_VERSION = 1  # of `discover ... --json` and of the cache file

ItemKind = Literal[
    "agent",  # a configured [agents.<alias>]
    "subagent",  # a sub-agent bundle
    "cli_adapter",  # a local program (adapters/*.yaml transport cli, or the PATH allowlist)
    "http_adapter",  # adapters/*.yaml transport http
    "mcp_server",  # an MCP manifest
    "capability",  # capabilities/*.yaml
    "prompt_role",  # a user prompt file
    "workflow_skill",  # a skill that can run as a workflow
    "runtime_worker",  # a skill only a team/swarm runtime uses
    "local_model",  # a model server answering on loopback
    "serial_device",  # a serial port this machine has
]

SourceKind = Literal[
    "project_manifest",  # adapters/, capabilities/, mcp/, subagents/ beside the config
    "config",  # the TOML: agents, provider URLs, serial channels, pins
    "builtin_template",  # the probe specs zeroclaw ships for the PATH allowlist
    "path",  # a program found on $PATH
    "user_dir",  # ~/.codex, ~/.agents, user MCP configs
    "system",  # what the kernel or a loopback probe reports (ports, model servers)
]

# Who wins when two sources find the same kind + id: lower is stronger.
SOURCE_PRIORITY: dict[SourceKind, int] = {
    "project_manifest": 0,
    "config": 1,
    "builtin_template": 2,
    "path": 3,
    "user_dir": 4,
    "system": 5,
}

TrustLevel = Literal["project", "user_local", "system_path", "explicit_remote", "unknown"]

HealthStatus = Literal[
    "not_checked", "available", "degraded", "unavailable", "permission_denied", "invalid_manifest"
]

SideEffect = Literal[
    "none", "read_only_external", "writes_workspace", "writes_external", "shell_or_process"
]

RegistrationTarget = Literal["subagent_registry", "adapter_registry", "display_only"]
RegistrationAction = Literal["registered", "rejected", "disabled", "shadowed", "degraded"]
RegistrationReason = Literal[
    "registered",
    "disabled_by_manifest",
    "schema_invalid",
    "policy_denied",
    "health_unavailable",
    "health_permission_denied",
    "capability_unknown",
    "capability_missing_schema",
    "runtime_gate_mismatch",
    "trust_level_unknown",
    "duplicate_id_shadowed",
    "path_not_allowed",
    "command_not_allowed",
    "command_ambiguous",
    "manifest_required",
]

# What went wrong while finding or checking something (a diagnostic's `kind`).
DiscoveryErrorKind = Literal[
    "io",
    "invalid_yaml",
    "schema_invalid",
    "path_not_allowed",
    "command_not_found",
    "command_timeout",
    "permission_denied",
    "duplicate_id",
    "unsupported_kind",
    "timeout",
    "cache_corrupt",
    "cache_locked",
    "policy_denied",
    "capability_unknown",
    "health_check_failed",
    "output_too_large",
    "command_ambiguous",
    "secret_redacted",
]

SkillClass = Literal["prompt_role", "workflow_skill", "runtime_worker"]
# How a skill's class was decided, strongest first; only the first two may register.
ClassifiedBy = Literal["manifest", "front_matter", "trusted_dir", "heuristic"]

DeviceState = Literal["observed", "matched", "authorized"]


class Diagnostic(msgspec.Struct, frozen=True, omit_defaults=True):
    """One thing an operator should know about an item; schema errors say where and what."""

    level: Literal["error", "warning", "info"]
    kind: DiscoveryErrorKind
    message: str
    source: str = ""  # display path of the file (or the source name)
    pointer: str = ""  # JSON pointer inside the manifest
    expected: str = ""
    actual: str = ""  # a short summary, never the value of a secret


class Health(msgspec.Struct, frozen=True):
    status: HealthStatus = "not_checked"
    checked_at: float | None = None
    version: str = ""
    message: str = ""


class Source(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where an item came from: canonical path for checks, display path for people."""

    kind: SourceKind
    name: str  # the scanner: "adapters", "path", "codex_skills", ...
    path: str = ""
    display: str = ""


class CommandCandidate(msgspec.Struct, frozen=True, omit_defaults=True):
    """One place a command name resolves to, in $PATH order."""

    display: str  # as found on $PATH
    canonical: str  # symlinks resolved
    workspace_local: bool = False  # inside the project or an agent workspace


class CapabilityDescriptor(msgspec.Struct, frozen=True, omit_defaults=True):
    """One entry of the capability registry (`capabilities/*.yaml`)."""

    name: str
    side_effect: SideEffect
    description: str = ""
    input_schema: str = ""  # reference to a schema file, empty when missing
    output_schema: str = ""
    default_timeout_ms: int = 30_000
    allow_auto_route: bool = False
    audit: tuple[str, ...] = ()  # audit fields a writing capability records

    @property
    def writes(self) -> bool:
        return self.side_effect in ("writes_workspace", "writes_external", "shell_or_process")

    @property
    def auto_routable(self) -> bool:
        """Only side-effect-free capabilities are ever routed without being named."""
        return self.allow_auto_route and self.side_effect in ("none", "read_only_external")


class McpToolInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """One tool an MCP server listed to a metadata probe: its schema as the server gave it
    (bounded by the probe's output cap) and its pin digest (`zeroclaw.turns.tool_digest`)."""

    name: str
    digest: str
    description: str = ""  # its first 200 characters
    input_schema: dict[str, object] = {}
    read_only: bool = False  # the server's readOnlyHint
    allowed: bool = False  # named by the manifest's tools allowlist


class McpMetadata(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a metadata probe of an explicit stdio MCP manifest learnt (`initialize`,
    `tools/list`, `resources/list`, `prompts/list`). `tools_hash` covers every tool's
    digest: when it changes, a cached scan of this server is stale."""

    server: str = ""  # serverInfo.name and version, as the server says
    protocol: str = ""
    tools: tuple[McpToolInfo, ...] = ()
    resources: tuple[str, ...] = ()  # resource URIs (names when a URI is missing)
    prompts: tuple[str, ...] = ()
    tools_hash: str = ""


class DiscoveredItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Something a scanner found, normalised: facts only, no decision."""

    kind: ItemKind
    id: str
    source: Source
    trust: TrustLevel
    health: Health = Health()
    name: str = ""
    enabled: bool = True
    required: bool = False  # the daemon is `degraded` while a required item is not registered
    capabilities: tuple[str, ...] = ()
    allow_unknown_capability: bool = False
    program: str = ""  # the command name an adapter runs (checked against the allowlist)
    command: str = ""  # canonical path of that program, once it is unambiguous
    args: tuple[str, ...] = ()
    timeout_ms: int = 0  # an adapter call's bound; 0: its capability's default_timeout_ms
    max_output_bytes: int = 0  # an adapter call's output cap; 0: 64 KiB
    candidates: tuple[CommandCandidate, ...] = ()
    pinned: bool = False  # `command_path` pinned in [discovery.overrides]
    endpoint: str = ""  # an HTTP adapter's or model server's URL (never with credentials)
    endpoint_env: str = ""  # an HTTP adapter's: the variable that holds its URL instead
    api_key_env: str = ""  # an HTTP adapter's: the variable whose value is its bearer token
    env: tuple[str, ...] = ()  # environment variable NAMES it needs, never values
    skill_class: SkillClass | None = None
    classified_by: ClassifiedBy | None = None
    runtime_gate: str = ""
    input_schema: bool = False
    output_schema: bool = False
    device_state: DeviceState | None = None
    callers: tuple[str, ...] = ()  # a sub-agent's allowedCallers
    effects: str = ""  # a sub-agent's declared effects
    descriptor: CapabilityDescriptor | None = None  # kind "capability" only
    allowlists: dict[str, tuple[str, ...]] = {}  # an MCP server's tools/resources/prompts
    mcp: McpMetadata | None = None  # an explicit stdio MCP manifest's metadata probe
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def key(self) -> str:
        """The stable id: kind + id. Two items with one key shadow each other."""
        return f"{self.kind}:{self.id}"

    def errors(self, kind: DiscoveryErrorKind) -> bool:
        return any(d.level == "error" and d.kind == kind for d in self.diagnostics)


class RegistrationDecision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What discovery did with one item, and why, in words an operator can act on."""

    key: str
    target: RegistrationTarget
    action: RegistrationAction
    reason: RegistrationReason
    policy: str  # the rule (or config key) that decided
    shadowed_by: str = ""  # the winner's key and source, for shadowed items
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def registered(self) -> bool:
        return self.action in ("registered", "degraded") and self.target != "display_only"


class Summary(msgspec.Struct, frozen=True):
    """Each decision counted once: shadowed, else display-only, else registered or rejected."""

    found: int
    registered: int
    rejected: int
    display_only: int
    shadowed: int


def summarise(decisions: list[RegistrationDecision]) -> Summary:
    shadowed = [d for d in decisions if d.action == "shadowed"]
    rest = [d for d in decisions if d.action != "shadowed"]
    display = [d for d in rest if d.target == "display_only"]
    registered = [d for d in rest if d.registered]
    return Summary(
        found=len(decisions),
        registered=len(registered),
        rejected=len(rest) - len(display) - len(registered),
        display_only=len(display),
        shadowed=len(shadowed),
    )
