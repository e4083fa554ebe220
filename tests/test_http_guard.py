"""The pure decisions of every HTTP listener (ADR 0045): who gets a connection, when a slow
client is cut, who holds the bearer token."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw._http_guard import (
    MAX_RESERVE,
    MIN_RESERVE,
    ConnectionClock,
    admit_connection,
    body_deadline,
    check_bearer,
    descriptor_reserve,
)


@given(st.integers(1, 1 << 20))
def test_the_reserve_is_an_eighth_within_bounds_and_never_the_whole_limit(limit: int) -> None:
    reserve = descriptor_reserve(limit)
    assert 1 <= reserve <= MAX_RESERVE
    assert reserve < limit or limit == 1
    if limit >= 2 * MIN_RESERVE:
        assert reserve >= MIN_RESERVE


@given(
    st.integers(0, 5000), st.integers(1, 5000), st.integers(0, 1 << 16), st.integers(16, 1 << 16)
)
def test_a_connection_is_admitted_only_under_the_cap_and_above_the_reserve(
    open_now: int, cap: int, fds: int, limit: int
) -> None:
    verdict = admit_connection(open_now, cap, fds, limit)
    if fds >= limit - descriptor_reserve(limit):
        assert verdict == "descriptors_low"  # the reserve wins over everything
    elif open_now >= cap:
        assert verdict == "over_cap"
    else:
        assert verdict == "accept"


def test_descriptors_low_stops_admission_at_the_limit_less_the_reserve() -> None:
    limit = 256
    edge = limit - descriptor_reserve(limit)
    assert admit_connection(0, 64, edge - 1, limit) == "accept"
    assert admit_connection(0, 64, edge, limit) == "descriptors_low"


def test_an_idle_connection_is_cut_after_idle_seconds_without_a_byte() -> None:
    clock = ConnectionClock(idle=5.0, header=10.0, since=100.0)
    assert clock.deadline() == 105.0 and clock.expired() == "idle_timeout"


def test_a_slowloris_header_is_cut_by_the_header_deadline_from_its_first_byte() -> None:
    clock = ConnectionClock(idle=5.0, header=10.0, since=0.0)
    clock.received(b"P", 1.0)
    assert clock.phase == "headers" and clock.deadline() == 11.0
    for second in range(2, 30):  # one byte a second never moves the deadline
        clock.received(b"x", float(second))
        assert clock.deadline() == 11.0
    assert clock.expired() == "header_timeout"


@settings(max_examples=300)
@given(st.binary(max_size=64), st.binary(max_size=64), st.integers(1, 8))
def test_the_end_of_the_headers_is_found_however_the_reads_split_it(
    before: bytes, after: bytes, chunk: int
) -> None:
    before = before.replace(b"\r\n\r\n", b"")
    while b"\r\n\r\n" in before + b"\r":
        before = before[:-1]
    stream = before + b"\r\n\r\n" + after
    clock = ConnectionClock(idle=5.0, header=10.0)
    for i in range(0, len(stream), chunk):
        clock.received(stream[i : i + chunk], 1.0)
    assert clock.phase == "request" and clock.deadline() is None


def test_a_response_makes_the_connection_idle_but_an_interim_100_does_not() -> None:
    clock = ConnectionClock(idle=5.0, header=10.0)
    clock.received(b"POST / HTTP/1.1\r\nexpect: 100-continue\r\n\r\n", 1.0)
    clock.sent(b"HTTP/1.1 100 Continue\r\n\r\n", 2.0)
    assert clock.phase == "request"
    clock.sent(b"HTTP/1.1 200 OK\r\n", 3.0)
    assert clock.phase == "idle" and clock.deadline() == 8.0
    clock.received(b"", 4.0)  # EOF is no request
    assert clock.phase == "idle"


def test_the_body_deadline_is_whole_request_not_per_byte() -> None:
    assert body_deadline(100.0, 30.0) == 130.0


def test_the_bearer_token_must_match_exactly() -> None:
    token = b"s3cret"
    assert check_bearer([(b"authorization", b"Bearer s3cret")], token)
    assert check_bearer([(b"Authorization", b"bearer  s3cret ")], token)
    assert check_bearer([(b"x", b"y"), (b"authorization", b"Bearer s3cret")], token)
    for value in (b"Bearer s3cre", b"Bearer s3cret2", b"Basic s3cret", b"s3cret", b"Bearer"):
        assert not check_bearer([(b"authorization", value)], token)
    assert not check_bearer([], token)
    assert not check_bearer([(b"authorization", b"Bearer ")], b"")  # no token, no one
