"""Memory quotas as pure decisions (ADR 0046): whatever sequence of stores, forgets and
appends, usage never exceeds a cap, and what a cap refuses or drops is said."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.config import AgentConfig
from zeroclaw.memory import (
    DEFAULT_QUOTA,
    QUOTA_KINDS,
    Allowed,
    KeepNewest,
    MemoryQuota,
    OverQuota,
    memory_quota,
    sender_share,
    store_decision,
    transcript_decision,
)
from zeroclaw.memory._quota import OUTSIDE_TRANSCRIPT_SHARE

SMALL = MemoryQuota(
    max_records=5,
    max_bytes=200,
    max_session_turns=4,
    max_session_bytes=100,
    max_transcript_bytes=250,
    max_sender_bytes=120,
)
KEYS = ("a", "b", "c", "d", "e", "f", "g")
SESSIONS = ("default", "peer-beta", "webhook:ci-bot/one", "webhook:ci-bot/two", "serial:x/y")


@dataclass
class Model:
    """Usage as a store keeps it, driven only by the decisions."""

    records: dict[str, int] = field(default_factory=dict)  # key -> bytes
    sessions: dict[str, list[int]] = field(default_factory=dict)  # session -> turn sizes

    def store(self, key: str, size: int) -> Allowed | OverQuota:
        decision = store_decision(
            SMALL,
            records=len(self.records),
            record_bytes=sum(self.records.values()),
            new_bytes=size,
            old_bytes=self.records.get(key),
        )
        if isinstance(decision, Allowed):
            self.records[key] = size
        return decision

    def append(self, session: str, sizes: list[int]) -> KeepNewest | OverQuota:
        held = self.sessions.get(session, [])
        share = sender_share(session)
        decision = transcript_decision(
            SMALL,
            turns=len(held),
            session_bytes=sum(held),
            oldest=iter(held),
            new=sizes,
            transcript_bytes=sum(sum(t) for t in self.sessions.values()),
            share_bytes=None if share is None else self.share(share),
            outside_bytes=self.outside(),
        )
        if isinstance(decision, KeepNewest):
            assert decision.dropped_bytes == sum(held[: decision.drop])
            self.sessions[session] = held[decision.drop :] + sizes
        return decision

    def share(self, share: str) -> int:
        return sum(sum(t) for s, t in self.sessions.items() if sender_share(s) == share)

    def outside(self) -> int:
        return sum(sum(t) for s, t in self.sessions.items() if sender_share(s) is not None)

    def within_caps(self) -> None:
        assert len(self.records) <= SMALL.max_records
        assert sum(self.records.values()) <= SMALL.max_bytes
        for turns in self.sessions.values():
            assert len(turns) <= SMALL.max_session_turns
            assert sum(turns) <= SMALL.max_session_bytes
        assert sum(sum(t) for t in self.sessions.values()) <= SMALL.max_transcript_bytes
        for session in self.sessions:
            share = sender_share(session)
            if share is not None:
                assert self.share(share) <= SMALL.max_sender_bytes
        assert self.outside() <= SMALL.max_transcript_bytes * OUTSIDE_TRANSCRIPT_SHARE


Op = tuple[str, str, list[int]]
OPS = st.one_of(
    st.tuples(
        st.just("store"),
        st.sampled_from(KEYS),
        st.lists(st.integers(1, 120), min_size=1, max_size=1),
    ),
    st.tuples(st.just("forget"), st.sampled_from(KEYS), st.just([0])),
    st.tuples(
        st.just("append"),
        st.sampled_from(SESSIONS),
        st.lists(st.integers(0, 70), min_size=1, max_size=6),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=60))
def test_usage_never_exceeds_a_cap_whatever_the_sequence(ops: list[Op]) -> None:
    model = Model()
    for kind, name, sizes in ops:
        if kind == "store":
            decision = model.store(name, sizes[0])
            if isinstance(decision, OverQuota):
                assert decision.kind in ("records", "bytes") and decision.detail
        elif kind == "forget":
            model.records.pop(name, None)
        else:
            outcome = model.append(name, sizes)
            if isinstance(outcome, OverQuota):
                assert outcome.kind in QUOTA_KINDS and outcome.detail
        model.within_caps()


def test_a_record_past_the_count_cap_is_refused_and_a_replacement_is_not() -> None:
    full = {"records": 5, "record_bytes": 50}
    refused = store_decision(SMALL, **full, new_bytes=10, old_bytes=None)
    assert isinstance(refused, OverQuota) and refused.kind == "records" and refused.cap == 5
    assert isinstance(store_decision(SMALL, **full, new_bytes=10, old_bytes=10), Allowed)


def test_a_store_that_shrinks_is_allowed_over_a_lowered_cap() -> None:
    # An operator lowered max_bytes under what the agent holds: it can still clean up.
    over = {"records": 2, "record_bytes": 500}
    assert isinstance(store_decision(SMALL, **over, new_bytes=10, old_bytes=300), Allowed)
    grown = store_decision(SMALL, **over, new_bytes=301, old_bytes=300)
    assert isinstance(grown, OverQuota) and grown.kind == "bytes"


def test_a_transcript_keeps_its_newest_turns() -> None:
    decision = transcript_decision(
        SMALL,
        turns=4,
        session_bytes=40,
        oldest=iter([10, 10, 10, 10]),
        new=[10, 10],
        transcript_bytes=40,
        share_bytes=None,
    )
    assert decision == KeepNewest(drop=2, dropped_bytes=20)


def test_an_append_larger_than_a_session_may_hold_is_refused() -> None:
    decision = transcript_decision(
        SMALL,
        turns=0,
        session_bytes=0,
        oldest=iter([]),
        new=[101],
        transcript_bytes=0,
        share_bytes=None,
    )
    assert isinstance(decision, OverQuota) and decision.kind == "session_bytes"


def test_a_sender_past_its_share_is_refused_though_its_session_has_room() -> None:
    decision = transcript_decision(
        SMALL,
        turns=0,
        session_bytes=0,
        oldest=iter([]),
        new=[30],
        transcript_bytes=100,
        share_bytes=100,
    )
    assert isinstance(decision, OverQuota) and decision.kind == "sender_bytes"


def test_only_origin_namespaced_session_keys_have_a_sender_share() -> None:
    assert sender_share("webhook:ci-bot/default") == "webhook:ci-bot"
    assert sender_share("serial:ttyUSB0/x/y") == "serial:ttyUSB0"
    assert sender_share("default") is None
    assert sender_share("notes/today") is None  # no `<channel>:` owner
    assert sender_share("webhook:ci-bot") is None  # no session name: not a namespaced key


def test_config_defaults_are_the_memory_default_quota() -> None:
    factory = AgentConfig.model_fields["memory"].default_factory
    assert factory is not None
    assert memory_quota(factory()) == DEFAULT_QUOTA  # type: ignore[call-arg]


def test_outside_senders_together_keep_room_for_the_operator() -> None:
    # Each of many senders within its own share, together past their part of the cap:
    # refused, while the operator's session still has the rest.
    outside = int(SMALL.max_transcript_bytes * OUTSIDE_TRANSCRIPT_SHARE)
    common = {"turns": 0, "session_bytes": 0, "oldest": iter([]), "new": [10]}
    refused = transcript_decision(
        SMALL, **common, transcript_bytes=outside, share_bytes=0, outside_bytes=outside
    )
    assert isinstance(refused, OverQuota) and refused.kind == "sender_bytes"
    assert refused.cap == outside and "operator" in refused.detail
    operator = transcript_decision(
        SMALL,
        turns=0,
        session_bytes=0,
        oldest=iter([]),
        new=[10],
        transcript_bytes=outside,
        share_bytes=None,
        outside_bytes=outside,
    )
    assert operator == KeepNewest(0, 0)
