"""Quotas in the LMDB store with real files (ADR 0046): refusals, newest turns kept, and
usage counters exact after any sequence, after kill -9, and rebuilt when missing."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bodies import handled, write_args
from tests.conftest import REPO
from zeroclaw.memory import (
    MemoryGrants,
    MemoryQuota,
    MemoryService,
    MemoryServiceError,
    MemoryStore,
    QuotaExceeded,
    Scope,
    WriteOp,
    record_bytes,
    turn_bytes,
)

ALPHA = Scope("alpha")
SMALL = MemoryQuota(
    max_records=5,
    max_bytes=400,
    max_session_turns=4,
    max_session_bytes=200,
    max_transcript_bytes=500,
    max_sender_bytes=240,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore(tmp_path / "memory", map_size=1 << 22)
    yield s
    s.close()


def write(store: MemoryStore, kind: str, quota: MemoryQuota = SMALL, **args: Any) -> WriteOp:
    op = WriteOp(ALPHA, write_args(kind, args), quota=quota)
    store.apply_writes([op])
    return op


def test_a_store_past_max_records_is_refused_and_nothing_is_written(store: MemoryStore) -> None:
    for i in range(5):
        assert write(store, "store", key=f"k{i}", content="x").error is None
    refused = write(store, "store", key="k5", content="x")
    assert isinstance(refused.error, QuotaExceeded) and refused.error.kind == "records"
    assert store.get(ALPHA, key="k5") is None
    # The same key again is a replacement, not a new record: allowed at the cap.
    assert write(store, "store", key="k0", content="y").error is None
    assert store.usage("alpha") == store.recounted_usage("alpha")
    assert store.usage("alpha").records == 5


def test_a_store_past_max_bytes_is_refused_and_a_forget_makes_room(store: MemoryStore) -> None:
    assert write(store, "store", key="big", content="x" * 300).error is None
    refused = write(store, "store", key="more", content="x" * 20)
    assert isinstance(refused.error, QuotaExceeded) and refused.error.kind == "bytes"
    assert write(store, "forget", key="big").error is None
    assert write(store, "store", key="more", content="x" * 20).error is None
    assert store.usage("alpha").record_bytes == record_bytes("more", "x" * 20)


def test_a_session_keeps_its_newest_turns_and_says_how_many_it_dropped(
    store: MemoryStore,
) -> None:
    dropped = 0
    for i in range(10):
        roomy = dataclasses.replace(SMALL, max_session_bytes=10_000)
        op = write(store, "append_turn", roomy, session="s", role="user", content=f"turn {i}")
        assert op.error is None
        dropped += op.dropped
    assert [t.content for t in store.session(ALPHA, "s")] == [f"turn {i}" for i in range(6, 10)]
    assert dropped == 6
    assert store.usage("alpha") == store.recounted_usage("alpha")


def test_an_outside_senders_sessions_share_one_cap(store: MemoryStore) -> None:
    for name in ("one", "two"):
        op = write(
            store, "append_turn", session=f"webhook:bob/{name}", role="user", content="x" * 50
        )
        assert op.error is None
    refused = write(
        store, "append_turn", session="webhook:bob/three", role="user", content="z" * 50
    )
    assert isinstance(refused.error, QuotaExceeded) and refused.error.kind == "sender_bytes"
    # Another sender (while the senders together are within their part of the agent's
    # transcripts), and the operator's sessions, have their own room.
    roomy = dataclasses.replace(SMALL, max_transcript_bytes=1000)
    assert (
        write(
            store, "append_turn", roomy, session="webhook:eve/one", role="user", content="z" * 50
        ).error
        is None
    )
    assert (
        write(store, "append_turn", session="default", role="user", content="z" * 50).error is None
    )
    usage = store.usage("alpha")
    assert usage == store.recounted_usage("alpha")
    assert usage.shares == {
        "webhook:bob": 2 * turn_bytes("x" * 50),
        "webhook:eve": turn_bytes("z" * 50),
    }


SESSIONS = ("default", "webhook:bob/a", "webhook:bob/b", "serial:tty/x")
OPS = st.one_of(
    st.tuples(st.just("store"), st.sampled_from("abcdefg"), st.integers(0, 150)),
    st.tuples(st.just("forget"), st.sampled_from("abcdefg"), st.just(0)),
    st.tuples(st.just("append_turn"), st.sampled_from(SESSIONS), st.integers(0, 90)),
)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(OPS, min_size=1, max_size=8), max_size=12))
def test_counters_stay_exact_and_within_caps_whatever_the_batches(
    batches: list[list[tuple[str, str, int]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "memory", map_size=1 << 22)
        try:
            for batch in batches:  # several ops in one transaction, as the group commit does
                ops = []
                for kind, name, size in batch:
                    if kind == "store":
                        args: dict[str, Any] = {"key": name, "content": "c" * size}
                    elif kind == "forget":
                        args = {"key": name}
                    else:
                        args = {"session": name, "role": "user", "content": "t" * size}
                    ops.append(WriteOp(ALPHA, write_args(kind, args), quota=SMALL))
                store.apply_writes(ops)
                usage = store.usage("alpha")
                assert usage == store.recounted_usage("alpha")
                assert usage.records <= SMALL.max_records
                assert usage.record_bytes <= SMALL.max_bytes
                assert usage.transcript_bytes <= SMALL.max_transcript_bytes
                for turns, size in usage.sessions.values():
                    assert turns <= SMALL.max_session_turns
                    assert size <= SMALL.max_session_bytes
                assert all(size <= SMALL.max_sender_bytes for size in usage.shares.values())
        finally:
            store.close()


WRITER = """
import sys
from pathlib import Path
from zeroclaw.memory import MemoryStore, Scope, WriteOp
from zeroclaw.turns import AppendTurnArgs, ForgetArgs, StoreArgs
store = MemoryStore(Path(sys.argv[1]), map_size=1 << 24)
i = 0
while True:
    ops = [
        WriteOp(Scope("alpha"), StoreArgs(key=f"k{i % 50}", content="c" * (i % 97))),
        WriteOp(Scope("alpha"), ForgetArgs(key=f"k{(i * 7) % 50}")),
        WriteOp(Scope("alpha"), AppendTurnArgs(
                session=f"webhook:s{i % 3}/x", role="user", content="t" * (i % 83))),
    ]
    store.apply_writes(ops)
    i += 1
    print(i, flush=True)
"""


def test_counters_are_exact_after_kill_9_mid_writes_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "memory"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert writer.stdout is not None
    for _ in range(200):  # committed transactions, then killed amid the next ones
        assert writer.stdout.readline()
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    store = MemoryStore(path, map_size=1 << 24)
    try:
        usage = store.usage("alpha")
        assert usage == store.recounted_usage("alpha")
        assert usage.records > 0 and usage.transcript_bytes > 0
    finally:
        store.close()


def test_missing_counters_are_rebuilt_at_open(tmp_path: Path) -> None:
    path = tmp_path / "memory"
    store = MemoryStore(path, map_size=1 << 22)
    write(store, "store", key="k", content="hello")
    write(store, "append_turn", session="webhook:bob/x", role="user", content="hi")
    expected = store.usage("alpha")
    store.close()
    # As a store of before the counters had them: none of the usage keys.
    env = lmdb.open(str(path), max_dbs=16, subdir=True)
    meta = env.open_db(b"m/alpha/meta")
    with env.begin(write=True) as txn:
        for key in (b"bytes", b"tbytes", b"usage", b"s\x00webhook:bob/x", b"p\x00webhook:bob"):
            assert txn.delete(key, db=meta)
    env.close()
    store = MemoryStore(path, map_size=1 << 22)
    try:
        assert store.reindexed == 1
        assert store.usage("alpha") == expected == store.recounted_usage("alpha")
    finally:
        store.close()


async def test_a_reloaded_quota_applies_to_the_next_write_and_refusals_are_counted(
    tmp_path: Path,
) -> None:
    store = MemoryStore(tmp_path / "memory", map_size=1 << 22)
    one = dataclasses.replace(SMALL, max_records=1)
    service = MemoryService(store, MemoryGrants({}, quotas={"alpha": one}))
    scope = service.scope_for("alpha")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.run_committer)
            await handled(service, scope, "store", {"key": "a", "content": "x"})
            with pytest.raises(MemoryServiceError) as refused:
                await handled(service, scope, "store", {"key": "b", "content": "x"})
            assert refused.value.code == "quota_exceeded"
            assert service.quota_refusals == {("alpha", "records"): 1}
            service.update_grants(MemoryGrants({}, quotas={"alpha": SMALL}))  # a reload
            await handled(service, scope, "store", {"key": "b", "content": "x"})
            nursery.cancel_scope.cancel()
        assert store.usage("alpha").records == 2
    finally:
        store.close()


def test_many_senders_leave_the_operator_its_part_and_a_recount_keeps_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory"
    store = MemoryStore(path, map_size=1 << 22)
    refused = None
    for n in range(10):  # each within its share: together they would take the whole cap
        op = write(store, "append_turn", session=f"webhook:s{n}/x", role="user", content="y" * 60)
        if op.error is not None:
            refused = op.error
            break
    assert isinstance(refused, QuotaExceeded) and refused.kind == "sender_bytes"
    outside = sum(store.usage("alpha").shares.values())
    assert outside <= SMALL.max_transcript_bytes // 2
    assert (
        write(store, "append_turn", session="default", role="user", content="o" * 60).error is None
    )
    store.close()
    # A namespace marked before the outside total was kept: recounted at open, total included.
    env = lmdb.open(str(path), max_dbs=16, subdir=True)
    meta = env.open_db(b"m/alpha/meta")
    with env.begin(write=True) as txn:
        assert txn.delete(b"obytes", db=meta)
        txn.put(b"usage", b"1", db=meta)
    env.close()
    store = MemoryStore(path, map_size=1 << 22)
    try:
        assert store.reindexed == 1
        again = write(store, "append_turn", session="webhook:new/x", role="user", content="y" * 60)
        assert isinstance(again.error, QuotaExceeded) and again.error.kind == "sender_bytes"
    finally:
        store.close()
