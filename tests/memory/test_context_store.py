"""A turn's context in the store (ADR 0059): the session window by tokens, recall over the
caller's and its granted namespaces in the same read, and compaction: facts, the dropped
turns and the summary in one transaction, once."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bodies import write_args
from tests.supervisor.harness import REPO
from zeroclaw._tokens import message_tokens
from zeroclaw.memory import MemoryQuota, MemoryStore, QuotaExceeded, Scope, WriteOp
from zeroclaw.memory._store import fact_key

ALPHA = Scope("alpha", readable=frozenset({"beta"}))
BETA = Scope("beta")
GAMMA = Scope("gamma")
TEN = "x" * 24  # 10 tokens as a message (6 + the framing's 4)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore(tmp_path / "memory", map_size=1 << 22)
    yield s
    s.close()


def write(
    store: MemoryStore,
    kind: str,
    scope: Scope = ALPHA,
    quota: MemoryQuota | None = None,
    **args: Any,
) -> Any:
    op = WriteOp(scope, write_args(kind, args))
    if quota is not None:
        op.quota = quota
    store.apply_writes([op])
    if op.error:
        raise op.error
    return op.result


def talk(store: MemoryStore, pairs: int, session: str = "s", text: str = TEN) -> None:
    for _ in range(pairs):
        turns = [{"role": "user", "content": text}, {"role": "assistant", "content": text}]
        write(store, "append_turns", session=session, turns=turns)


def test_the_window_is_the_newest_turns_that_fit(store: MemoryStore) -> None:
    assert message_tokens(TEN) == 10
    talk(store, 5)  # seq 0..9
    window, _ = store.context(ALPHA, "s", history_tokens=100)
    assert [seq for seq, _ in window.turns] == list(range(10)) and not window.cut
    window, _ = store.context(ALPHA, "s", history_tokens=45)
    assert [seq for seq, _ in window.turns] == [6, 7, 8, 9] and window.cut
    assert window.overflow == []  # no compaction asked for
    empty, _ = store.context(ALPHA, "nothing", history_tokens=45)
    assert empty.turns == [] and not empty.cut and empty.digest is None


def test_a_due_compaction_gets_the_turns_before_the_newest_half(store: MemoryStore) -> None:
    talk(store, 5)
    window, _ = store.context(ALPHA, "s", history_tokens=75, compact=True)
    # The newest turns within half the budget stay (7, 8, 9), from the user turn that
    # opened the oldest of them (6); the turns before are to summarise.
    assert [seq for seq, _ in window.overflow] == list(range(6))
    # No more than history_tokens of turns at once (at least one), at least the last two
    # kept.
    window, _ = store.context(ALPHA, "s", history_tokens=45, compact=True)
    assert [seq for seq, _ in window.overflow] == [0, 1, 2, 3]
    window, _ = store.context(ALPHA, "s", history_tokens=25, compact=True)
    assert [seq for seq, _ in window.overflow] == [0, 1]
    talk(store, 1, session="huge", text="y" * 4000)
    window, _ = store.context(ALPHA, "huge", history_tokens=100, compact=True)
    assert window.turns == [] and window.cut and window.overflow == []  # the last two stay


def test_compaction_keeps_facts_and_summary_and_drops_the_turns_at_once(
    store: MemoryStore,
) -> None:
    talk(store, 5)
    done = write(
        store, "compact", session="s", from_seq=0, through_seq=5, summary="we met", facts=["a", "b"]
    )
    assert (done.dropped, done.keys, done.already) == (
        6,
        [fact_key("s", 5, 1), fact_key("s", 5, 2)],
        False,
    )
    digest = done.digest
    assert (digest.summary, digest.first_seq, digest.through_seq, digest.turns) == (
        "we met",
        0,
        5,
        6,
    )
    facts = [store.get(ALPHA, key=key) for key in done.keys]
    assert [(f.content, f.category, f.session) for f in facts if f] == [
        ("a", "compacted", "s"),
        ("b", "compacted", "s"),
    ]
    window, _ = store.context(ALPHA, "s", history_tokens=1000)
    assert [seq for seq, _ in window.turns] == [6, 7, 8, 9] and window.digest == digest
    assert store.usage("alpha") == store.recounted_usage("alpha")
    # The same compaction again (its answer was lost): nothing changes, nothing twice.
    again = write(
        store, "compact", session="s", from_seq=0, through_seq=5, summary="other", facts=["c"]
    )
    assert again.already and again.digest == digest and again.keys == []
    assert store.stats(ALPHA)["alpha"]["records"] == 2
    # The next one covers both ranges, from the first turn ever summarised.
    later = write(store, "compact", session="s", from_seq=6, through_seq=7, summary="more")
    assert (later.digest.first_seq, later.digest.through_seq, later.digest.turns) == (0, 7, 8)
    assert store.usage("alpha") == store.recounted_usage("alpha")


def test_the_summary_counts_in_the_window_and_in_the_session_bytes(store: MemoryStore) -> None:
    talk(store, 5)
    before = store.usage("alpha").sessions["s"]
    write(store, "compact", session="s", from_seq=0, through_seq=1, summary="z" * 40)
    turns, size = store.usage("alpha").sessions["s"]
    assert turns == before[0] - 2
    assert size == before[1] - 2 * (len(TEN) + 64) + 40 + 64
    window, _ = store.context(ALPHA, "s", history_tokens=10 * 4 + message_tokens("z" * 40))
    assert [seq for seq, _ in window.turns] == [6, 7, 8, 9]


def test_a_refused_part_leaves_the_whole_compaction_unwritten(store: MemoryStore) -> None:
    talk(store, 3)
    write(store, "store", key="k", content="already one")
    two = MemoryQuota(max_records=2)
    with pytest.raises(QuotaExceeded):
        write(
            store,
            "compact",
            quota=two,
            session="s",
            from_seq=0,
            through_seq=3,
            summary="x",
            facts=["one", "two"],
        )
    assert store.stats(ALPHA)["alpha"]["records"] == 1
    window, _ = store.context(ALPHA, "s", history_tokens=1000)
    assert len(window.turns) == 6 and window.digest is None
    # A summary that would grow the session past its cap is refused the same way.
    tight = MemoryQuota(max_session_bytes=1024)
    with pytest.raises(QuotaExceeded) as refused:
        write(
            store,
            "compact",
            quota=tight,
            session="s",
            from_seq=0,
            through_seq=0,
            summary="s" * 2000,
        )
    assert refused.value.kind == "session_bytes"
    assert store.usage("alpha") == store.recounted_usage("alpha")


def test_recall_in_the_context_reads_own_and_granted_namespaces_only(store: MemoryStore) -> None:
    write(store, "store", key="own", content="the release is on friday")
    write(store, "store", BETA, key="theirs", content="friday standup moved")
    write(store, "store", GAMMA, key="hidden", content="friday secret of gamma")
    _, hits = store.context(ALPHA, "s", history_tokens=100, query="friday", limit=10)
    assert sorted((h.record.agent, h.record.key) for h in hits) == [
        ("alpha", "own"),
        ("beta", "theirs"),
    ]
    _, hits = store.context(BETA, "s", history_tokens=100, query="friday", limit=10)
    assert [h.record.key for h in hits] == ["theirs"]
    _, none = store.context(ALPHA, "s", history_tokens=100, query="friday", limit=0)
    assert none == []


SESSIONS = ("default", "webhook:bob/a")
OPS = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(SESSIONS), st.integers(0, 60)),
    st.tuples(st.just("compact"), st.sampled_from(SESSIONS), st.integers(0, 12)),
    st.tuples(st.just("store"), st.sampled_from("abc"), st.integers(0, 40)),
)
SMALL = MemoryQuota(
    max_records=6,
    max_bytes=2048,
    max_session_turns=10,
    max_session_bytes=1500,
    max_transcript_bytes=4096,
    max_sender_bytes=2048,
)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(OPS, min_size=1, max_size=6), max_size=10))
def test_counters_stay_exact_with_compactions_in_any_batch(
    batches: list[list[tuple[str, str, int]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "memory", map_size=1 << 22)
        try:
            for batch in batches:
                ops = []
                for kind, name, size in batch:
                    if kind == "append":
                        args: dict[str, Any] = {
                            "session": name,
                            "role": "user",
                            "content": "t" * size,
                        }
                        ops.append(WriteOp(ALPHA, write_args("append_turn", args), quota=SMALL))
                    elif kind == "compact":
                        args = {
                            "session": name,
                            "from_seq": 0,
                            "through_seq": size,
                            "summary": "s" * (size * 7 + 1),
                            "facts": [f"f{size}"] * (size % 3),
                        }
                        ops.append(WriteOp(ALPHA, write_args("compact", args), quota=SMALL))
                    else:
                        args = {"key": name, "content": "c" * size}
                        ops.append(WriteOp(ALPHA, write_args("store", args), quota=SMALL))
                store.apply_writes(ops)
                usage = store.usage("alpha")
                assert usage == store.recounted_usage("alpha")
                assert usage.records <= SMALL.max_records
                assert usage.transcript_bytes <= SMALL.max_transcript_bytes
        finally:
            store.close()


COMPACTOR = """
import sys
from pathlib import Path
from zeroclaw.memory import MemoryStore, Scope, WriteOp
from zeroclaw.turns import AppendTurnsArgs, CompactArgs, TurnArg
store = MemoryStore(Path(sys.argv[1]), map_size=1 << 24)
alpha = Scope("alpha")
seq = 0
while True:
    turns = [TurnArg("user", "u" * 50), TurnArg("assistant", "a" * 50)]
    store.apply_writes([WriteOp(alpha, AppendTurnsArgs(session="s", turns=turns))])
    seq += 2
    if seq % 6 == 0:  # compact all but the last pair, as an engine would, sent twice
        args = CompactArgs(session="s", from_seq=0, through_seq=seq - 3, summary=f"to {seq - 3}",
                           facts=[f"fact {seq}", f"another {seq}"])
        store.apply_writes([WriteOp(alpha, args)])
        store.apply_writes([WriteOp(alpha, args)])
    print(seq, flush=True)
"""


def test_kill_9_amid_compactions_loses_no_turn_and_stores_no_fact_twice(tmp_path: Path) -> None:
    path = tmp_path / "memory"
    writer = subprocess.Popen(
        [sys.executable, "-c", COMPACTOR, str(path)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert writer.stdout is not None
    for _ in range(150):
        assert writer.stdout.readline()
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    store = MemoryStore(path, map_size=1 << 24)
    try:
        assert store.usage("alpha") == store.recounted_usage("alpha")
        window, _ = store.context(Scope("alpha"), "s", history_tokens=10**6)
        digest = window.digest
        assert digest is not None
        seqs = [seq for seq, _ in window.turns]
        # Every turn is either held or covered by the summary, never both, never neither.
        assert seqs == list(range(digest.through_seq + 1, seqs[-1] + 1))
        assert digest.first_seq == 0 and digest.turns == digest.through_seq + 1
        facts = [r for r in store.export(Scope("alpha")) if r.category == "compacted"]
        assert len(facts) == len({r.key for r in facts}) == 2 * (digest.through_seq + 3) // 6
    finally:
        store.close()


def test_turns_after_a_compaction_of_every_turn_number_on(store: MemoryStore) -> None:
    talk(store, 1)
    write(store, "compact", session="s", from_seq=0, through_seq=1, summary="all of it")
    talk(store, 1)
    window, _ = store.context(ALPHA, "s", history_tokens=1000)
    assert [seq for seq, _ in window.turns] == [2, 3]
    later = write(store, "compact", session="s", from_seq=2, through_seq=2, summary="and more")
    assert (later.dropped, later.digest.turns) == (1, 3)


def test_a_long_text_is_recalled_for_by_its_rarest_terms(store: MemoryStore) -> None:
    from zeroclaw.memory._store import CONTEXT_TERMS

    common = [f"common{i}" for i in range(CONTEXT_TERMS + 8)]
    for i in range(30):
        write(store, "store", key=f"c{i}", content=" ".join(common))
    write(store, "store", key="rare", content="zanzibar " + common[0])
    text = " ".join([*common, "zanzibar"])
    _, hits = store.context(ALPHA, "s", history_tokens=100, query=text, limit=1)
    assert [h.record.key for h in hits] == ["rare"]


def test_a_cut_window_opens_with_a_user_turn(store: MemoryStore) -> None:
    talk(store, 3)  # user 0, assistant 1, ... assistant 5: 10 tokens each
    window, _ = store.context(ALPHA, "s", history_tokens=35)  # 3 turns fit: 3, 4, 5
    assert [(seq, turn.role) for seq, turn in window.turns] == [(4, "user"), (5, "assistant")]
    assert window.cut
