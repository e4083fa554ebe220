"""The pin book, pure: trust on first use, a changed schema withheld and reported once, the
operator's trust, and the bounds a hostile agent meets."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.pins import BadListing, PinBook, PinKey, PinLimit, ToolSeen
from zeroclaw.pins._book import MAX_REPORTED_CHANGES


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


A, B, C = digest("a"), digest("b"), digest("c")


def seen(name: str, d: str, read_only: bool = False, description: str = "") -> ToolSeen:
    return ToolSeen(name, d, read_only, description)


def test_a_tool_first_seen_is_pinned_trusted_and_offered() -> None:
    book = PinBook()
    got = book.observe("alpha", "git", [seen("status", A, True, "git status")], now=1.0)
    assert (got.offered, got.withheld, got.changes, got.added, got.dirty) == (
        ("status",),
        (),
        (),
        ("status",),
        True,
    )
    pin = book.get(PinKey("alpha", "git", "status"))
    assert pin is not None
    assert (pin.first_digest, pin.trusted_digest, pin.latest_digest) == (A, A, A)
    assert (pin.read_only, pin.trusted_read_only, pin.description) == (True, True, "git status")
    assert (pin.first_seen, pin.changed_at, pin.trusted_at, pin.withheld) == (
        1.0,
        None,
        None,
        False,
    )


def test_the_same_schema_again_is_offered_and_changes_nothing() -> None:
    book = PinBook()
    book.observe("alpha", "git", [seen("status", A)], now=1.0)
    again = book.observe("alpha", "git", [seen("status", A)], now=2.0)
    assert (again.offered, again.withheld, again.changes, again.dirty) == (
        ("status",),
        (),
        (),
        False,
    )


def test_a_changed_digest_is_withheld_and_reported_once() -> None:
    book = PinBook()
    book.observe("alpha", "git", [seen("status", A), seen("log", C)], now=1.0)
    changed = book.observe("alpha", "git", [seen("status", B), seen("log", C)], now=2.0)
    assert (changed.offered, changed.withheld) == (("log",), ("status",))
    assert [(c.key, c.trusted_digest, c.digest) for c in changed.changes] == [
        (PinKey("alpha", "git", "status"), A, B)
    ]
    assert changed.dirty
    pin = book.get(PinKey("alpha", "git", "status"))
    assert pin is not None and pin.withheld
    assert (pin.trusted_digest, pin.latest_digest, pin.changed_at) == (A, B, 2.0)
    # The same changed schema again: still withheld, not reported again, nothing to write.
    quiet = book.observe("alpha", "git", [seen("status", B), seen("log", C)], now=3.0)
    assert (quiet.withheld, quiet.changes, quiet.dirty) == (("status",), (), False)
    # Yet another schema is a new change.
    third = book.observe("alpha", "git", [seen("status", C), seen("log", C)], now=4.0)
    assert [(c.trusted_digest, c.digest) for c in third.changes] == [(A, C)]


def test_attack_a_server_flipping_its_schema_is_reported_a_bounded_number_of_times() -> None:
    # A server that lists another schema at every listing (once a second, the host's
    # spacing) made one mcp.schema_changed event each: it pushed everything else out of
    # `zeroclaw events` (a ring). The pin still follows every listing.
    book = PinBook()
    book.observe("alpha", "git", [seen("status", A)], now=1.0)
    reported = 0
    for n in range(3 * MAX_REPORTED_CHANGES):
        flip = book.observe("alpha", "git", [seen("status", (B, C)[n % 2])], now=2.0 + n)
        assert flip.withheld == ("status",) and flip.dirty
        reported += len(flip.changes)
    assert reported == MAX_REPORTED_CHANGES
    pin = book.get(PinKey("alpha", "git", "status"))
    assert pin is not None and pin.latest_digest == (B, C)[(3 * MAX_REPORTED_CHANGES - 1) % 2]
    # trusted again, a later change is reported again
    book.trust("git", now=100.0)
    again = book.observe("alpha", "git", [seen("status", A)], now=101.0)
    assert len(again.changes) == 1


def test_a_schema_back_to_the_trusted_one_is_offered_again() -> None:
    book = PinBook()
    book.observe("alpha", "git", [seen("status", A)], now=1.0)
    book.observe("alpha", "git", [seen("status", B)], now=2.0)
    back = book.observe("alpha", "git", [seen("status", A)], now=3.0)
    assert (back.offered, back.withheld, back.changes, back.dirty) == (("status",), (), (), True)
    pin = book.get(PinKey("alpha", "git", "status"))
    assert pin is not None and not pin.withheld and pin.changed_at is None


def test_a_tool_that_starts_to_claim_read_only_is_a_change() -> None:
    """The digest does not cover annotations: a tool's readOnlyHint is pinned beside it, or
    a writing tool could reach readonly agents by claiming read-only one day."""
    book = PinBook()
    book.observe("alpha", "git", [seen("commit", A, read_only=False)], now=1.0)
    claims = book.observe("alpha", "git", [seen("commit", A, read_only=True)], now=2.0)
    assert claims.withheld == ("commit",)
    assert [(c.trusted_read_only, c.read_only) for c in claims.changes] == [(False, True)]


def test_trust_makes_the_latest_schema_the_trusted_one() -> None:
    book = PinBook()
    book.observe("alpha", "git", [seen("status", A), seen("log", C)], now=1.0)
    book.observe("alpha", "git", [seen("status", B, True), seen("log", C)], now=2.0)
    outcome = book.trust("git", now=5.0)
    assert outcome.matched == (PinKey("alpha", "git", "log"), PinKey("alpha", "git", "status"))
    assert outcome.trusted == (PinKey("alpha", "git", "status"),)
    pin = book.get(PinKey("alpha", "git", "status"))
    assert pin is not None
    assert (pin.trusted_digest, pin.trusted_read_only, pin.trusted_at, pin.first_digest) == (
        B,
        True,
        5.0,
        A,
    )
    offered = book.observe("alpha", "git", [seen("status", B, True), seen("log", C)], now=6.0)
    assert (offered.offered, offered.withheld) == (("status", "log"), ())


def test_attack_trust_with_a_digest_takes_only_the_schema_reviewed() -> None:
    book = PinBook()
    key = PinKey("alpha", "git", "status")
    book.observe("alpha", "git", [seen("status", A)], now=1.0)
    book.observe("alpha", "git", [seen("status", B)], now=2.0)  # what the operator reads
    book.observe("alpha", "git", [seen("status", C)], now=3.0)  # what it lists meanwhile
    stale = book.trust("git", digest=B[:12], now=4.0)
    assert (stale.matched, stale.trusted, stale.stale) == ((key,), (), (key,))
    pin = book.get(key)
    assert pin is not None and pin.withheld and pin.trusted_digest == A
    done = book.trust("git", digest=C[:12], now=5.0)
    assert (done.trusted, done.stale) == ((key,), ())


def test_trust_selects_by_tool_and_agent() -> None:
    book = PinBook()
    for agent in ("alpha", "beta"):
        book.observe(agent, "git", [seen("status", A), seen("log", A)], now=1.0)
        book.observe(agent, "git", [seen("status", B), seen("log", B)], now=2.0)
    outcome = book.trust("git", tool="log", agent="beta", now=3.0)
    assert outcome.trusted == (PinKey("beta", "git", "log"),)
    assert [k for k, p in book.items() if p.withheld] == [
        PinKey("alpha", "git", "log"),
        PinKey("alpha", "git", "status"),
        PinKey("beta", "git", "status"),
    ]
    assert book.trust("git", tool="nope", now=4.0).matched == ()
    assert book.trust("time", now=4.0).matched == ()


def test_agents_and_servers_are_pinned_apart() -> None:
    book = PinBook()
    book.observe("alpha", "git", [seen("status", A)], now=1.0)
    beta = book.observe("beta", "git", [seen("status", B)], now=1.0)
    other = book.observe("alpha", "hg", [seen("status", B)], now=1.0)
    assert beta.offered == other.offered == ("status",)  # each its own first sight


def test_tools_the_agent_could_not_offer_are_skipped() -> None:
    book = PinBook()
    got = book.observe("alpha", "git", [seen("bad name/with slash", A), seen("", A)], now=1.0)
    assert (got.offered, got.withheld, got.dirty, len(book)) == ((), (), False, 0)


@pytest.mark.parametrize(
    "tools",
    [
        [seen("status", "not-a-digest")],
        [seen("status", A.upper())],
        [seen("status", A), seen("status", B)],
    ],
)
def test_a_listing_that_is_not_one_is_refused_and_changes_nothing(tools: list[ToolSeen]) -> None:
    book = PinBook()
    book.observe("alpha", "git", [seen("status", C)], now=1.0)
    before = book.items()
    with pytest.raises(BadListing):
        book.observe("alpha", "git", tools, now=2.0)
    assert book.items() == before


def test_a_flood_of_tools_is_refused_whole() -> None:
    book = PinBook(max_tools=3)
    book.observe("alpha", "git", [seen("t1", A), seen("t2", A)], now=1.0)
    with pytest.raises(PinLimit) as refused:
        book.observe("alpha", "git", [seen(f"t{i}", A) for i in range(1, 5)], now=2.0)
    assert refused.value.code == "mcp_pin_limit"
    assert [k.tool for k, _ in book.items()] == ["t1", "t2"]  # nothing of it applied
    # Up to the bound is fine; known tools do not count twice.
    book.observe("alpha", "git", [seen("t1", A), seen("t2", A), seen("t3", A)], now=3.0)
    assert len(book) == 3


def test_servers_per_agent_are_bounded() -> None:
    book = PinBook(max_servers=2)
    book.observe("alpha", "s1", [seen("t", A)], now=1.0)
    book.observe("alpha", "s2", [seen("t", A)], now=1.0)
    with pytest.raises(PinLimit):
        book.observe("alpha", "s3", [seen("t", A)], now=1.0)
    book.observe("alpha", "s1", [seen("u", A)], now=1.0)  # a known server still grows
    book.observe("beta", "s3", [seen("t", A)], now=1.0)  # another agent has its own bound


def test_a_long_description_is_cut() -> None:
    book = PinBook()
    book.observe("alpha", "git", [seen("status", A, description="x" * 10_000)], now=1.0)
    pin = book.get(PinKey("alpha", "git", "status"))
    assert pin is not None and pin.description == "x" * 200


# --- properties ------------------------------------------------------------------------------

NAMES = st.sampled_from(["t1", "t2", "t3", "t4"])
DIGESTS = st.sampled_from([A, B, C])
LISTING = st.dictionaries(NAMES, st.tuples(DIGESTS, st.booleans()), max_size=4)
STEP = st.one_of(
    st.tuples(st.just("observe"), st.sampled_from(["alpha", "beta"]), LISTING),
    st.tuples(st.just("trust"), st.sampled_from(["alpha", "beta", None]), st.none()),
)


@given(st.lists(STEP, max_size=25))
def test_offered_is_exactly_what_matches_the_trusted_pin(
    steps: list[tuple[str, object, object]],
) -> None:
    """Whatever the order of listings and trusts: a tool is offered iff its listing is its
    trusted pin (first sight or the operator's trust), its first digest never moves, and a
    change is reported only when the listing differs from both the trust and the last one."""
    book = PinBook()
    first: dict[tuple[str, str], str] = {}
    for now, (op, agent, listing) in enumerate(steps):
        if op == "trust":
            assert agent is None or isinstance(agent, str)
            book.trust("git", agent=agent, now=float(now))
            for _key, pin in book.select("git", agent=agent):
                assert not pin.withheld
            continue
        assert isinstance(agent, str) and isinstance(listing, dict)
        before = {k.tool: p for k, p in book.select("git", agent=agent)}
        tools = [seen(name, d, ro) for name, (d, ro) in listing.items()]
        got = book.observe(agent, "git", tools, now=float(now))
        assert set(got.offered) | set(got.withheld) == set(listing)
        assert not set(got.offered) & set(got.withheld)
        for name, (d, ro) in listing.items():
            pin = book.get(PinKey(agent, "git", name))
            assert pin is not None
            first.setdefault((agent, name), d)
            assert pin.first_digest == first[(agent, name)]
            old = before.get(name)
            trusted = (d, ro) == ((old.trusted_digest, old.trusted_read_only) if old else (d, ro))
            assert (name in got.offered) == trusted
            reported = name in {c.key.tool for c in got.changes}
            assert reported == (
                old is not None and not trusted and (d, ro) != (old.latest_digest, old.read_only)
            )
            assert (pin.latest_digest, pin.read_only) == (d, ro)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2", "s3", "s4"]),
            st.lists(st.integers(0, 40), max_size=30),
        ),
        max_size=20,
    )
)
def test_no_sequence_of_listings_grows_the_book_past_its_bounds(
    calls: list[tuple[str, list[int]]],
) -> None:
    """Whatever an agent lists, in whatever order: at most max_tools a server and
    max_servers an agent, and a refused listing leaves the book exactly as it was."""
    book = PinBook(max_tools=16, max_servers=3)
    for server, numbers in calls:
        before = book.items()
        tools = [seen(f"t{n}", A) for n in dict.fromkeys(numbers)]
        try:
            book.observe("mallory", server, tools, now=1.0)
        except PinLimit:
            assert book.items() == before
        servers = {k.server for k, _ in book.items()}
        assert len(servers) <= 3
        for name in servers:
            assert len(book.select(name)) <= 16
