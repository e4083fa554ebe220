"""The schedule service's shell on a real store, on trio's mock clock: it sleeps until its
next deadline (at most a minute), never wakes itself; and the store it keeps: marks,
reminders and last runs across a reopen, one opener at a time, damage refused with the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import trio
import trio.testing

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw._ops import encode_body
from zeroclaw.bus import Origin, Request
from zeroclaw.channels import ChannelHost, Scheduled
from zeroclaw.config import Config, validate_document
from zeroclaw.events import EventSink
from zeroclaw.schedules import (
    Every,
    Mark,
    Once,
    ReminderService,
    Running,
    RunSummary,
    ScheduleService,
    ScheduleSpec,
    ScheduleStore,
    ScheduleStoreCorrupt,
    ScheduleStoreLocked,
)
from zeroclaw.schedules._store import Batch
from zeroclaw.turns import (
    SCHEDULE_CREATE,
    SCHEDULE_SERVICE,
    ApprovalLedger,
    ReminderCreate,
    ReminderListCall,
)


def config(tmp_path: Path, schedules: dict[str, Any]) -> Config:
    doc = make_config(tmp_path, {"alpha": agent_entry(schedules=schedules)})
    return validate_document(doc)


async def never_pushed(key: str, scheduled: Scheduled) -> str | None:
    raise AssertionError("nothing is delivered in these tests")


def service(tmp_path: Path, cfg: Config, store: ScheduleStore) -> ScheduleService:
    clock = trio.current_time  # the mock clock stands in for the wall clock
    return ScheduleService(
        store,
        config=lambda: cfg,
        # No run fires in these tests: the host that would open its turn is never reached.
        host=cast(ChannelHost, None),
        push=never_pushed,
        events=EventSink(),
        workspace=lambda alias: tmp_path,
        clock=clock,
    )


@pytest.mark.parametrize(
    ("schedules", "most_wakes"),
    [({}, 61), ({"daily": {"cron": "0 3 * * *", "text": "x"}}, 61)],
)
async def test_an_idle_service_wakes_once_a_minute_at_most(
    tmp_path: Path,
    schedules: dict[str, Any],
    most_wakes: int,
    autojump_clock: trio.testing.MockClock,
) -> None:
    autojump_clock.jump(1_800_000_000)  # a wall clock's worth of seconds
    with ScheduleStore(tmp_path / "s") as store:
        svc = service(tmp_path, config(tmp_path, schedules), store)
        async with trio.open_nursery() as nursery:
            await nursery.start(svc.run)
            await trio.sleep(3600)
            nursery.cancel_scope.cancel()
    assert 0 < svc.wakes <= most_wakes, svc.wakes


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


def test_the_store_keeps_marks_reminders_and_runs_across_a_reopen(tmp_path: Path) -> None:
    reminder = ScheduleSpec(
        "alpha",
        "reminder-1",
        Once(2e9),
        "call bob",
        kind="reminder",
        created_by="operator",
        created_at=1.5e9,
        deliver_to="log",
    )
    every = ScheduleSpec(
        "alpha",
        "reminder-2",
        Every(3600.0, 1.5e9),
        "water",
        kind="reminder",
        created_by="webhook.ops:ci-bot",
        created_at=1.5e9,
    )
    mark = Mark("alpha.x", 1.5e9, True, Running("alpha.x@1", 1.5e9, 1.6e9), 1.7e9)
    run = RunSummary("alpha.y@2", "timeout", 1.8e9, "slow", 1.7e9)
    with ScheduleStore(tmp_path / "s") as store:
        store.write(Batch((mark,), (), (("alpha.y", run),), (reminder, every)))
        assert store.next_reminder_number("alpha") == 1
        assert store.next_reminder_number("alpha") == 2
        assert store.next_reminder_number("beta") == 1
    with ScheduleStore.open_verified(tmp_path / "s") as store:
        loaded = store.load()
        assert loaded.marks == (mark,)
        assert loaded.runs == {"alpha.y": run}
        assert sorted(loaded.reminders, key=lambda s: s.name) == [reminder, every]
        assert store.next_reminder_number("alpha") == 3  # never reused
        store.write(Batch(forget=("alpha.x", "alpha.y", "alpha.reminder-1")))
        assert store.load().marks == () and store.load().runs == {}
        assert [s.name for s in store.load().reminders] == ["reminder-2"]


def test_one_opener_at_a_time(tmp_path: Path) -> None:
    with ScheduleStore(tmp_path / "s"), pytest.raises(ScheduleStoreLocked, match="in use by pid"):
        ScheduleStore(tmp_path / "s")


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_a_damaged_store_is_refused_with_the_fix(tmp_path: Path, damage: str) -> None:
    with ScheduleStore(tmp_path / "s") as store:
        store.write(Batch((Mark("alpha.x", 1.0),)))
    data = tmp_path / "s" / "data.mdb"
    raw = data.read_bytes()
    if damage == "empty":
        data.write_bytes(b"")
    elif damage == "truncated":
        data.write_bytes(raw[: len(raw) // 3])
    else:
        data.write_bytes(b"\x00garbage" * (len(raw) // 8))
    with pytest.raises(ScheduleStoreCorrupt, match="move it aside"):
        ScheduleStore.open_verified(tmp_path / "s")


async def test_concurrent_creates_stop_at_the_agents_limit(tmp_path: Path) -> None:
    """A flood of schedule_create requests at once (a sender's many turns, or an agent's
    process sending without waiting): each counts what is held only after the one before
    it is kept, so no more than max_per_agent are made."""
    doc = make_config(tmp_path, {"alpha": agent_entry(risk_profile="rem")})
    doc["risk_profiles"]["rem"] = {"level": "full", "reminders": {"max_per_agent": 3}}
    cfg = validate_document(doc)
    made: list[str] = []
    refused: list[str] = []
    with ScheduleStore(tmp_path / "s") as store:
        svc = ScheduleService(
            store,
            config=lambda: cfg,
            host=cast(ChannelHost, None),
            push=never_pushed,
            events=EventSink(),
            workspace=lambda alias: tmp_path,
        )
        reminders = ReminderService(
            config=lambda: cfg,
            turn_of=lambda turn: ("alpha", Origin.operator("cli.local")),
            grant=lambda agent, origin: (
                None if origin.is_operator else ("schedule_create", "schedule_list")
            ),
            approvals=ApprovalLedger(),
            schedules=svc,
        )

        async def create(i: int) -> None:
            call = ReminderCreate(f"r{i}", after="1h", turn="t")
            request = Request(
                id=str(i), service=SCHEDULE_SERVICE, op=SCHEDULE_CREATE.name, body=encode_body(call)
            )
            response = await reminders.serve("alpha", request)
            (made if response.ok else refused).append(response.error or "")

        async with trio.open_nursery() as nursery:
            await nursery.start(svc.run)
            async with trio.open_nursery() as flood:
                for i in range(12):
                    flood.start_soon(create, i)
            nursery.cancel_scope.cancel()
        assert len(made) == 3 and set(refused) == {"reminder_limit"}, (made, refused)
        assert len(store.load().reminders) == 3


async def test_a_disabled_agents_reminders_are_kept_not_run(tmp_path: Path) -> None:
    """Disabling an agent for a while (a reload) keeps the reminders it made: they stop,
    and run again once it is enabled; an agent removed from the config takes them along."""
    doc = make_config(tmp_path, {"alpha": agent_entry(risk_profile="rem")})
    doc["risk_profiles"]["rem"] = {"level": "full", "reminders": {}}
    configs = {
        "on": validate_document(doc),
        "off": validate_document(
            {**doc, "agents": {"alpha": agent_entry(risk_profile="rem", enabled=False)}}
        ),
        "gone": validate_document({**doc, "agents": {"beta": agent_entry()}}),
    }
    current = "on"
    reminder = ScheduleSpec("alpha", "reminder-1", Every(3600.0), "hi", kind="reminder")
    with ScheduleStore(tmp_path / "s") as store:
        svc = ScheduleService(
            store,
            config=lambda: configs[current],
            host=cast(ChannelHost, None),
            push=never_pushed,
            events=EventSink(),
            workspace=lambda alias: tmp_path,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(svc.run)
            await svc.add_reminder(reminder)
            current = "off"
            await svc.reload()
            [view] = svc.views("alpha")
            assert view.spec.enabled is False and view.next_fire is None
            assert [s.name for s in store.load().reminders] == ["reminder-1"]
            current = "on"
            await svc.reload()
            [view] = svc.views("alpha")
            assert view.spec.enabled and view.next_fire is not None
            current = "gone"
            await svc.reload()
            assert svc.views("alpha") == [] and store.load().reminders == ()
            nursery.cancel_scope.cancel()


async def test_a_sender_lists_only_its_own_reminders(tmp_path: Path) -> None:
    """schedule_list in an outside sender's turn shows the reminders that sender made,
    nothing of another sender's nor of the operator's schedules; the operator's shows all."""
    doc = make_config(
        tmp_path,
        {
            "alpha": agent_entry(
                risk_profile="rem", schedules={"daily": {"cron": "0 3 * * *", "text": "secret"}}
            )
        },
    )
    doc["risk_profiles"]["rem"] = {"level": "full", "reminders": {}}
    cfg = validate_document(doc)
    origins = {
        "op": Origin.operator("cli.local"),
        "bob": Origin.from_sender("webhook.ops", "bob"),
        "eve": Origin.from_sender("webhook.ops", "eve"),
    }
    with ScheduleStore(tmp_path / "s") as store:
        svc = ScheduleService(
            store,
            config=lambda: cfg,
            host=cast(ChannelHost, None),
            push=never_pushed,
            events=EventSink(),
            workspace=lambda alias: tmp_path,
        )
        reminders = ReminderService(
            config=lambda: cfg,
            turn_of=lambda turn: ("alpha", origins[turn]),
            grant=lambda agent, origin: (
                None if origin.is_operator else ("schedule_create", "schedule_list")
            ),
            approvals=ApprovalLedger(),
            schedules=svc,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(svc.run)
            for who in ("op", "bob"):
                await reminders.create("alpha", ReminderCreate(f"{who}'s", after="1h", turn=who))

            async def names(turn: str) -> list[str]:
                listed = await reminders.listing("alpha", ReminderListCall(turn=turn))
                return sorted(f"{r.name}:{r.text}" for r in listed.schedules)

            assert await names("bob") == ["reminder-2:bob's"]
            assert await names("eve") == []
            assert await names("op") == ["daily:secret", "reminder-1:op's", "reminder-2:bob's"]
            nursery.cancel_scope.cancel()


async def test_a_reminder_whose_maker_lost_the_grant_is_kept_not_run(tmp_path: Path) -> None:
    """A reload that takes schedule_create from a channel's senders (or reminders from the
    agent's profile) stops the reminders made under it; they run again once it is given
    back. The operator's stop only with the profile's grant."""

    def doc(sender_tools: list[str], grant: bool = True) -> Config:
        made = make_config(
            tmp_path,
            {"alpha": agent_entry(risk_profile="rem", channels=["cli.local", "webhook.ops"])},
            groups={
                "hooks": {
                    "channel": "webhook.ops",
                    "agents": ["alpha"],
                    "external_peers": ["*"],
                    "tools": sender_tools,
                }
            },
        )
        made["risk_profiles"]["rem"] = {"level": "full", **({"reminders": {}} if grant else {})}
        made["channels"]["webhook"] = {"ops": {"listen": "127.0.0.1:8787", "secret_env": "K"}}
        return validate_document(made)

    configs = {
        "granted": doc(["schedule_create"]),
        "revoked": doc([]),
        "no profile grant": doc([], grant=False),
    }
    current = "granted"
    made = [
        ScheduleSpec("alpha", f"reminder-{i}", Every(3600.0), "hi", kind="reminder", created_by=who)
        for i, who in enumerate(("operator", "webhook.ops:bob"), 1)
    ]
    with ScheduleStore(tmp_path / "s") as store:
        svc = ScheduleService(
            store,
            config=lambda: configs[current],
            host=cast(ChannelHost, None),
            push=never_pushed,
            events=EventSink(),
            workspace=lambda alias: tmp_path,
        )

        async def running() -> dict[str, bool]:
            await svc.reload()
            return {v.spec.name: v.next_fire is not None for v in svc.views("alpha")}

        async with trio.open_nursery() as nursery:
            await nursery.start(svc.run)
            for spec in made:
                await svc.add_reminder(spec)
            assert await running() == {"reminder-1": True, "reminder-2": True}
            current = "revoked"
            assert await running() == {"reminder-1": True, "reminder-2": False}
            current = "no profile grant"
            assert await running() == {"reminder-1": False, "reminder-2": False}
            current = "granted"
            assert await running() == {"reminder-1": True, "reminder-2": True}
            assert len(store.load().reminders) == 2
            nursery.cancel_scope.cancel()
