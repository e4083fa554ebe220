"""Each package's public surface, pinned (in trio's style), and the shape of the house: no
import cycles between packages, no production import of another package's private module.

To change a surface on purpose, edit its list in PUBLIC (kept sorted).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import zeroclaw

PACKAGE = Path(zeroclaw.__file__).resolve().parent

PUBLIC: dict[str, list[str]] = {
    "zeroclaw": [
        "__version__",
    ],
    "zeroclaw.agent": [
        "AgentSpec",
        "Busy",
        "Fatal",
        "Keys",
        "LinkMessage",
        "LinkSender",
        "LocalReach",
        "MAX_LINK_FRAME",
        "Neighbours",
        "Ping",
        "Pong",
        "ProbeCommand",
        "ProbeResult",
        "RiskSpec",
        "RuntimeSpec",
        "SubagentRuntime",
        "TurnEngine",
        "agent_main",
        "decode_link",
        "encode_link",
        "say_fatal",
        "serve_agent",
    ],
    "zeroclaw.bus": [
        "Ack",
        "AgentBus",
        "AgentKeys",
        "BusCredentials",
        "DAEMON_SENDER",
        "Deliver",
        "Heartbeat",
        "Hello",
        "MAX_DELEGATION_DEPTH",
        "MESSAGE_KINDS",
        "Message",
        "MessageKind",
        "NoHooks",
        "Origin",
        "OriginRule",
        "Outcome",
        "PROTOCOL_VERSION",
        "PeerAnswer",
        "PeerPolicy",
        "PeerQuestion",
        "QUESTION_KINDS",
        "REFUSAL_CODES",
        "Refusal",
        "RefusalCode",
        "Request",
        "Response",
        "RouteDecision",
        "Router",
        "RouterCore",
        "RouterHooks",
        "Send",
        "ServiceHandler",
        "SocketOwner",
        "WireError",
        "decode_from_agent",
        "decode_from_router",
        "encode",
    ],
    "zeroclaw.channels": [
        "APPROVAL_TIMEOUT_SECS",
        "AdapterRecord",
        "AdapterState",
        "AskApproval",
        "ChannelAdapter",
        "ChannelAnswer",
        "ChannelFailure",
        "ChannelFailureCode",
        "ChannelHost",
        "ChannelRefusalCode",
        "ChannelRefused",
        "ChannelStartFailed",
        "ChannelSupervisor",
        "Dropped",
        "Inbound",
        "LineFramer",
        "MAX_LINE_BYTES",
        "Outcome",
        "REPLAY_WINDOW_SECS",
        "Routed",
        "SIGNATURE_HEADER",
        "SerialAdapter",
        "TIMESTAMP_HEADER",
        "WebhookAdapter",
        "WebhookErrorCode",
        "approval_answer",
        "approval_prompt",
        "channel_adapters",
        "channel_settings",
        "encode_lines",
        "outcome_lines",
        "retry_delay",
        "route_inbound",
        "sign",
        "webhook_listeners",
    ],
    "zeroclaw.cli": [
        "CliErrorCode",
        "cli",
        "main",
    ],
    "zeroclaw.config": [
        "ALIAS_SYNTAX",
        "AgentConfig",
        "AnthropicProvider",
        "ChannelConfig",
        "ChannelPeers",
        "CliChannel",
        "Config",
        "ConfigError",
        "ConfigIssue",
        "DaemonConfig",
        "DaemonPaths",
        "EffectiveRiskPolicy",
        "ExternalPeerRule",
        "OfflineProvider",
        "OpenAIProvider",
        "PeerGroup",
        "ProviderConfig",
        "RESERVED_ALIASES",
        "RestartPolicy",
        "RiskProfile",
        "RuntimeProfile",
        "SYSTEM_CONFIG",
        "SerialChannel",
        "SubagentsConfig",
        "WebhookChannel",
        "all_channel_peers",
        "channel_matches",
        "channel_owners",
        "channel_peers",
        "config_candidates",
        "daemon_paths",
        "daemon_refusals",
        "default_owner",
        "did_you_mean",
        "dotted",
        "effective_risk_policy",
        "load_config",
        "load_config_text",
        "locate_config",
        "normalize_peer_name",
        "runtime_dir_hint",
        "starter_document",
        "subagents_dir",
        "user_config_path",
        "validate_document",
        "workspace_path",
    ],
    "zeroclaw.control": [
        "AgentRestart",
        "AgentStart",
        "AgentStatus",
        "AgentStop",
        "AgentsList",
        "AgentsReply",
        "AnyRequest",
        "CONTROL_ERROR_CODES",
        "ChannelStatus",
        "Chat",
        "ChatApproval",
        "ChatCancel",
        "ChatOpen",
        "ChatOpened",
        "CommandHandler",
        "CommandTable",
        "ControlClient",
        "ControlErrorCode",
        "ControlSession",
        "ControlStats",
        "CoreRequest",
        "DaemonStatus",
        "DaemonUnreachable",
        "DecodeFailure",
        "Dispatch",
        "DispatchRefusal",
        "DispatchReply",
        "EventBodyInfo",
        "EventsRecent",
        "EventsReply",
        "Exchange",
        "FrameDecoder",
        "FrameTooLarge",
        "IncompleteCommandTable",
        "InvocationCancel",
        "InvocationEventInfo",
        "InvocationEvents",
        "InvocationEventsReply",
        "InvocationInfo",
        "InvocationReply",
        "InvocationShow",
        "InvocationStateName",
        "InvocationsList",
        "InvocationsReply",
        "MAX_CONTROL_FRAME",
        "MEMORY_REPLY_TYPES",
        "McpInfo",
        "MemoryCommand",
        "MemoryForgotten",
        "MemoryFound",
        "MemoryHit",
        "MemoryHits",
        "MemoryPurged",
        "MemoryRecord",
        "MemoryRecords",
        "MemoryReply",
        "MemoryStats",
        "MemoryStored",
        "NamespaceCounts",
        "PROTOCOL_VERSION",
        "PolicyInfo",
        "ProbeReply",
        "REQUEST_TYPES",
        "RefusedBundle",
        "Reload",
        "ReloadOutcome",
        "ReloadReply",
        "ReloadStatus",
        "Reply",
        "Request",
        "RevisionInfo",
        "RevisionsReply",
        "RouteProbe",
        "SUBAGENT_REQUEST_TYPES",
        "Shutdown",
        "ShutdownReply",
        "StateEnteredInfo",
        "Status",
        "StatusReply",
        "SubagentDetail",
        "SubagentRequest",
        "SubagentRevisions",
        "SubagentShow",
        "SubagentSummary",
        "SubagentsList",
        "SubagentsReply",
        "TextDeltaInfo",
        "ToolCalledInfo",
        "UntrustedDaemon",
        "control_address",
        "control_code",
        "decode_reply",
        "decode_request",
        "encode",
        "encode_frame",
        "error_reply",
        "is_listening",
        "printable",
        "receive_frames",
        "trusted_uids",
    ],
    "zeroclaw.events": [
        "AgentTransition",
        "Event",
        "EventSink",
        "MemoryOperation",
        "Published",
        "ReloadApplied",
        "RouteRefused",
        "Subscription",
    ],
    "zeroclaw.memory": [
        "AppendTurnArgs",
        "AppendTurnsArgs",
        "CORE_CATEGORIES",
        "ExportArgs",
        "ForgetArgs",
        "GetArgs",
        "ListArgs",
        "MAX_LIMIT",
        "MEMORY_ERROR_CODES",
        "MEMORY_OPS",
        "MemoryArgs",
        "MemoryControlCommand",
        "MemoryErrorCode",
        "MemoryInputError",
        "MemoryLock",
        "MemoryLocked",
        "MemoryOp",
        "MemoryService",
        "MemoryServiceError",
        "MemoryStore",
        "OperatorScope",
        "PurgeArgs",
        "RecallArgs",
        "RecallHit",
        "Record",
        "Scope",
        "ScopeError",
        "SessionArgs",
        "StatsArgs",
        "StoreArgs",
        "StoreCorrupt",
        "Turn",
        "TurnArg",
        "WriteOp",
        "decode_args",
        "memory_grants",
        "new_id",
        "operator_request",
        "tokenize",
    ],
    "zeroclaw.ops": [
    ],
    "zeroclaw.policy": [
        "Access",
        "CommandDecision",
        "Grant",
        "GrantMode",
        "INTERPRETERS",
        "NOT_EXECUTABLE",
        "PathCheck",
        "PathDecision",
        "PathRules",
        "Risk",
        "SYSTEM_READ_ONLY",
        "SandboxPlan",
        "SandboxUnavailable",
        "abi_version",
        "apply_sandbox",
        "build_ruleset",
        "check_path",
        "command_executables",
        "decide",
        "decide_command",
        "enforce_ruleset",
        "parse",
        "plan_command_sandbox",
        "plan_for",
        "plan_readonly",
        "resolve_request",
        "rules_for",
        "sandbox_summary",
    ],
    "zeroclaw.providers": [
        "AnthropicSpec",
        "Conversation",
        "GRAMMAR_HELP",
        "GRAMMAR_TOOLS",
        "HistoryTurn",
        "OfflineProvider",
        "OfflineSpec",
        "OnDelta",
        "OpenAISpec",
        "Provider",
        "ProviderError",
        "ProviderSpec",
        "Round",
        "Step",
        "ToolCall",
        "ToolOutcome",
        "ToolSpec",
        "first_step",
        "grammar_help",
        "make_provider",
        "memory_key",
        "parse",
        "reply",
    ],
    "zeroclaw.subagents": [
        "Admission",
        "Admitted",
        "Bundle",
        "BundleProblems",
        "CLI_CALLER",
        "DispatchRefusalCode",
        "DispatchRequest",
        "DispatchService",
        "DuplicateInvocation",
        "EventBody",
        "Existing",
        "IllegalTransition",
        "Invocation",
        "InvocationErrorCode",
        "InvocationEvent",
        "InvocationKeys",
        "LoadedRevision",
        "MAX_BUNDLE_BYTES",
        "MAX_FILE_BYTES",
        "Manifest",
        "McpBinding",
        "Policy",
        "RESERVED_IDS",
        "RESTART_INTERRUPT",
        "Recovery",
        "Refused",
        "RevisionRecord",
        "RuntimeHost",
        "SCHEMA_VERSION",
        "SnapshotDamaged",
        "StateEntered",
        "SubagentRegistry",
        "SubagentStore",
        "SubagentStoreCorrupt",
        "SubagentStoreError",
        "SubagentStoreFull",
        "SubagentStoreLocked",
        "SubagentsApi",
        "TextDelta",
        "ToolCalled",
        "UnknownInvocation",
        "Verdict",
        "WORKFLOW_CALLER",
        "admit",
        "advance",
        "digest_of",
        "front_matter",
        "load_bundle",
        "load_snapshot",
        "materialise",
        "recovery_plan",
        "register_subagent_commands",
        "retry_of",
        "runtime_identity",
        "scan_bundles",
        "subagent_handlers",
        "verdict",
    ],
    "zeroclaw.supervisor": [
        "DaemonError",
        "ExitStatus",
        "InvalidTransition",
        "Lifecycle",
        "State",
        "Transition",
        "agent_environment",
        "build_specs",
        "diff_specs",
        "run_daemon",
    ],
    "zeroclaw.tools": [
        "AGENT_CATALOG",
        "AGENT_DISPATCH",
        "ActionBudget",
        "Approver",
        "BadArguments",
        "DEFAULT_TOOLSET",
        "DISPATCH_TOOL_NAMES",
        "ERROR_CODES",
        "MAX_SKILL_READ_BYTES",
        "Reach",
        "SKILL_READ",
        "SKILL_READ_SPEC",
        "SNAPSHOT_ERROR_CODES",
        "SUBMIT_RESULT",
        "ShellDecision",
        "ShellSettings",
        "ShellVerdict",
        "SnapshotErrorCode",
        "SnapshotResult",
        "Tool",
        "ToolContext",
        "ToolErrorCode",
        "ToolResult",
        "Toolset",
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
        "render_catalog",
        "run_shell",
        "schema_summary",
        "shell_environment",
        "skill_read",
        "submit_result",
        "submit_spec",
        "wraps_result",
    ],
    "zeroclaw.turns": [
        "AgentDown",
        "AgentTurnEvent",
        "ApprovalAnswer",
        "ApprovalAsked",
        "ApprovalQuestion",
        "CatalogAnswer",
        "CatalogCall",
        "CatalogEntry",
        "Delta",
        "DispatchAnswer",
        "DispatchCall",
        "InvocationState",
        "SUBAGENT_SERVICE",
        "ServiceEvent",
        "TERMINAL_STATES",
        "TURN_SERVICE",
        "ToolCallRecord",
        "ToolUsed",
        "Turn",
        "TurnCancel",
        "TurnCancelled",
        "TurnDone",
        "TurnEvent",
        "TurnEventPost",
        "TurnInput",
        "TurnOutcome",
        "TurnOverflow",
        "TurnRefused",
        "TurnService",
        "result_json",
    ],
}

# Production imports of another package's private module that their owners still have to
# switch to the public name (shown after "->"). Remove an entry once it is gone: the test
# fails on a stale entry as on a new import.
KNOWN_PRIVATE_IMPORTS: dict[tuple[str, str], str] = {}


def packages() -> list[str]:
    found = pkgutil.iter_modules(zeroclaw.__path__)
    return ["zeroclaw", *sorted(f"zeroclaw.{p.name}" for p in found if p.ispkg)]


def test_every_package_is_pinned() -> None:
    assert packages() == sorted(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_surface_is_pinned(name: str) -> None:
    exported = importlib.import_module(name).__all__
    assert len(set(exported)) == len(exported), "a name is listed twice"
    assert sorted(exported) == PUBLIC[name]


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_resolves(name: str) -> None:
    module = importlib.import_module(name)
    missing = [attr for attr in module.__all__ if not hasattr(module, attr)]
    assert not missing


def _imports() -> list[tuple[str, str]]:
    """(importing file relative to the package, imported zeroclaw module) for every import
    in the package, lazy ones inside functions included."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        parts = ["zeroclaw", *Path(rel).with_suffix("").parts]
        here = parts[:-1]  # the package a relative import starts from
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out += [(rel, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                out.append((rel, target))
                if node.module is None:  # `from .. import x`: x may be a module
                    out += [(rel, f"{target}.{alias.name}") for alias in node.names]
    return [(rel, target) for rel, target in out if target.startswith("zeroclaw.")]


def _unit(module: str) -> str:
    """The package (or top-level module) a module belongs to: zeroclaw.bus._wire -> bus."""
    return module.split(".")[1]


def test_no_import_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for rel, target in _imports():
        source, dest = _unit("zeroclaw." + rel.removesuffix(".py").replace("/", ".")), _unit(target)
        if source != dest:
            graph[source].add(dest)
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            pytest.fail("import cycle between packages: " + " -> ".join(cycle))


def test_no_production_import_of_another_packages_private_module() -> None:
    found = set()
    for rel, target in _imports():
        parts = target.split(".")
        own = rel.split("/")[0] if "/" in rel else None
        # zeroclaw._x modules are neutral; zeroclaw.<pkg>._x is <pkg>'s own business.
        if len(parts) >= 3 and parts[2].startswith("_") and parts[1] != own:
            found.add((rel, target))
    assert found == set(KNOWN_PRIVATE_IMPORTS), (
        "new: "
        + repr(sorted(found - set(KNOWN_PRIVATE_IMPORTS)))
        + "; fixed, drop from KNOWN_PRIVATE_IMPORTS: "
        + repr(sorted(set(KNOWN_PRIVATE_IMPORTS) - found))
    )


def test_an_agent_process_loads_neither_control_nor_memory() -> None:
    """What the zygote imports is in every agent's memory: the control client, the memory
    store (LMDB) and the error-code registry stay out."""
    code = (
        "import sys, zeroclaw.agent, zeroclaw.supervisor._zygote\n"
        "heavy = ('zeroclaw.control', 'zeroclaw.memory', 'lmdb', 'zeroclaw._error_codes')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or "
        "'.'.join(m.split('.')[:2]) in heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
