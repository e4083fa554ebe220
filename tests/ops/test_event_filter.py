"""`zeroclaw events`' filter and wording: pure functions over typed events."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, get_args

import msgspec
import pytest

from zeroclaw.events import (
    AgentTransition,
    Event,
    MemoryOperation,
    Published,
    ReloadApplied,
    RouteRefused,
)
from zeroclaw.ops import (
    EVENT_KINDS,
    KIND_NAMES,
    EventFilter,
    describe,
    event_agents,
    event_json,
    event_kind,
    event_line,
    unknown_kinds,
)

KILLED = AgentTransition("alpha", "running", "backoff", "killed by signal 9")
REFUSED = RouteRefused(sender="alpha", to="gamma", code="not_peers", channel="cli")
RELOAD = ReloadApplied(outcome="ok", added=("delta",), changed=("beta",))
PURGE = MemoryOperation(agent="beta", op="purge")
EVERY = [KILLED, REFUSED, RELOAD, PURGE]


def published(events: list[Any]) -> list[Published]:
    return [Published(seq, 1_700_000_000.0 + seq, e) for seq, e in enumerate(events, 1)]


def test_the_kinds_are_the_event_unions_tags_and_their_families() -> None:
    tags = {t.__struct_config__.tag for t in get_args(Event)}
    assert set(EVENT_KINDS) == tags
    assert {"agent.transition", "agent", "route.refused", "route", "reload", "memory"} <= set(
        KIND_NAMES
    )
    assert set(KIND_NAMES) == tags | {t.split(".")[0] for t in tags}


def test_a_kind_matches_its_tag_or_the_family_before_the_dot() -> None:
    assert [event_kind(e) for e in EVERY] == [
        "agent.transition",
        "route.refused",
        "reload",
        "memory",
    ]
    assert EventFilter.of(kinds=["agent"]).matches(KILLED)
    assert EventFilter.of(kinds=["agent.transition"]).matches(KILLED)
    assert not EventFilter.of(kinds=["agent"]).matches(PURGE)
    # A family is the whole part before the dot, not any prefix.
    assert not EventFilter.of(kinds=["agent.trans"]).matches(KILLED)
    assert not EventFilter.of(kinds=["age"]).matches(KILLED)


def test_several_kinds_are_any_of_them() -> None:
    wanted = EventFilter.of(kinds=["route", "memory"])
    assert [wanted.matches(e) for e in EVERY] == [False, True, False, True]


def test_an_agent_matches_every_field_that_names_one() -> None:
    assert event_agents(KILLED) == {"alpha"}
    assert event_agents(REFUSED) == {"alpha", "gamma"}
    assert event_agents(RELOAD) == {"delta", "beta"}
    assert event_agents(PURGE) == {"beta"}
    assert [EventFilter.of(agents=["beta"]).matches(e) for e in EVERY] == [
        False,
        False,
        True,
        True,
    ]
    assert EventFilter.of(agents=["gamma"]).matches(REFUSED)  # the refused destination


def test_agents_and_kinds_must_both_match() -> None:
    wanted = EventFilter.of(agents=["alpha"], kinds=["agent"])
    assert [wanted.matches(e) for e in EVERY] == [True, False, False, False]


def test_no_filter_matches_everything() -> None:
    assert all(EventFilter().matches(e) for e in EVERY)


def test_unknown_kinds_are_named_in_order() -> None:
    assert unknown_kinds(["agent", "agnt", "memory", "route.refusd"]) == ["agnt", "route.refusd"]
    assert unknown_kinds(KIND_NAMES) == []


@pytest.mark.parametrize(("limit", "seqs"), [(None, [1, 3, 5]), (2, [3, 5]), (0, [])])
def test_select_keeps_the_newest_matching_oldest_first(limit: int | None, seqs: list[int]) -> None:
    items = published([KILLED, PURGE, KILLED, REFUSED, KILLED])
    chosen = EventFilter.of(kinds=["agent"]).select(items, limit)
    assert [p.seq for p in chosen] == seqs


def test_each_kind_reads_as_words() -> None:
    assert describe(KILLED) == "alpha running -> backoff (killed by signal 9)"
    assert describe(AgentTransition("alpha", "backoff", "starting")) == "alpha backoff -> starting"
    assert describe(REFUSED) == "alpha -> gamma refused: not_peers on cli"
    assert describe(RELOAD) == "ok, added delta, changed beta"
    assert (
        describe(ReloadApplied(outcome="reload_failed", errors=("bad key", "bad value")))
        == "reload_failed, errors: bad key; bad value"
    )
    assert describe(PURGE) == "beta purge ok"
    assert (
        describe(MemoryOperation(agent="x", op="get", ok=False, code="unknown_agent"))
        == "x get failed: unknown_agent"
    )


class _NewKind(msgspec.Struct, frozen=True, tag_field="kind", tag="invocation.state"):
    invocation: str
    state: str
    agents: tuple[str, ...] = ()
    note: str = ""


def test_a_kind_without_words_reads_as_its_fields() -> None:
    event: Any = _NewKind("inv-1", "running", ("a", "b"))
    assert describe(event) == "invocation=inv-1 state=running agents=a,b"


def test_a_line_has_the_local_time_and_the_date_only_for_another_day() -> None:
    item = published([KILLED])[0]
    when = datetime.fromtimestamp(item.at)
    assert event_line(item, today=when) == (
        f"{when:%H:%M:%S} agent.transition alpha running -> backoff (killed by signal 9)"
    )
    assert event_line(item, today=when + timedelta(days=1)).startswith(f"{when:%Y-%m-%d %H:%M:%S} ")


def test_json_is_the_published_item_with_its_kind() -> None:
    item = published([PURGE])[0]
    assert event_json(item) == {
        "seq": 1,
        "at": item.at,
        "event": {"kind": "memory", "agent": "beta", "op": "purge"},
    }


def test_every_kind_has_words_not_a_field_dump() -> None:
    from zeroclaw.events import (
        AgentExited,
        DiscoveryCompleted,
        InvocationFinished,
        RegistrationDecided,
        TurnFinished,
    )
    from zeroclaw.ops._event_filter import describe

    assert describe(AgentExited("alpha", "signal", "killed by signal 9")) == (
        "alpha exited (signal): killed by signal 9"
    )
    assert describe(TurnFinished("alpha", "cli.local", "ok", 0.25)) == (
        "alpha turn on cli.local: ok in 0.25s"
    )
    assert describe(InvocationFinished("summarizer", "failed", "subagent_timed_out")) == (
        "summarizer failed: subagent_timed_out"
    )
    assert describe(DiscoveryCompleted(3, 1, 1, 1, 0, added=("cli_adapter:x",))) == (
        "3 found: 1 registered, 1 rejected, 1 shown only, 0 shadowed; added cli_adapter:x"
    )
    decided = RegistrationDecided("cli_adapter:x", "rejected", "capability_unknown", "x")
    assert describe(decided) == "cli_adapter:x rejected (capability_unknown)"
