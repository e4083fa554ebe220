"""`invoke for CAPABILITY` (issue 26 §5): business aliases from the one table, auto-routing
of side-effect-free capabilities only, by the seed's source priority."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.bodies import raw
from tests.discovery.helpers import Project
from zeroclaw._ops import decode_body
from zeroclaw.bus import Request
from zeroclaw.config import load_config
from zeroclaw.discovery import DiscoveryService
from zeroclaw.discovery._route import Alias, Routed, route
from zeroclaw.events import EventSink
from zeroclaw.turns import AdapterAdmission


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path)
    project.program("codex", 'echo "codex 1"')
    project.file(
        "capabilities/lookup.yaml",
        "name: docs.lookup\nside_effect: none\nallow_auto_route: true\n",
    )
    project.file(
        "capabilities/write.yaml",
        "name: issue.write\nside_effect: writes_external\nallow_auto_route: true\n"
        "audit: [agent, adapter]\n",
    )
    for ident in ("zeta", "alpha-docs"):
        project.file(
            f"adapters/{ident}.yaml",
            f"id: {ident}\ntransport: cli\ncommand: codex\n"
            "capabilities: [docs.lookup, issue.write, code.review]\n",
        )
    project.discovery["commands"] = ["codex"]
    project.discovery["aliases"] = {
        "github.issue.create": {"adapter": "zeta", "capability": "issue.write"},
        "time.now": {"adapter": "time", "tool": "get_current_time"},
    }
    agent: dict[str, Any] = {
        "model_provider": "offline.default",
        "risk_profile": "sup",
        "runtime_profile": "default",
        "channels": ["cli.local"],
        "adapters": ["zeta", "alpha-docs"],
    }
    project.extra["agents"] = {"alpha": agent, "solo": {**agent, "adapters": ["zeta"]}}
    project.write_config()
    return project


def service(project: Project) -> DiscoveryService:
    config = load_config(project.config_path)
    return DiscoveryService(config, project.config_path, EventSink(), project.env())


def admit(**body: Any) -> Request:
    return Request(id="r1", service="adapter", op="admit", body=raw({"adapter": "", **body}))


async def test_a_side_effect_free_capability_goes_to_the_strongest_source_then_by_id(
    project: Project,
) -> None:
    svc = service(project)
    await svc.rescan(refresh=True)
    ok = await svc.serve("alpha", admit(capability="docs.lookup"))
    assert ok.ok, ok
    assert decode_body(ok.body, AdapterAdmission).adapter == "alpha-docs"  # same source: by id
    solo = await svc.serve("solo", admit(capability="docs.lookup"))
    assert decode_body(solo.body, AdapterAdmission).adapter == "zeta"  # only what it is granted


async def test_only_side_effect_free_capabilities_are_auto_routed(project: Project) -> None:
    svc = service(project)
    await svc.rescan(refresh=True)
    for capability in ("issue.write", "code.review", "no.such"):
        refused = await svc.serve("alpha", admit(capability=capability))
        assert refused.error == "capability_not_routable", capability
    refused = await svc.serve("alpha", admit())
    assert refused.error == "bad_arguments"


async def test_a_business_alias_resolves_to_its_adapter_and_is_admitted_as_named(
    project: Project,
) -> None:
    svc = service(project)
    await svc.rescan(refresh=True)
    ok = await svc.serve("alpha", admit(capability="github.issue.create"))
    admission = decode_body(ok.body, AdapterAdmission)
    assert (admission.adapter, admission.capability) == ("zeta", "issue.write")
    assert admission.needs_approval  # it writes: a supervised agent is asked, as if named
    gone = await svc.serve("alpha", admit(capability="time.now"))
    assert gone.error == "adapter_not_granted"  # the alias grants nothing by itself


async def test_route_is_pure_and_an_alias_to_an_mcp_tool_keeps_the_tool(
    project: Project,
) -> None:
    svc = service(project)
    await svc.rescan(refresh=True)
    aliases = {"time.now": Alias("time", None, "get_current_time")}
    assert route(svc.registry, capability="time.now", granted=("time",), aliases=aliases) == Routed(
        "time", None, "get_current_time", "alias"
    )
    none = route(svc.registry, capability="docs.lookup", granted=(), aliases={})
    assert not isinstance(none, Routed) and none.code == "no_adapter_for_capability"
