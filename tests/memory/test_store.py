"""The LMDB store with real files: operations, scope, sessions, map growth, reopen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.bodies import write_args
from zeroclaw.memory import (
    MemoryInputError,
    MemoryStore,
    OperatorScope,
    Scope,
    ScopeError,
    WriteOp,
    new_id,
    tokenize,
)

ALPHA = Scope("alpha")
BETA = Scope("beta", readable=frozenset({"alpha"}))
GAMMA = Scope("gamma")
OP = OperatorScope()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore(tmp_path / "memory", map_size=1 << 22)
    yield s
    s.close()


def write(
    store: MemoryStore, scope: Scope, kind: str = "store", now: float | None = None, **args: Any
) -> Any:
    op = WriteOp(scope, write_args(kind, args))
    store.apply_writes([op], now=now)
    if op.error:
        raise op.error
    return op.result


def test_store_get_upsert_keeps_id_and_created(store: MemoryStore) -> None:
    first = write(store, ALPHA, key="k", content="the sky is blue", now=100.0)
    second = write(store, ALPHA, key="k", content="the sky is grey", now=200.0)
    assert second.id == first.id and second.created_at == 100.0 and second.updated_at == 200.0
    got = store.get(ALPHA, key="k")
    assert got is not None and got.content == "the sky is grey" and got.agent == "alpha"
    assert store.get(ALPHA, id=first.id) == got
    assert store.stats(OP)["alpha"]["records"] == 1


def test_recall_ranks_by_bm25_and_updates_its_index(store: MemoryStore) -> None:
    write(store, ALPHA, key="a", content="deploy the payment service on friday", now=1000.0)
    write(store, ALPHA, key="b", content="payment payment payment retries", now=1000.0)
    write(store, ALPHA, key="c", content="lunch menu", now=1000.0)
    hits = store.recall(ALPHA, "payment", now=1000.0)
    assert [h.record.key for h in hits] == ["b", "a"]
    assert store.recall(ALPHA, "menu", now=1000.0)[0].record.key == "c"
    write(store, ALPHA, key="c", content="dinner plans", now=1001.0)  # upsert re-indexes
    assert store.recall(ALPHA, "menu") == []
    assert store.recall(ALPHA, "the of and") == []  # only stopwords


def test_recency_breaks_ties(store: MemoryStore) -> None:
    write(store, ALPHA, key="old", content="quarterly report", now=0.0)
    write(store, ALPHA, key="new", content="quarterly report", now=10 * 86400.0)
    hits = store.recall(ALPHA, "quarterly", now=10 * 86400.0)
    assert [h.record.key for h in hits] == ["new", "old"] and hits[0].score > hits[1].score


def test_list_by_category_time_and_pages(store: MemoryStore) -> None:
    for i in range(10):
        write(
            store,
            ALPHA,
            key=f"k{i}",
            content=f"note {i}",
            category="daily" if i % 2 else "core",
            now=100.0 + i,
        )
    newest = store.list_records(ALPHA, limit=3)
    assert [r.key for r in newest] == ["k9", "k8", "k7"]
    page2 = store.list_records(ALPHA, limit=3, before=newest[-1].id)
    assert [r.key for r in page2] == ["k6", "k5", "k4"]
    assert [r.key for r in store.list_records(ALPHA, category="daily", limit=10)] == [
        "k9",
        "k7",
        "k5",
        "k3",
        "k1",
    ]
    assert [r.key for r in store.list_records(ALPHA, since=103.0, until=105.0)] == [
        "k5",
        "k4",
        "k3",
    ]


def test_forget_only_reaches_own_namespace(store: MemoryStore) -> None:
    mine = write(store, ALPHA, key="secret", content="alpha only")
    assert write(store, GAMMA, "forget", key="secret") is False
    # Knowing the id is not enough: a typed refusal (ADR 0039), the record untouched.
    with pytest.raises(ScopeError, match="another agent's memory"):
        write(store, GAMMA, "forget", id=mine.id)
    assert write(store, GAMMA, "forget", id="01J0000000000000000000000Z") is False  # no such id
    assert store.get(ALPHA, key="secret") is not None
    assert write(store, ALPHA, "forget", key="secret") is True
    assert store.get(ALPHA, key="secret") is None
    assert store.recall(ALPHA, "alpha") == []


def test_grants_are_read_only_and_labelled(store: MemoryStore) -> None:
    write(store, ALPHA, key="fact", content="the launch code is fish")
    hits = store.recall(BETA, "launch", namespaces=["beta", "alpha"])
    assert [(h.record.agent, h.record.key) for h in hits] == [("alpha", "fact")]
    assert store.get(BETA, key="fact", namespace="alpha") is not None
    assert write(store, BETA, "forget", key="fact") is False  # beta's forget reaches beta only
    write(store, BETA, key="fact", content="beta's own")  # lands in beta, not alpha
    assert store.get(ALPHA, key="fact").content == "the launch code is fish"  # type: ignore[union-attr]


def test_ungranted_reads_fail_closed(store: MemoryStore) -> None:
    write(store, ALPHA, key="fact", content="private")
    for call in (
        lambda: store.recall(GAMMA, "private", namespaces=["alpha"]),
        lambda: store.get(GAMMA, key="fact", namespace="alpha"),
        lambda: store.list_records(GAMMA, namespaces=["alpha"]),
        lambda: list(store.export(GAMMA, "alpha")),
    ):
        with pytest.raises(ScopeError):
            call()
    assert store.stats(GAMMA) == {}


def test_purge_is_operator_only(store: MemoryStore) -> None:
    write(store, ALPHA, key="a", content="x")
    with pytest.raises(ScopeError):
        store.purge(ALPHA, "alpha")  # type: ignore[arg-type]
    assert store.purge(OP, "alpha") == 1
    assert store.get(ALPHA, key="a") is None
    write(store, ALPHA, key="a", content="again")  # the namespace can be used again
    assert store.get(ALPHA, key="a") is not None


def test_bad_input_fails_alone_in_a_batch(store: MemoryStore) -> None:
    ops = [
        WriteOp(ALPHA, write_args("store", {"key": "", "content": "x"})),
        WriteOp(ALPHA, write_args("store", {"key": "ok", "content": "fine"})),
        WriteOp(ALPHA, write_args("store", {"key": "big", "content": "x" * (300 * 1024)})),
        WriteOp(
            ALPHA, write_args("store", {"key": "cat", "content": "x", "category": "no spaces"})
        ),
    ]
    store.apply_writes(ops)
    assert [type(op.error) for op in ops] == [
        MemoryInputError,
        type(None),
        MemoryInputError,
        MemoryInputError,
    ]
    assert store.get(ALPHA, key="ok") is not None


def test_sessions_append_in_order_and_are_private(store: MemoryStore) -> None:
    for i in range(5):
        write(store, ALPHA, "append_turn", session="s1", role="user", content=f"turn {i}")
    write(store, ALPHA, "append_turn", session="s10", role="user", content="other session")
    write(store, GAMMA, "append_turn", session="s1", role="user", content="gamma's s1")
    turns = store.session(ALPHA, "s1")
    assert [t.content for t in turns] == [f"turn {i}" for i in range(5)]
    assert [t.content for t in store.session(ALPHA, "s1", limit=2)] == ["turn 3", "turn 4"]
    assert [t.content for t in store.session(GAMMA, "s1")] == ["gamma's s1"]


def test_an_exchange_is_appended_whole_or_not_at_all(store: MemoryStore) -> None:
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert write(store, ALPHA, "append_turns", session="s", turns=turns) == 1
    bad = [{"role": "user", "content": "q2"}, {"role": "assistant"}]
    for wrong in (bad, [], "q", [{"role": "user", "content": "x", "agent": "gamma"}]):
        # refused by the request struct (what the service decodes) before any store
        with pytest.raises(msgspec.ValidationError):
            write(store, ALPHA, "append_turns", session="s", turns=wrong)
    assert [(t.role, t.content) for t in store.session(ALPHA, "s")] == [
        ("user", "q"),
        ("assistant", "a"),
    ]


def test_map_grows_without_losing_anything(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m", map_size=64 * 1024)
    try:
        grown = 0
        for i in range(400):
            op = WriteOp(
                ALPHA, write_args("store", {"key": f"k{i}", "content": f"record number {i} " * 20})
            )
            while True:
                try:
                    store.apply_writes([op])
                    break
                except Exception as exc:
                    assert type(exc).__name__ == "MapFullError"
                    store.grow()
                    grown += 1
        assert grown > 0
        assert store.stats(OP)["alpha"]["records"] == 400
    finally:
        store.close()


def test_reopen_keeps_everything_and_one_env_per_process(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")
    write(store, ALPHA, key="k", content="durable")
    with pytest.raises(RuntimeError, match="already open"):
        MemoryStore(tmp_path / "m")
    store.close()
    again = MemoryStore(tmp_path / "m")
    assert again.get(ALPHA, key="k").content == "durable"  # type: ignore[union-attr]
    again.close()


def test_ids_sort_by_time_and_are_unique() -> None:
    ids = [new_id(1000.0) for _ in range(1000)] + [new_id(1001.0)]
    assert len(set(ids)) == len(ids) and ids == sorted(ids) and all(len(i) == 26 for i in ids)


def test_tokenize() -> None:
    assert tokenize("The Payment-Service, is DOWN!") == ["payment", "service", "down"]
    assert len(tokenize("x" * 1000)[0].encode()) == 64


def test_reads_in_a_fresh_process_open_their_handles_first(tmp_path: Path) -> None:
    """Regression: opening a named db inside a read transaction is invalid in LMDB; a store
    reopened by another process reads before it has cached any handle."""
    first = MemoryStore(tmp_path / "m")
    write(first, ALPHA, key="k", content="payment retries")
    write(first, ALPHA, "append_turn", session="s", role="user", content="hi")
    first.close()
    for read in (
        lambda s: s.stats(OP),
        lambda s: s.recall(ALPHA, "payment"),
        lambda s: s.list_records(ALPHA),
        lambda s: s.get(ALPHA, key="k"),
        lambda s: list(s.export(OP, "alpha")),
        lambda s: s.session(ALPHA, "s"),
        lambda s: s.purge(OP, "alpha"),
    ):
        store = MemoryStore(tmp_path / "m")
        try:
            read(store)
        finally:
            store.close()


def test_recall_scores_are_bm25_times_recency(store: MemoryStore) -> None:
    """Pins the store's inlined ranking to the reference formulas in _text."""
    from zeroclaw.memory._text import bm25, idf, recency_boost

    write(store, ALPHA, key="a", content="apple banana apple", now=0.0)
    write(store, ALPHA, key="b", content="banana cherry", now=86400.0)
    write(store, ALPHA, key="c", content="cherry date elder fig", now=2 * 86400.0)
    now = 3 * 86400.0
    hits = {h.record.key: h.score for h in store.recall(ALPHA, "banana apple", now=now)}
    avg = (3 + 2 + 4) / 3
    expected_a = (bm25(2, 3, avg, idf(3, 1)) + bm25(1, 3, avg, idf(3, 2))) * recency_boost(now)
    expected_b = bm25(1, 2, avg, idf(3, 2)) * recency_boost(now - 86400.0)
    assert hits["a"] == pytest.approx(expected_a)
    assert hits["b"] == pytest.approx(expected_b)
    assert set(hits) == {"a", "b"}


def test_an_older_store_is_reindexed_and_a_newer_one_refused(tmp_path: Path) -> None:
    import struct

    import lmdb

    from zeroclaw.memory._store import _FORMAT_KEY, FORMAT_VERSION

    store = MemoryStore(tmp_path / "m")
    write(store, ALPHA, key="k", content="payment retries payment", now=1000.0)
    store.close()
    # Rewrite it as format 1 wrote it: 4-byte postings and no format key.
    env = lmdb.open(str(tmp_path / "m"), max_dbs=64)
    terms = env.open_db(b"m/alpha/terms")
    with env.begin(write=True) as txn:
        old = [(k, struct.pack("<I", struct.unpack("<IIQ", v)[0])) for k, v in txn.cursor(db=terms)]
        for k, v in old:
            txn.put(k, v, db=terms)
        txn.delete(_FORMAT_KEY)
    env.close()
    again = MemoryStore(tmp_path / "m")
    assert again.reindexed == 1
    assert [h.record.key for h in again.recall(ALPHA, "payment")] == ["k"]
    again.close()
    env = lmdb.open(str(tmp_path / "m"), max_dbs=64)
    with env.begin(write=True) as txn:
        txn.put(_FORMAT_KEY, struct.pack("<I", FORMAT_VERSION + 1))
    env.close()
    with pytest.raises(RuntimeError, match="newer zeroclaw"):
        MemoryStore(tmp_path / "m")
    MemoryStore(tmp_path / "m2").close()  # the registry was released by the refusal


def test_sessions_lists_each_session_of_a_namespace_with_its_count_and_last_turn(
    store: MemoryStore,
) -> None:
    assert store.sessions(OP, "alpha") == []
    for i in range(3):
        write(store, ALPHA, "append_turn", now=100.0 + i, session="s", role="user", content="x")
    # `s` is a prefix of these: each is its own session still.
    write(store, ALPHA, "append_turn", now=200.0, session="s/1", role="user", content="y")
    write(store, ALPHA, "append_turn", now=300.0, session="s\xff", role="user", content="z")
    write(store, GAMMA, "append_turn", now=400.0, session="g", role="user", content="w")
    listed = [(s.session, s.turns, s.last_at) for s in store.sessions(OP, "alpha")]
    assert listed == [("s", 3, 102.0), ("s/1", 1, 200.0), ("s\xff", 1, 300.0)]
    assert [s.session for s in store.sessions(ALPHA)] == ["s", "s/1", "s\xff"]
    with pytest.raises(ScopeError):
        store.sessions(ALPHA, "gamma")
