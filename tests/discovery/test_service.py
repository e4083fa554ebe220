"""The daemon's discovery service in-process, on real files: phase B's events, the adapter
service's admission and leases, and the watch that rescans after a change."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.discovery.helpers import Project
from zeroclaw.bus import Request
from zeroclaw.config import load_config
from zeroclaw.discovery import Debounce, DiscoveryService
from zeroclaw.events import DiscoveryCompleted, EventSink, RegistrationDecided
from zeroclaw.turns import AdapterLease


def test_debounce_waits_for_quiet_then_fires_once() -> None:
    d = Debounce(0.5)
    assert not d.observe({"a": 1}, 0.0)  # the first state is what was scanned
    assert not d.observe({"a": 1}, 1.0)
    assert not d.observe({"a": 2}, 2.0) and d.pending  # changed: wait
    assert not d.observe({"a": 3}, 2.2)  # still changing
    assert not d.observe({"a": 3}, 2.6)  # quiet for 0.4 s only
    assert d.observe({"a": 3}, 2.8)  # quiet long enough: rescan
    assert not d.observe({"a": 3}, 5.0) and not d.pending
    assert not d.observe({"a": 1}, 6.0)
    assert not d.observe({"a": 3}, 6.1)  # changed back before the quiet period: no rescan
    assert not d.observe({"a": 3}, 9.0)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path)
    project.program("codex", 'echo "codex 1"')
    project.file(
        "adapters/rev.yaml",
        "id: rev\ntransport: cli\ncommand: codex\nargs: [review]\ncapabilities: [code.review]\n",
    )
    project.file(
        "adapters/gen.yaml",
        "id: gen\ntransport: cli\ncommand: codex\ncapabilities: [code.generate]\n",
    )
    agent: dict[str, Any] = {
        "model_provider": "offline.default",
        "runtime_profile": "default",
        "channels": ["cli.local"],
        "adapters": ["rev", "gen"],
    }
    project.extra["risk_profiles"] = {
        "sup": {"level": "supervised"},
        "ro": {"level": "readonly"},
    }
    project.extra["agents"] = {
        "alpha": {**agent, "risk_profile": "sup"},
        "reader": {**agent, "risk_profile": "ro"},
        "nobody": {**agent, "risk_profile": "sup", "adapters": []},
    }
    project.write_config()
    return project


def service(project: Project) -> tuple[DiscoveryService, EventSink]:
    events = EventSink()
    config = load_config(project.config_path)
    return DiscoveryService(config, project.config_path, events, project.env()), events


def request(op: str, **body: Any) -> Request:
    return Request(id="r1", service="adapter", op=op, body=body)


async def test_a_rescan_swaps_the_registry_and_publishes_what_changed(project: Project) -> None:
    svc, events = service(project)
    change = await svc.rescan()
    assert change is not None and set(change.added) >= {"rev", "gen", "codex"}
    kinds = [type(p.event) for p in events.recent()]
    assert kinds[-1] is DiscoveryCompleted
    decided = {p.event.key for p in events.recent() if isinstance(p.event, RegistrationDecided)}
    assert {"cli_adapter:rev", "agent:alpha"} <= decided
    assert not any(k.startswith("capability:chat") for k in decided)  # builtins stay quiet
    events_before = events.last_seq
    await svc.rescan()  # nothing changed: only the summary
    assert [type(p.event) for p in events.recent()[events_before - events.last_seq :]] == [
        DiscoveryCompleted
    ]


async def test_the_adapter_service_admits_by_grant_profile_and_side_effect(
    project: Project,
) -> None:
    svc, _ = service(project)
    await svc.rescan()
    ok = await svc.serve("alpha", request("admit", adapter="rev"))
    assert ok.ok, ok
    lease = msgspec.convert(ok.body, AdapterLease)
    assert (lease.capability, lease.needs_approval, lease.args) == (
        "code.review",
        False,
        ("review",),
    )
    assert lease.command.endswith("/codex")
    asks = msgspec.convert(
        (await svc.serve("alpha", request("admit", adapter="gen"))).body, AdapterLease
    )
    assert asks.needs_approval and asks.side_effect == "writes_workspace"
    refused = await svc.serve("reader", request("admit", adapter="gen"))
    assert (refused.ok, refused.error) == (False, "read_only_profile")
    assert (
        await svc.serve("nobody", request("admit", adapter="rev"))
    ).error == "adapter_not_granted"
    assert (
        await svc.serve("sub:x@1", request("admit", adapter="rev"))
    ).error == "adapter_not_granted"
    assert (
        await svc.serve("alpha", request("admit", adapter="nope"))
    ).error == "adapter_not_granted"
    assert svc.leases() == 2


async def test_leases_are_released_by_their_holder_or_when_its_process_is_gone(
    project: Project,
) -> None:
    svc, _ = service(project)
    await svc.rescan()
    first = msgspec.convert(
        (await svc.serve("alpha", request("admit", adapter="rev"))).body, AdapterLease
    )
    await svc.serve("alpha", request("admit", adapter="rev"))
    other = await svc.serve("reader", request("release", lease=first.lease))
    assert other.error == "bad_request"  # not theirs
    assert (await svc.serve("alpha", request("release", lease=first.lease))).ok
    assert svc.registry.inflight["rev"] == 1
    (project.root / "adapters" / "rev.yaml").unlink()
    change = await svc.rescan()
    assert change is not None and change.draining == ("rev",)
    assert (await svc.serve("alpha", request("admit", adapter="rev"))).error == "adapter_not_found"
    svc.agent_down("alpha")
    assert svc.leases() == 0 and not svc.registry.draining


async def test_a_broken_edit_keeps_the_last_good_adapter(project: Project) -> None:
    svc, _ = service(project)
    await svc.rescan()
    project.file("adapters/rev.yaml", "id: rev\ntransport: cli\ncommand: [oops\n")
    change = await svc.rescan()
    assert change is not None and change.kept_last_good == ("rev",)
    assert (await svc.serve("alpha", request("admit", adapter="rev"))).ok


async def test_the_watch_rescans_after_a_change_in_adapters(project: Project) -> None:
    svc, events = service(project)
    await svc.rescan()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(svc.watch, poll_secs=0.05, quiet_secs=0.1))
        with events.subscribe() as subscription:
            project.file(
                "adapters/new.yaml",
                "id: new\ntransport: cli\ncommand: codex\ncapabilities: [chat.reply]\n",
            )
            with trio.fail_after(20):
                async for published in subscription:
                    if isinstance(published.event, DiscoveryCompleted):
                        assert published.event.added == ("new",)
                        break
        nursery.cancel_scope.cancel()
    assert "new" in svc.registry.active
