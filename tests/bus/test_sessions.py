"""Session keys are the daemon's, namespaced by origin: whatever an outside sender names,
it is one of its own sessions, never the operator's, a peer's or another sender's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.bus import (
    DEFAULT_SESSION,
    ORIGIN_KINDS,
    Origin,
    SessionNameRefused,
    normalize_sender,
    origin_namespace,
    session_key,
    session_owner,
)
from zeroclaw.turns import MAX_SESSION_BYTES

HOSTILE_NAMES = [
    "default",
    "peer-beta",
    "peer:beta/default",
    "webhook.ops:other/default",
    "a/b:c",
    "x\x00y",
    "~" + "0" * 24,
    "%3A",
    "é" * 300,
    "x" * 4096,
    "",
]
texts = st.text(max_size=300) | st.sampled_from(HOSTILE_NAMES)
senders = st.text(min_size=1, max_size=260) | st.sampled_from(["ci-bot", "CI-BOT", "@ci-bot"])
channels = st.sampled_from(["webhook.ops", "webhook.o", "serial.bench", "webhook.ops2"])


@st.composite
def outside_origins(draw: st.DrawFn) -> Origin:
    kind = draw(st.sampled_from([k for k in ORIGIN_KINDS if k != "operator"]))
    who = draw(senders)
    if kind == "channel":
        return Origin.from_sender(draw(channels), who)
    if kind == "schedule":
        return Origin.schedule(draw(st.sampled_from(["alpha", "b"])), who)
    return Origin.peer(who) if kind == "peer" else Origin.subagent(who)


origins = outside_origins() | st.builds(Origin.operator, st.sampled_from(["cli", "cli.local"]))


def test_every_origin_kind_is_built_and_read_the_old_way() -> None:
    assert Origin("cli").kind == "operator" and Origin("cli").is_operator
    sender = Origin("webhook.ops", "@CI-Bot")
    assert (sender.kind, sender.channel, sender.sender, sender.is_operator) == (
        "channel",
        "webhook.ops",
        "ci-bot",
        False,
    )
    assert Origin.peer("beta").who == "peer:beta" and Origin.subagent("alpha").kind == "subagent"
    with pytest.raises(ValueError, match="not a channel"):
        Origin("peer", "mallory")  # a sender cannot write on the peer channel
    with pytest.raises(ValueError, match="names who"):
        Origin("cli", None, "peer")  # a peer is someone


@given(st.text(max_size=50))
def test_the_sender_is_normalised_once_and_for_good(name: str) -> None:
    once = normalize_sender(name)
    assert normalize_sender(once) == once
    assert Origin.from_sender("webhook.ops", name).sender == once


def test_the_spellings_of_one_sender_are_one_origin_with_one_session() -> None:
    keys = {session_key(Origin("webhook.ops", s), None) for s in ("ci-bot", "CI-BOT", "@ci-bot")}
    assert keys == {"webhook.ops:ci-bot/default"}


@given(outside_origins(), texts)
def test_an_outside_origin_names_only_its_own_sessions(origin: Origin, name: str) -> None:
    key = session_key(origin, name)
    assert key.startswith(origin_namespace(origin))
    assert ":" in key, "every outside key is off the operator's names"
    assert key != DEFAULT_SESSION and not key.startswith("peer-")
    assert 0 < len(key.encode()) <= MAX_SESSION_BYTES and "\x00" not in key
    owner = session_owner(key)
    assert (owner.kind, owner.who) == (origin.kind, origin.who) or "~" in key


@given(origins, texts, origins, texts)
def test_a_key_never_equals_or_falls_in_another_origins_namespace(
    a: Origin, name_a: str, b: Origin, name_b: str
) -> None:
    try:
        key_a, key_b = session_key(a, name_a), session_key(b, name_b)
    except SessionNameRefused:
        return  # an operator name that is not one: refused, no key
    if (a.kind, a.who) != (b.kind, b.who):  # the operator is one origin on every cli channel
        assert key_a != key_b
        if not b.is_operator:
            assert not key_a.startswith(origin_namespace(b))
        if not a.is_operator:
            assert not key_b.startswith(key_a)
    elif (name_a or DEFAULT_SESSION) != (name_b or DEFAULT_SESSION):
        assert key_a != key_b


def test_the_operator_keeps_its_names_and_cannot_name_an_outside_session() -> None:
    operator = Origin.operator("cli.local")
    assert session_key(operator, None) == session_key(operator, "default") == "default"
    assert session_key(operator, "peer-beta") == "peer-beta"  # an old name stays its own
    for outside in ("webhook.ops:ci-bot/default", "peer:beta/default", "x\x00", "y" * 129):
        with pytest.raises(SessionNameRefused):
            session_key(operator, outside)


def test_a_stored_key_says_whose_it_is() -> None:
    assert session_owner("default").kind == "operator"
    key = session_key(Origin("webhook.ops", "CI-Bot"), "nightly/run:1")
    owner = session_owner(key)
    assert (owner.kind, owner.who, owner.name) == ("channel", "webhook.ops:ci-bot", "nightly/run:1")
    assert session_owner(session_key(Origin.peer("beta"), None)).who == "peer:beta"


def test_the_controls_mirror_of_the_owner_kinds_matches_the_bus() -> None:
    from typing import get_args

    from zeroclaw.bus._sessions import SessionOwnerKind
    from zeroclaw.control import SessionOwnerKindName

    def flat(t: object) -> set[str]:
        out: set[str] = set()
        for arg in get_args(t):
            out |= flat(arg) if get_args(arg) else {arg}
        return out

    assert flat(SessionOwnerKind) == flat(SessionOwnerKindName) == {*ORIGIN_KINDS, "unknown"}
