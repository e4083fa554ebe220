"""The adapter registry driven event by event, and who may call what."""

from __future__ import annotations

from typing import Any

import msgspec

from zeroclaw.discovery import (
    AdapterRegistry,
    CallAllowed,
    CallRefused,
    CapabilityDescriptor,
    DecisionPolicy,
    Diagnostic,
    DiscoveredItem,
    Entry,
    Health,
    RiskLevelName,
    Snapshot,
    Source,
    Summary,
    admit_call,
    decide,
)

from .test_decide import CAPS

SRC = Source("project_manifest", "adapters", "/p/adapters/a.yaml", "adapters/a.yaml")
BUILTIN = Source("builtin_template", "capabilities", display="builtin")
GENERATE = CapabilityDescriptor("code.generate", "writes_workspace", audit=("agent",))
REGISTRY = {**CAPS, "code.generate": GENERATE}


def adapter(ident: str, **fields: Any) -> DiscoveredItem:
    defaults: dict[str, Any] = {
        "source": SRC,
        "trust": "project",
        "capabilities": ("code.review",),
        "health": Health("available"),
        "command": f"/usr/bin/{ident}",
        "program": "codex",
    }
    return DiscoveredItem(id=ident, **{"kind": "cli_adapter", **defaults, **fields})


def snapshot(*items: DiscoveredItem) -> Snapshot:
    capabilities = [
        DiscoveredItem(kind="capability", id=name, source=BUILTIN, trust="project", descriptor=c)
        for name, c in REGISTRY.items()
    ]
    decided = decide([*capabilities, *items], DecisionPolicy())
    entries = tuple(Entry(i, d) for i, d in decided)
    return Snapshot(
        generated_at=0, workspace="/p", sources=(), entries=entries, summary=Summary(0, 0, 0, 0, 0)
    )


BROKEN = Diagnostic("error", "schema_invalid", "bad")


def test_adapters_are_added_replaced_and_removed_in_one_swap() -> None:
    registry = AdapterRegistry()
    change = registry.apply(snapshot(adapter("a"), adapter("b")))
    assert (change.added, change.generation) == (("a", "b"), 1)
    change = registry.apply(snapshot(adapter("a", args=("--json",))))
    assert (change.replaced, change.removed) == (("a",), ("b",))
    assert set(registry.active) == {"a"}
    assert registry.active["a"].generation == 2


def test_a_broken_manifest_keeps_the_last_good_registration() -> None:
    registry = AdapterRegistry()
    registry.apply(snapshot(adapter("a")))
    good = registry.active["a"]
    change = registry.apply(snapshot(adapter("a", diagnostics=(BROKEN,))))
    assert change.kept_last_good == ("a",) and not change.removed
    assert registry.active["a"] is good


def test_a_policy_refusal_removes_it_even_when_it_was_good() -> None:
    registry = AdapterRegistry()
    registry.apply(snapshot(adapter("a")))
    change = registry.apply(snapshot(adapter("a", capabilities=("unknown.cap",))))
    assert change.removed == ("a",)


def test_a_removed_adapter_takes_no_new_call_and_drains_those_in_flight() -> None:
    registry = AdapterRegistry()
    registry.apply(snapshot(adapter("a")))
    assert registry.acquire("a") is not None
    assert registry.acquire("a") is not None
    change = registry.apply(snapshot())
    assert change.draining == ("a",)
    assert registry.acquire("a") is None  # no new call
    registry.release("a")
    assert "a" in registry.draining
    registry.release("a")
    assert not registry.draining and not registry.inflight


def test_a_never_registered_broken_adapter_is_not_registered() -> None:
    registry = AdapterRegistry()
    change = registry.apply(snapshot(adapter("a", diagnostics=(BROKEN,))))
    assert change.empty and not registry.active


def test_calls_are_admitted_by_grant_profile_and_side_effect() -> None:
    registry = AdapterRegistry()
    registry.apply(
        snapshot(adapter("rev"), adapter("gen", capabilities=("code.generate", "code.review")))
    )

    def call(
        level: RiskLevelName, ident: str, cap: str | None, granted: tuple[str, ...] = ("rev", "gen")
    ) -> CallAllowed | CallRefused:
        return admit_call(
            registry, agent="alpha", granted=granted, level=level, adapter_id=ident, capability=cap
        )

    def refused(*args: Any, **kwargs: Any) -> str:
        verdict = call(*args, **kwargs)
        assert isinstance(verdict, CallRefused), verdict
        return verdict.code

    def approval(*args: Any) -> bool:
        verdict = call(*args)
        assert isinstance(verdict, CallAllowed), verdict
        return verdict.needs_approval

    assert approval("readonly", "rev", None) is False
    assert refused("full", "rev", None, granted=()) == "adapter_not_granted"
    assert refused("full", "nope", None, granted=("nope",)) == "adapter_not_found"
    assert refused("full", "gen", None) == "bad_arguments"
    assert refused("full", "gen", "chat.reply") == "capability_not_offered"
    assert approval("readonly", "gen", "code.review") is False
    assert refused("readonly", "gen", "code.generate") == "read_only_profile"
    assert approval("supervised", "gen", "code.generate") is True
    assert approval("full", "gen", "code.generate") is False


def test_an_unknown_capability_allowed_by_policy_counts_as_the_worst_side_effect() -> None:
    registry = AdapterRegistry()
    registry.apply(snapshot(adapter("x", capabilities=("code.review",))))
    registry.active["x"] = msgspec.structs.replace(
        registry.active["x"], side_effects={"odd.cap": "shell_or_process"}
    )
    verdict = admit_call(
        registry, agent="a", granted=("x",), level="readonly", adapter_id="x", capability=None
    )
    assert isinstance(verdict, CallRefused) and verdict.code == "read_only_profile"


def test_an_http_adapter_is_admitted_as_a_cli_adapter_is_and_a_skill_never_runs() -> None:
    from zeroclaw.discovery._registry import over_http

    api = adapter("api", kind="http_adapter", command="", endpoint="https://api.test/v1")
    writer = adapter("tix", kind="http_adapter", command="", capabilities=("code.generate",))
    skill = adapter(
        "flow",
        kind="workflow_skill",
        command="",
        classified_by="manifest",
        input_schema=True,
        output_schema=True,
    )
    registry = AdapterRegistry()
    registry.apply(snapshot(api, writer, skill))
    assert set(registry.active) == {"api", "tix", "flow"}

    def admit(ident: str, level: Any = "supervised", tool: str | None = None) -> Any:
        return admit_call(
            registry,
            agent="alpha",
            granted=("api", "tix", "flow"),
            level=level,
            adapter_id=ident,
            capability=None,
            tool=tool,
        )

    ok = admit("api", "readonly")
    assert isinstance(ok, CallAllowed) and not ok.needs_approval and ok.endpoint == ""
    asks = admit("tix")
    assert isinstance(asks, CallAllowed) and asks.needs_approval
    for verdict, code in (
        (admit("tix", "readonly"), "read_only_profile"),
        (admit("api", tool="x"), "bad_arguments"),
        (admit("flow"), "adapter_unsupported"),
    ):
        assert isinstance(verdict, CallRefused) and verdict.code == code
    assert over_http(api) and over_http(writer) and not over_http(skill)
    remote = adapter("remote", kind="mcp_server", command="", endpoint="http://h.test/mcp")
    assert over_http(remote)
    assert not over_http(adapter("local", kind="mcp_server"))  # a program: stdio
