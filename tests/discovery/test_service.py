"""The daemon's discovery service in-process, on real files: phase B's events, the adapter
service's admission and leases, and the watch that rescans after a change."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.bodies import raw
from tests.conftest import PATIENCE
from tests.discovery.helpers import Project
from zeroclaw._ops import decode_body
from zeroclaw._process import ProcessOutcome
from zeroclaw.bus import Request
from zeroclaw.config import load_config
from zeroclaw.discovery import AdapterRun, Debounce, DiscoveryService
from zeroclaw.events import (
    DiscoveryCompleted,
    DiscoveryHealthChecked,
    DiscoveryItemFound,
    DiscoveryItemInvalid,
    DiscoveryStarted,
    EventSink,
    RegistrationDecided,
)
from zeroclaw.turns import AdapterAdmission, AdapterResult, adapter_approval_question


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


class Runner:
    """Stands in for the daemon's runner: records each run; `gate` holds a run in flight."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, AdapterRun]] = []
        self.gate: trio.Event | None = None
        self.started = trio.Event()

    async def __call__(self, agent: str, run: AdapterRun, /) -> ProcessOutcome | str:
        self.runs.append((agent, run))
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        return ProcessOutcome(0, f"ran {' '.join(run.argv[1:])}", False, False)


def service(project: Project, runner: Runner | None = None) -> tuple[DiscoveryService, EventSink]:
    events = EventSink()
    config = load_config(project.config_path)
    svc = DiscoveryService(
        config, project.config_path, events, project.env(), runner=runner or Runner()
    )
    return svc, events


def request(op: str, **body: Any) -> Request:
    return Request(id="r1", service="adapter", op=op, body=raw(body))


async def test_a_rescan_swaps_the_registry_and_publishes_what_changed(project: Project) -> None:
    svc, events = service(project)
    change = await svc.rescan()
    assert change is not None and set(change.added) >= {"rev", "gen", "codex"}
    kinds = [type(p.event) for p in events.recent()]
    assert kinds[-1] is DiscoveryCompleted
    decided = {p.event.key for p in events.recent() if isinstance(p.event, RegistrationDecided)}
    assert {"cli_adapter:rev", "agent:alpha"} <= decided
    assert not any(k.startswith("capability:chat") for k in decided)  # builtins stay quiet
    seq = events.last_seq
    await svc.rescan()  # nothing changed: only the start and the summary
    assert [type(p.event) for p in events.recent() if p.seq > seq] == [
        DiscoveryStarted,
        DiscoveryCompleted,
    ]


async def test_admission_goes_by_grant_profile_and_side_effect(project: Project) -> None:
    svc, _ = service(project)
    await svc.rescan()
    ok = await svc.serve("alpha", request("admit", adapter="rev"))
    assert ok.ok, ok
    admission = decode_body(ok.body, AdapterAdmission)
    assert (admission.capability, admission.needs_approval) == ("code.review", False)
    assert admission.command.endswith("/codex")
    asks = await svc.serve("alpha", request("admit", adapter="gen"))
    assert decode_body(asks.body, AdapterAdmission).needs_approval
    for sender, adapter, code in (
        ("reader", "gen", "read_only_profile"),
        ("nobody", "rev", "adapter_not_granted"),
        ("sub:x@1", "rev", "adapter_not_granted"),
        ("alpha", "nope", "adapter_not_granted"),
    ):
        refused = await svc.serve(sender, request("admit", adapter=adapter))
        assert (refused.ok, refused.error) == (False, code), (sender, adapter)


async def test_invoke_admits_again_and_runs_the_program_with_the_input_last(
    project: Project,
) -> None:
    runner = Runner()
    svc, _ = service(project, runner)
    await svc.rescan()
    done = await svc.serve("alpha", request("invoke", adapter="rev", input="main.py"))
    result = decode_body(done.body, AdapterResult)
    assert (result.exit_code, result.output) == (0, "ran review main.py")
    [(agent, run)] = runner.runs
    assert agent == "alpha" and run.argv[0].endswith("/codex")
    unapproved = await svc.serve("alpha", request("invoke", adapter="gen", input="x", turn="t1"))
    assert unapproved.error == "approval_denied"
    readonly = await svc.serve("reader", request("invoke", adapter="gen", input="x", turn="t1"))
    assert readonly.error == "read_only_profile"  # an approval never widens a profile
    assert len(runner.runs) == 1


async def test_a_run_that_needs_approval_takes_a_yes_the_daemon_saw_given_in_that_turn(
    project: Project,
) -> None:
    # The hole: the agent's `approved: true` was believed, so an agent process that set it
    # ran a side effect nobody approved. Now only the daemon's own record counts: a yes the
    # turn service saw given to this question, in this turn of this agent, used once.
    runner = Runner()
    svc, _ = service(project, runner)
    await svc.rescan()
    asks = await svc.serve("alpha", request("admit", adapter="gen"))
    admission = decode_body(asks.body, AdapterAdmission)
    question = adapter_approval_question(admission, "x")
    # a yes names the input too: one for another input does not run this one
    other = adapter_approval_question(admission, "rm -rf the other thing")
    assert other != question and len(adapter_approval_question(admission, "y" * 10**6)) < 400
    svc.approvals.record("alpha", "t1", other)
    call = request("invoke", adapter="gen", input="x", turn="t1")
    forged = request("invoke", adapter="gen", input="x", turn="t1", approved=True)
    assert (await svc.serve("alpha", forged)).error in ("approval_denied", "bad_request")
    svc.approvals.record("alpha", "t1", "run adapter gen for something else")  # not this
    svc.approvals.record("alpha", "t2", question)  # another turn of alpha's
    svc.approvals.record("beta", "t1", question)  # another agent's turn of that id
    assert (await svc.serve("alpha", call)).error == "approval_denied"
    svc.approvals.record("alpha", "t1", question)
    assert (await svc.serve("alpha", call)).ok
    assert (await svc.serve("alpha", call)).error == "approval_denied"  # one yes, one run
    assert len(runner.runs) == 1
    svc.approvals.record("alpha", "t1", question)
    svc.approvals.forget("alpha", "t1")  # the turn ended: its yes with it
    assert (await svc.serve("alpha", call)).error == "approval_denied"


async def test_a_removed_adapter_drains_the_call_in_flight_and_takes_no_new_one(
    project: Project,
) -> None:
    runner = Runner()
    runner.gate = trio.Event()
    svc, _ = service(project, runner)
    await svc.rescan()
    async with trio.open_nursery() as nursery:
        answers: list[Any] = []

        async def call() -> None:
            answers.append(await svc.serve("alpha", request("invoke", adapter="rev", input="x")))

        nursery.start_soon(call)
        await runner.started.wait()
        (project.root / "adapters" / "rev.yaml").unlink()
        change = await svc.rescan()
        assert change is not None and change.draining == ("rev",)
        refused = await svc.serve("alpha", request("invoke", adapter="rev", input="y"))
        assert refused.error == "adapter_not_found"
        runner.gate.set()
    assert answers[0].ok
    assert not svc.registry.draining and not svc.registry.inflight


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
            with trio.fail_after(PATIENCE):
                async for published in subscription:
                    if isinstance(published.event, DiscoveryCompleted):
                        assert published.event.added == ("new",)
                        break
        nursery.cancel_scope.cancel()
    assert "new" in svc.registry.active


async def test_a_scan_publishes_started_found_invalid_health_checked_decided_completed(
    project: Project,
) -> None:
    project.file("adapters/broken.yaml", "id: broken\ntransport: cli\n")  # no command
    svc, events = service(project)
    await svc.rescan()
    published = [p.event for p in events.recent()]
    assert isinstance(published[0], DiscoveryStarted)
    assert isinstance(published[-1], DiscoveryCompleted)
    found = {e.key for e in published if isinstance(e, DiscoveryItemFound)}
    assert {"cli_adapter:rev", "cli_adapter:broken"} <= found
    invalid = [e for e in published if isinstance(e, DiscoveryItemInvalid)]
    assert [e.key for e in invalid] == ["cli_adapter:broken"]
    assert "schema_invalid" in invalid[0].kinds
    checked = {e.key: e.status for e in published if isinstance(e, DiscoveryHealthChecked)}
    assert checked["cli_adapter:rev"] == "available"
    decided = [e.key for e in published if isinstance(e, RegistrationDecided)]
    assert len(decided) == len(set(decided)) and found <= set(decided)  # one per item
