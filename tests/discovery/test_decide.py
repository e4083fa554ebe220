"""The registration decision, rule by rule and as properties over generated items."""

from __future__ import annotations

import typing
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.discovery import (
    SOURCE_PRIORITY,
    TARGETS,
    CapabilityDescriptor,
    CommandCandidate,
    DecisionPolicy,
    Diagnostic,
    DiscoveredItem,
    Health,
    ItemKind,
    RegistrationReason,
    Source,
    SourceKind,
    TrustLevel,
    decide,
    judge,
    summarise,
)

CAPS = {
    "code.review": CapabilityDescriptor("code.review", "none", input_schema="i", output_schema="o"),
    "repo.analyze": CapabilityDescriptor("repo.analyze", "read_only_external"),
}
POLICY = DecisionPolicy(capabilities=CAPS, reserved_ids=frozenset({"alpha", "main"}))

PROJECT = Source("project_manifest", "adapters", "/p/adapters/x.yaml", "adapters/x.yaml")
ON_PATH = Source("path", "path", "/usr/bin/codex", "/usr/bin/codex")
USER = Source("user_dir", "codex_skills", "/home/u/.codex/skills/s/SKILL.md", "~/.codex/...")


def item(kind: ItemKind = "cli_adapter", id: str = "codex", **fields: Any) -> DiscoveredItem:
    defaults: dict[str, Any] = {
        "source": PROJECT,
        "trust": "project",
        "capabilities": ("code.review",),
        "health": Health("available"),
    }
    return DiscoveredItem(kind=kind, id=id, **{**defaults, **fields})


def reason_of(it: DiscoveredItem, policy: DecisionPolicy = POLICY) -> RegistrationReason:
    return judge(it, policy).reason


def test_a_valid_adapter_manifest_registers_to_the_adapter_registry() -> None:
    decision = judge(item(), POLICY)
    assert (decision.target, decision.action, decision.reason) == (
        "adapter_registry",
        "registered",
        "registered",
    )
    assert decision.registered


def test_a_configured_agent_and_a_bundle_register_to_the_subagent_registry() -> None:
    for kind in ("agent", "subagent"):
        decision = judge(item(kind, "helper", capabilities=()), POLICY)
        assert (decision.target, decision.action) == ("subagent_registry", "registered")


def test_a_bundle_with_a_reserved_id_is_refused_by_policy() -> None:
    assert reason_of(item("subagent", "main", capabilities=())) == "policy_denied"


def test_a_path_escape_is_path_not_allowed_before_anything_else() -> None:
    bad = item(
        enabled=False,
        diagnostics=(Diagnostic("error", "path_not_allowed", "script leaves the bundle"),),
    )
    assert reason_of(bad) == "path_not_allowed"


def test_an_invalid_manifest_is_schema_invalid_and_keeps_its_diagnostics() -> None:
    error = Diagnostic("error", "schema_invalid", "not a string", pointer="/id")
    decision = judge(item(diagnostics=(error,)), POLICY)
    assert decision.reason == "schema_invalid" and decision.action == "rejected"
    assert error in decision.diagnostics
    assert reason_of(item(health=Health("invalid_manifest"))) == "schema_invalid"


def test_a_disabled_manifest_is_disabled() -> None:
    decision = judge(item(enabled=False), POLICY)
    assert (decision.action, decision.reason) == ("disabled", "disabled_by_manifest")


def test_unknown_trust_is_display_only() -> None:
    decision = judge(item(trust="unknown"), POLICY)
    assert (decision.target, decision.reason) == ("display_only", "trust_level_unknown")
    assert not decision.registered


def test_display_only_kinds_never_register() -> None:
    expected = {
        "prompt_role": "manifest_required",
        "runtime_worker": "runtime_gate_mismatch",
        "local_model": "manifest_required",
        "serial_device": "manifest_required",
    }
    for kind, reason in expected.items():
        decision = judge(item(typing.cast(ItemKind, kind), "x"), POLICY)
        assert (decision.target, decision.reason) == ("display_only", reason), kind
        assert not decision.registered


def test_a_command_outside_the_allowlist_is_not_allowed() -> None:
    assert reason_of(item(id="bash", source=ON_PATH, trust="system_path")) == (
        "command_not_allowed"
    )


def candidates(*paths: tuple[str, str, bool]) -> tuple[CommandCandidate, ...]:
    return tuple(CommandCandidate(d, c, w) for d, c, w in paths)


def test_the_same_command_in_two_places_is_ambiguous_unless_pinned() -> None:
    two = candidates(("/a/codex", "/a/codex", False), ("/b/codex", "/b/codex", False))
    found = item(source=ON_PATH, trust="system_path", candidates=two)
    assert reason_of(found) == "command_ambiguous"
    assert "/a/codex" in judge(found, POLICY).diagnostics[0].message
    pinned = item(source=ON_PATH, trust="system_path", candidates=two, pinned=True)
    assert reason_of(pinned) == "registered"


def test_two_names_for_one_program_are_not_ambiguous() -> None:
    same = candidates(("/a/codex", "/opt/codex", False), ("/b/codex", "/opt/codex", False))
    assert reason_of(item(source=ON_PATH, trust="system_path", candidates=same)) == "registered"


def test_a_workspace_local_shadow_is_ignored_unless_pinned() -> None:
    shadowed = candidates(("./bin/codex", "/ws/bin/codex", True), ("/a/codex", "/a/codex", False))
    assert reason_of(item(source=ON_PATH, trust="system_path", candidates=shadowed)) == (
        "registered"
    )
    only_local = candidates(("./bin/codex", "/ws/bin/codex", True))
    assert reason_of(item(source=ON_PATH, trust="system_path", candidates=only_local)) == (
        "path_not_allowed"
    )
    assert (
        reason_of(item(source=ON_PATH, trust="system_path", candidates=only_local, pinned=True))
        == "registered"
    )


def test_health_decides_after_the_manifest() -> None:
    assert reason_of(item(health=Health("unavailable", message="timed out"))) == (
        "health_unavailable"
    )
    assert reason_of(item(health=Health("permission_denied"))) == "health_permission_denied"
    degraded = judge(item(health=Health("degraded")), POLICY)
    assert (degraded.action, degraded.reason) == ("degraded", "registered")


def test_capabilities_must_exist_in_the_registry() -> None:
    assert reason_of(item(capabilities=())) == "capability_unknown"
    assert reason_of(item(capabilities=("code.review", "github.issue.create"))) == (
        "capability_unknown"
    )
    lenient = DecisionPolicy(capabilities=CAPS, allow_unknown_capabilities=True)
    asks = item(capabilities=("github.issue.create",), allow_unknown_capability=True)
    assert reason_of(asks) == "capability_unknown"  # the policy must allow it too
    assert reason_of(asks, lenient) == "registered"


def test_http_adapters_need_an_explicit_manifest() -> None:
    assert reason_of(item("http_adapter", "api", trust="explicit_remote")) == "registered"
    remote = item("http_adapter", "api", trust="explicit_remote", source=USER)
    assert reason_of(remote) == "manifest_required"


def test_mcp_servers_in_user_directories_are_shown_never_started() -> None:
    decision = judge(item("mcp_server", "gh", source=USER, trust="user_local"), POLICY)
    assert (decision.target, decision.reason) == ("display_only", "policy_denied")


def skill(**fields: Any) -> DiscoveredItem:
    defaults: dict[str, Any] = {
        "skill_class": "workflow_skill",
        "classified_by": "front_matter",
        "input_schema": True,
        "output_schema": True,
    }
    return item("workflow_skill", "review", **{**defaults, **fields})


def test_skill_rules() -> None:
    assert reason_of(skill()) == "registered"
    user = skill(source=USER, trust="user_local")
    assert reason_of(user) == "policy_denied"
    assert reason_of(user, DecisionPolicy(capabilities=CAPS, allow_user_local_skills=True)) == (
        "registered"
    )
    assert reason_of(skill(classified_by="heuristic")) == "manifest_required"
    assert reason_of(skill(classified_by="trusted_dir")) == "manifest_required"
    assert reason_of(skill(runtime_gate="swarm")) == "runtime_gate_mismatch"
    missing = judge(skill(output_schema=False), POLICY)
    assert missing.reason == "capability_missing_schema"
    assert "output" in missing.diagnostics[0].message


def test_writing_capabilities_need_audit_fields() -> None:
    writes = CapabilityDescriptor("repo.write", "writes_workspace")
    assert reason_of(item("capability", "repo.write", descriptor=writes)) == "schema_invalid"
    audited = CapabilityDescriptor("repo.write", "writes_workspace", audit=("actor", "paths"))
    assert reason_of(item("capability", "repo.write", descriptor=audited)) == "registered"
    assert reason_of(item("capability", "x", descriptor=None)) == "schema_invalid"


def test_side_effecting_capabilities_are_never_auto_routed() -> None:
    for effect in ("writes_workspace", "writes_external", "shell_or_process"):
        assert not CapabilityDescriptor("c", effect, allow_auto_route=True).auto_routable
    assert CapabilityDescriptor("c", "none", allow_auto_route=True).auto_routable
    assert not CapabilityDescriptor("c", "none").auto_routable


def test_every_reason_code_is_reachable() -> None:
    reached = {
        judge(it, POLICY).reason
        for it in (
            item(),
            item(enabled=False),
            item(diagnostics=(Diagnostic("error", "schema_invalid", "x"),)),
            item("subagent", "main"),
            item(health=Health("unavailable")),
            item(health=Health("permission_denied")),
            item(capabilities=()),
            skill(output_schema=False),
            skill(runtime_gate="swarm"),
            item(trust="unknown"),
            item(diagnostics=(Diagnostic("error", "path_not_allowed", "x"),)),
            item(id="bash"),
            item(candidates=candidates(("/a/codex", "/a/codex", False), ("/b/c", "/b/c", False))),
            item("http_adapter", "h", source=USER),
        )
    }
    shadowed = decide([item(), item(source=ON_PATH)], POLICY)[1][1].reason
    assert reached | {shadowed} == set(typing.get_args(RegistrationReason))


# --- shadowing ----------------------------------------------------------------------------


def test_a_project_manifest_shadows_the_path_program_and_the_loser_names_it() -> None:
    decided = decide([item(source=ON_PATH, trust="system_path"), item()], POLICY)
    (path_item, path_decision), (_, project_decision) = decided
    assert project_decision.action == "registered"
    assert (path_decision.action, path_decision.reason) == ("shadowed", "duplicate_id_shadowed")
    assert "adapters/x.yaml" in path_decision.shadowed_by
    assert path_item.source.kind == "path"


def test_a_broken_project_manifest_still_shadows() -> None:
    broken = item(diagnostics=(Diagnostic("error", "schema_invalid", "x"),))
    decided = decide([item(source=ON_PATH, trust="system_path"), broken], POLICY)
    assert [d.action for _, d in decided] == ["shadowed", "rejected"]


def test_a_prefer_source_pin_turns_the_priority_around() -> None:
    pinned = DecisionPolicy(capabilities=CAPS, prefer_source={"codex": "path"})
    decided = decide([item(), item(source=ON_PATH, trust="system_path")], pinned)
    assert [d.action for _, d in decided] == ["shadowed", "registered"]


def test_kind_is_part_of_the_key() -> None:
    decided = decide([item(), item("mcp_server", "codex")], POLICY)
    assert [d.action for _, d in decided] == ["registered", "registered"]


SOURCES: list[SourceKind] = list(SOURCE_PRIORITY)
KINDS: list[ItemKind] = list(TARGETS)
TRUSTS: list[TrustLevel] = list(typing.get_args(TrustLevel))

generated = st.builds(
    lambda kind, id, source, trust, enabled, health, caps: item(
        kind,
        id,
        source=Source(source, source, f"/{source}/{id}", f"{source}:{id}"),
        trust=trust,
        enabled=enabled,
        health=Health(health),
        capabilities=caps,
        skill_class="workflow_skill",
        classified_by="front_matter",
        input_schema=True,
        output_schema=True,
        descriptor=CAPS["code.review"],
    ),
    st.sampled_from(KINDS),
    st.sampled_from(["codex", "claude", "review", "x"]),
    st.sampled_from(SOURCES),
    st.sampled_from(TRUSTS),
    st.booleans(),
    st.sampled_from(["available", "degraded", "unavailable", "not_checked"]),
    st.sampled_from([(), ("code.review",), ("nope",)]),
)


@given(st.lists(generated, max_size=12), st.randoms())
def test_each_key_has_one_winner_from_its_strongest_source_whatever_the_order(
    items: list[DiscoveredItem], rnd: Any
) -> None:
    decided = decide(items, POLICY)
    assert [i for i, _ in decided] == items
    by_key: dict[str, list[tuple[DiscoveredItem, Any]]] = {}
    for it, decision in decided:
        assert decision.key == it.key
        by_key.setdefault(it.key, []).append((it, decision))
    for group in by_key.values():
        winners = [it for it, d in group if d.action != "shadowed"]
        assert len(winners) == 1
        best = min(SOURCE_PRIORITY[it.source.kind] for it, _ in group)
        assert SOURCE_PRIORITY[winners[0].source.kind] == best
        for _, d in group:
            if d.action == "shadowed":
                assert winners[0].key in d.shadowed_by
    shuffled = list(items)
    rnd.shuffle(shuffled)
    winners_again = {
        (it.key, it.source.kind) for it, d in decide(shuffled, POLICY) if d.action != "shadowed"
    }
    assert winners_again == {
        (it.key, it.source.kind) for it, d in decided if d.action != "shadowed"
    }


@given(st.lists(generated, max_size=12))
def test_nothing_untrusted_or_display_only_is_ever_registered(items: list[DiscoveredItem]) -> None:
    decided = decide(items, POLICY)
    for it, decision in decided:
        if it.trust == "unknown" or TARGETS[it.kind] == "display_only" or not it.enabled:
            assert not decision.registered
        if decision.registered:
            assert decision.reason == "registered"
            if it.kind not in ("agent", "subagent", "capability"):  # the probed kinds
                assert it.health.status not in ("unavailable", "permission_denied")
    summary = summarise([d for _, d in decided])
    parts = summary.registered + summary.rejected + summary.display_only + summary.shadowed
    assert summary.found == len(items) == parts
