"""The registration decision: pure functions of the scanned facts and the config.

`judge` decides one item on its own (its rules run in a fixed order, the first that refuses
wins); `decide` adds what needs every item at once: two items with the same kind + id
shadow each other, the stronger source winning (project manifest > config > builtin
template > PATH > user dirs, unless a `prefer_source` pin says otherwise), and every loser
names its winner. Priority is by source, not by validity: a broken project manifest still
shadows the PATH program of the same id, because the operator wrote it on purpose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._model import (
    SOURCE_PRIORITY,
    CapabilityDescriptor,
    Diagnostic,
    DiscoveredItem,
    DiscoveryErrorKind,
    ItemKind,
    RegistrationAction,
    RegistrationDecision,
    RegistrationReason,
    RegistrationTarget,
    SourceKind,
)

TARGETS: dict[ItemKind, RegistrationTarget] = {
    "agent": "subagent_registry",
    "subagent": "subagent_registry",
    "cli_adapter": "adapter_registry",
    "http_adapter": "adapter_registry",
    "mcp_server": "adapter_registry",
    "capability": "adapter_registry",
    "workflow_skill": "adapter_registry",
    "prompt_role": "display_only",
    "runtime_worker": "display_only",
    "local_model": "display_only",
    "serial_device": "display_only",
}

# Why the kinds that never register are shown only (reason, policy, words).
_DISPLAY_ONLY: dict[ItemKind, tuple[RegistrationReason, str, str]] = {
    "prompt_role": (
        "manifest_required",
        "prompts are display-only",
        "a prompt is role text, not a callable capability; an adapter manifest in adapters/ "
        "can make a skill callable",
    ),
    "runtime_worker": (
        "runtime_gate_mismatch",
        "runtime workers are display-only",
        "a runtime worker only runs inside a team/swarm runtime, never as an adapter",
    ),
    "local_model": (
        "manifest_required",
        "model servers are provider candidates",
        "offered as a provider candidate: name it under [providers] to use it; discovery never "
        "edits the config",
    ),
    "serial_device": (
        "manifest_required",
        "serial devices belong to channels",
        "a device is used only by a [channels.serial.*] entry that names it; discovery never "
        "opens or claims it",
    ),
}


@dataclass(frozen=True)
class DecisionPolicy:
    """The part of the config the decisions read."""

    commands: frozenset[str] = frozenset({"codex", "claude", "gemini", "ollama"})
    allow_user_local_skills: bool = False
    allow_unknown_capabilities: bool = False
    runtime_gate: str = "normal"
    capabilities: Mapping[str, CapabilityDescriptor] = field(default_factory=dict)
    prefer_source: Mapping[str, SourceKind] = field(default_factory=dict)  # by id or key
    reserved_ids: frozenset[str] = frozenset()


class _Refusal(Exception):
    def __init__(
        self,
        reason: RegistrationReason,
        policy: str,
        message: str,
        *,
        action: RegistrationAction = "rejected",
        target: RegistrationTarget | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.policy = policy
        self.message = message
        self.action = action
        self.target = target


def judge(item: DiscoveredItem, policy: DecisionPolicy) -> RegistrationDecision:
    """The decision for `item` alone (shadowing is `decide`'s)."""
    target = TARGETS[item.kind]
    try:
        _check_manifest(item)
        _check_kind(item, policy)
    except _Refusal as refusal:
        note = Diagnostic("info", _diagnostic_kind(refusal.reason), refusal.message)
        return RegistrationDecision(
            key=item.key,
            target=refusal.target or target,
            action=refusal.action,
            reason=refusal.reason,
            policy=refusal.policy,
            diagnostics=(note, *item.diagnostics),
        )
    degraded = item.health.status == "degraded"
    return RegistrationDecision(
        key=item.key,
        target=target,
        action="degraded" if degraded else "registered",
        reason="registered",
        policy=_registered_by(item),
        diagnostics=item.diagnostics,
    )


def decide(
    items: Iterable[DiscoveredItem], policy: DecisionPolicy
) -> list[tuple[DiscoveredItem, RegistrationDecision]]:
    """Every item with its decision, in the order given. Capabilities are decided first:
    the ones registered join `policy.capabilities` as the registry the others are checked
    against."""
    listed = list(items)
    winners: dict[str, int] = {}
    for index, item in enumerate(listed):
        best = winners.get(item.key)
        if best is None or _rank(item, index, policy) < _rank(listed[best], best, policy):
            winners[item.key] = index
    judged: dict[int, RegistrationDecision] = {}
    registry = dict(policy.capabilities)
    for index in winners.values():
        item = listed[index]
        if item.kind == "capability":
            judged[index] = decision = judge(item, policy)
            if decision.registered and item.descriptor is not None:
                registry[item.id] = item.descriptor
    with_registry = dataclasses.replace(policy, capabilities=registry)
    decided = []
    for index, item in enumerate(listed):
        winner = listed[winners[item.key]]
        if winners[item.key] == index:
            decision = judged.get(index) or judge(item, with_registry)
            decided.append((item, decision))
            continue
        decided.append((item, _shadowed(item, winner)))
    return decided


def _shadowed(item: DiscoveredItem, winner: DiscoveredItem) -> RegistrationDecision:
    by = f"{winner.key} from {winner.source.display or winner.source.name}"
    note = Diagnostic(
        "info", "duplicate_id", f"{item.key} is also found in a stronger source: {by}"
    )
    return RegistrationDecision(
        key=item.key,
        target=TARGETS[item.kind],
        action="shadowed",
        reason="duplicate_id_shadowed",
        policy="source priority: project manifest > config > builtin template > PATH > user dirs",
        shadowed_by=by,
        diagnostics=(note, *item.diagnostics),
    )


def _rank(item: DiscoveredItem, index: int, policy: DecisionPolicy) -> tuple[int, int, int]:
    preferred = policy.prefer_source.get(item.key, policy.prefer_source.get(item.id))
    pinned = 0 if preferred is not None and preferred == item.source.kind else 1
    return (pinned, SOURCE_PRIORITY[item.source.kind], index)


# --- the rules, in the order they apply ------------------------------------------------------


def _check_manifest(item: DiscoveredItem) -> None:
    if item.errors("path_not_allowed"):
        raise _Refusal(
            "path_not_allowed",
            "paths stay inside their source's root",
            "a path in it leaves the directory it was found in (after resolving symlinks)",
        )
    if item.errors("secret_redacted"):
        raise _Refusal(
            "policy_denied",
            "secrets only by environment variable",
            "an argument or its endpoint held a secret (redacted, see below)",
        )
    if item.errors("policy_denied"):
        raise _Refusal(
            "policy_denied", "discovery policy", "a policy refuses it (see the diagnostics)"
        )
    if (
        item.errors("schema_invalid")
        or item.errors("invalid_yaml")
        or item.health.status == "invalid_manifest"
    ):
        raise _Refusal(
            "schema_invalid", "manifests must validate", "its manifest is invalid (see below)"
        )
    if not item.enabled:
        raise _Refusal(
            "disabled_by_manifest",
            "enabled = false",
            "its manifest disables it",
            action="disabled",
        )
    if item.trust == "unknown":
        raise _Refusal(
            "trust_level_unknown",
            "unknown trust is display-only",
            "where it came from cannot be trusted, so it is only shown",
            target="display_only",
        )


def _check_kind(item: DiscoveredItem, policy: DecisionPolicy) -> None:
    if item.kind in _DISPLAY_ONLY:
        reason, rule, message = _DISPLAY_ONLY[item.kind]
        raise _Refusal(reason, rule, message)
    if item.kind == "subagent" and item.id in policy.reserved_ids:
        raise _Refusal(
            "policy_denied",
            "reserved ids",
            f"{item.id!r} is reserved (an agent alias or a name the daemon uses)",
        )
    if item.kind == "cli_adapter":
        _check_command(item, policy)
    if item.kind == "http_adapter" and item.source.kind not in ("project_manifest", "config"):
        raise _Refusal(
            "manifest_required",
            "HTTP adapters need an explicit manifest",
            "a remote service is used only through a manifest in adapters/",
        )
    if item.kind == "mcp_server" and item.source.kind == "user_dir":
        raise _Refusal(
            "policy_denied",
            "MCP servers in user directories are never started",
            "copy its manifest into mcp/ beside the config to use it",
            target="display_only",
        )
    if item.kind == "workflow_skill":
        _check_skill(item, policy)
    if item.kind == "capability":
        _check_capability(item)
    if item.kind in ("cli_adapter", "http_adapter", "mcp_server", "workflow_skill"):
        _check_health(item)
        _check_capabilities(item, policy)


def _check_command(item: DiscoveredItem, policy: DecisionPolicy) -> None:
    name = item.program or item.id
    if name not in policy.commands:
        raise _Refusal(
            "command_not_allowed",
            "[discovery] commands",
            f"{name!r} is not in [discovery] commands",
        )
    if item.pinned:
        return
    trusted = [c for c in item.candidates if not c.workspace_local]
    if item.candidates and not trusted:
        raise _Refusal(
            "path_not_allowed",
            "workspace-local programs need a pin",
            "the only candidate is inside a workspace: pin it with "
            f"[discovery.overrides.{name}] command_path to use it",
        )
    if len({c.canonical for c in trusted}) > 1:
        where = ", ".join(c.display for c in trusted)
        raise _Refusal(
            "command_ambiguous",
            "one program per command",
            f"{name!r} is found in more than one place ({where}): pin one with "
            f"[discovery.overrides.{name}] command_path",
        )


def _check_skill(item: DiscoveredItem, policy: DecisionPolicy) -> None:
    if item.trust == "user_local" and not policy.allow_user_local_skills:
        raise _Refusal(
            "policy_denied",
            "allow_user_local_skills = false",
            "skills in user directories are shown only; set [discovery] "
            "allow_user_local_skills = true to register them",
            target="display_only",
        )
    if item.classified_by not in ("manifest", "front_matter"):
        raise _Refusal(
            "manifest_required",
            "only declared skills register",
            "its kind was guessed, not declared: add front matter or an adapter manifest",
            target="display_only",
        )
    if item.runtime_gate and item.runtime_gate != policy.runtime_gate:
        raise _Refusal(
            "runtime_gate_mismatch",
            "runtime gate",
            f"it needs runtime {item.runtime_gate!r}, this daemon runs {policy.runtime_gate!r}",
            target="display_only",
        )
    if not (item.input_schema and item.output_schema):
        missing = " and ".join(
            name
            for name, present in (("input", item.input_schema), ("output", item.output_schema))
            if not present
        )
        raise _Refusal(
            "capability_missing_schema",
            "callable skills have schemas",
            f"it has no {missing} schema",
        )


def _check_capability(item: DiscoveredItem) -> None:
    descriptor = item.descriptor
    if descriptor is None:
        raise _Refusal("schema_invalid", "manifests must validate", "it describes no capability")
    if descriptor.writes and not descriptor.audit:
        raise _Refusal(
            "schema_invalid",
            "writing capabilities are audited",
            f"side effect {descriptor.side_effect!r} needs `audit` fields",
        )


def _check_health(item: DiscoveredItem) -> None:
    status = item.health.status
    if status == "permission_denied":
        raise _Refusal(
            "health_permission_denied",
            "health check",
            item.health.message or "it could not be run: permission denied",
        )
    if status == "unavailable":
        raise _Refusal(
            "health_unavailable", "health check", item.health.message or "its probe failed"
        )


def _check_capabilities(item: DiscoveredItem, policy: DecisionPolicy) -> None:
    if not item.capabilities:
        raise _Refusal(
            "capability_unknown",
            "adapters declare capabilities",
            "it declares no capability, so nothing could route to it",
        )
    allow_unknown = item.allow_unknown_capability and policy.allow_unknown_capabilities
    unknown = [c for c in item.capabilities if c not in policy.capabilities]
    if unknown and not allow_unknown:
        raise _Refusal(
            "capability_unknown",
            "capabilities come from the registry",
            f"unknown capabilit{'y' if len(unknown) == 1 else 'ies'}: {', '.join(unknown)} "
            "(add it to capabilities/)",
        )


def _registered_by(item: DiscoveredItem) -> str:
    if item.kind == "agent":
        return "configured in [agents]"
    if item.kind == "subagent":
        return "loaded by the sub-agent registry"
    if item.source.kind == "path":
        return "allowlisted in [discovery] commands, one program on $PATH, probe passed"
    if item.source.kind == "builtin_template":
        return "builtin capability registry"
    return f"its {item.source.kind.replace('_', ' ')} passed every check"


def _diagnostic_kind(reason: RegistrationReason) -> DiscoveryErrorKind:
    return _REASON_KINDS.get(reason, "policy_denied")


_REASON_KINDS: dict[RegistrationReason, DiscoveryErrorKind] = {
    "schema_invalid": "schema_invalid",
    "path_not_allowed": "path_not_allowed",
    "capability_unknown": "capability_unknown",
    "health_unavailable": "health_check_failed",
    "health_permission_denied": "permission_denied",
    "command_ambiguous": "command_ambiguous",
    "duplicate_id_shadowed": "duplicate_id",
}
