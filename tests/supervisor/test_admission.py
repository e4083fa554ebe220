"""The control server's admission and reaping decisions (finding 6), as a pure table."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.config import ControlLimits
from zeroclaw.supervisor._admission import Admit, ConnectionTable, Refuse


def test_full_of_idle_connections_the_oldest_idle_one_makes_room() -> None:
    table = ConnectionTable(capacity=3, reserved=1, per_peer=8)
    for conn in (1, 2, 3):
        assert table.connect(conn, peer=100 + conn, now=conn) == Admit(False)
    table.request(1, "other", now=10)  # 1 is active again: 2 is now the oldest idle
    table.finished(1, now=11)
    assert table.connect(4, peer=200, now=12) == Admit(False, reap=(2,))
    assert 2 not in table and 4 in table


def test_busy_and_chatting_connections_are_never_reaped_and_status_still_gets_in() -> None:
    table = ConnectionTable(capacity=2, reserved=1, per_peer=8)
    table.connect(1, peer=10, now=0)
    table.connect(2, peer=11, now=0)
    assert table.request(1, "other", now=1)  # running
    assert table.request(2, "chat", now=1)
    table.finished(2, now=2)  # a chat session between turns
    assert not table.times_out(2) and table.times_out(1)
    operator = table.connect(3, peer=12, now=3)
    assert operator == Admit(reserved=True)
    assert not table.request(3, "other", now=4)  # the reserve is for status and stop only
    table.closed(3)
    table.connect(3, peer=12, now=5)
    assert table.request(3, "essential", now=5)
    assert table.finished(3, now=6) is False  # one answer, then it closes
    table.closed(3)
    # With the reserve busy too, a newcomer is refused rather than anyone being cut.
    table.connect(4, peer=13, now=7)
    table.request(4, "essential", now=7)
    assert isinstance(table.connect(5, peer=14, now=8), Refuse)
    assert {1, 2, 4} <= set(table.snapshot())


def test_one_process_holds_at_most_per_peer_and_recycles_its_own() -> None:
    table = ConnectionTable(capacity=10, reserved=1, per_peer=2)
    table.connect(1, peer=7, now=0)
    table.connect(2, peer=7, now=1)
    assert table.connect(3, peer=7, now=2) == Admit(False, reap=(1,))
    table.request(2, "other", now=3)
    table.request(3, "chat", now=3)
    assert isinstance(table.connect(4, peer=7, now=4), Refuse)
    assert table.peer_count(7) == 2


def test_new_limits_apply_to_the_connections_to_come_and_close_none() -> None:
    """`[daemon] control_limits` at a reload: a program allowed more connections gets them
    at once; a lower limit closes nothing open, and the next connect makes room by it."""
    table = ConnectionTable(capacity=10, reserved=1, per_peer=2)
    table.connect(1, peer=7, now=0)
    table.connect(2, peer=7, now=1)
    table.limit(capacity=10, per_peer=4)
    assert table.connect(3, peer=7, now=2) == Admit(False)
    assert table.connect(4, peer=7, now=3) == Admit(False)
    table.limit(capacity=10, per_peer=2)
    assert table.peer_count(7) == 4  # nothing was cut
    assert table.connect(5, peer=7, now=4) == Admit(False, reap=(1,))


def test_the_tables_defaults_are_the_configs() -> None:
    """A server made without the config's limits (tests, tools) admits as the daemon does."""
    table, limits = ConnectionTable(), ControlLimits()
    assert (table.capacity, table.per_peer) == (limits.max_connections, limits.max_per_process)


Op = tuple[str, int, Any]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("connect"), st.integers(0, 30), st.integers(1, 6)),  # conn, peer
        st.tuples(
            st.just("request"),
            st.integers(0, 30),
            st.sampled_from(["essential", "chat", "other"]),
        ),
        st.tuples(st.just("finish"), st.integers(0, 30), st.none()),
        st.tuples(st.just("close"), st.integers(0, 30), st.none()),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(ops, st.integers(1, 6), st.integers(0, 3), st.integers(1, 5))
def test_admission_invariants(script: list[Op], capacity: int, reserved: int, per: int) -> None:
    table = ConnectionTable(capacity=capacity, reserved=reserved, per_peer=per)
    busy: set[int] = set()
    for now, (op, conn, arg) in enumerate(script):
        before = table.snapshot()
        if op == "connect":
            if conn in table:
                continue
            decision = table.connect(conn, peer=arg, now=now)
            fresh = arg not in {peer for peer, *_ in before.values()}
            if isinstance(decision, Admit):
                for victim in decision.reap:
                    _, _, was_busy, chat, _ = before[victim]
                    assert not was_busy and not chat, "reaped a connection in use"
                    busy.discard(victim)
                assert len(decision.reap) <= 1
                if decision.reap and before[decision.reap[0]][0] != arg:
                    # Room made for a newcomer: the oldest idle connection of its pool goes.
                    victim = decision.reap[0]
                    pool = [
                        c
                        for c, (_, res, b, ch, _) in before.items()
                        if res == decision.reserved and not b and not ch
                    ]
                    assert victim == min(pool, key=lambda c: (before[c][4], c))
            else:
                assert not fresh or all(b or ch for (_, _, b, ch, _) in before.values()), (
                    "an operator was refused while an idle connection could have made room"
                )
                assert table.snapshot() == before
        elif conn not in table:
            continue
        elif op == "request" and conn not in busy:
            reserved_conn = before[conn][1]
            served = table.request(conn, arg, now=now)
            if reserved_conn and arg != "essential":
                assert not served
            if served:
                busy.add(conn)
            else:
                table.closed(conn)
        elif op == "finish" and conn in busy:
            keep = table.finished(conn, now=now)
            busy.discard(conn)
            if not keep:
                assert before[conn][1], "only a reserved connection closes after one answer"
                table.closed(conn)
        elif op == "close":
            table.closed(conn)
            busy.discard(conn)
        snap = table.snapshot()
        assert sum(1 for _, res, *_ in snap.values() if not res) <= capacity
        assert sum(1 for _, res, *_ in snap.values() if res) <= reserved
        for peer in {p for p, *_ in snap.values()}:
            assert table.peer_count(peer) <= per
        for c, (_, _, _, chat, _) in snap.items():
            assert table.times_out(c) is not chat
