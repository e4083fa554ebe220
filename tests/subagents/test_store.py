"""The sub-agent store on real LMDB files: what it records survives a SIGKILL, a second
opener and a damaged file are refused with clear errors, and a refused write writes nothing."""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.subagents import (
    DuplicateInvocation,
    IllegalTransition,
    SubagentStore,
    SubagentStoreCorrupt,
    SubagentStoreError,
    SubagentStoreLocked,
    UnknownInvocation,
    advance,
    retry_of,
)
from zeroclaw.subagents._invocation import check_event
from zeroclaw.turns import (
    EventBody,
    Invocation,
    RevisionRecord,
    StateEntered,
    TextDelta,
    ToolCalled,
)

ACCEPTED = StateEntered("accepted")
RUNNING = StateEntered("running")
ROOT = Path(__file__).resolve().parents[2]


def invocation(id: str = "inv-1", **overrides: object) -> Invocation:
    fields: dict[str, object] = {
        "id": id,
        "agent_id": "summarizer",
        "digest": "d" * 64,
        "caller": "alpha",
        "source": "agent:alpha",
        "task": "sum it up",
        "input": {"text": "long", "n": [1, 2]},
        "parent_run_id": "run-7",
        "idempotency_key": f"key-{id}",
        "created_at": 100.0,
        "updated_at": 100.0,
    }
    fields.update(overrides)
    return Invocation(**fields)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SubagentStore]:
    with SubagentStore(tmp_path / "subagents") as opened:
        yield opened


def filled(path: Path) -> Path:
    with SubagentStore(path) as s:
        for i in range(20):
            s.create(invocation(f"i{i}", created_at=float(i)), ACCEPTED, float(i))
            s.append(f"i{i}", [RUNNING, TextDelta("x" * 500)], float(i))
    return path


# --- revisions ----------------------------------------------------------------------------


def test_a_digest_is_recorded_once_and_keeps_its_first_sighting(store: SubagentStore) -> None:
    first = RevisionRecord(agent_id="summarizer", digest="a" * 64, snapshot="/s/a", first_seen=1.0)
    assert store.record_revision(first)
    assert not store.record_revision(
        RevisionRecord(agent_id="summarizer", digest="a" * 64, snapshot="/s/a", first_seen=9.0)
    )
    second = RevisionRecord(agent_id="summarizer", digest="b" * 64, snapshot="/s/b", first_seen=2.0)
    other = RevisionRecord(agent_id="summarize", digest="c" * 64, snapshot="/s/c", first_seen=0.5)
    assert store.record_revision(second) and store.record_revision(other)
    assert store.revision("a" * 64) == first
    assert store.revision("e" * 64) is None
    assert store.revisions("summarizer") == [first, second]  # oldest first, no prefix leak
    assert store.revisions("summarize") == [other]
    assert store.revisions("nobody") == []


# --- invocations ----------------------------------------------------------------------------


def test_create_persists_the_record_its_key_and_event_one(store: SubagentStore) -> None:
    event = store.create(invocation(), ACCEPTED, 101.0)
    assert (event.invocation_id, event.seq, event.at, event.body) == ("inv-1", 1, 101.0, ACCEPTED)
    got = store.get("inv-1")
    assert got is not None
    assert got == invocation(last_seq=1, updated_at=101.0)
    assert store.events("inv-1") == [event]
    assert store.find_by_key("agent:alpha", "run-7", "key-inv-1") == got
    assert store.find_by_key("agent:alpha", None, "key-inv-1") is None  # the run is in the key
    assert store.get("nope") is None


def test_a_taken_id_or_key_is_refused_naming_the_existing_invocation(store: SubagentStore) -> None:
    store.create(invocation(), ACCEPTED, 1.0)
    with pytest.raises(DuplicateInvocation) as by_id:
        store.create(invocation(idempotency_key="other"), ACCEPTED, 2.0)
    with pytest.raises(DuplicateInvocation) as by_key:
        store.create(invocation("inv-2", idempotency_key="key-inv-1"), ACCEPTED, 2.0)
    assert by_id.value.existing_id == by_key.value.existing_id == "inv-1"
    assert store.get("inv-2") is None
    assert [i.id for i in store.invocations()] == ["inv-1"]


def test_a_new_invocation_must_start_accepted(store: SubagentStore) -> None:
    with pytest.raises(IllegalTransition):
        store.create(invocation(state="running"), RUNNING, 1.0)
    with pytest.raises(ValueError, match="first event"):
        store.create(invocation(), TextDelta("hi"), 1.0)
    assert store.invocations() == []


def test_events_are_numbered_in_order_and_move_the_state(store: SubagentStore) -> None:
    store.create(invocation(), ACCEPTED, 1.0)
    batch: list[EventBody] = [
        RUNNING,
        TextDelta("he"),
        ToolCalled("read", {"p": "a"}, True),
        TextDelta("llo"),
    ]
    events = store.append("inv-1", batch, 2.0)
    assert [e.seq for e in events] == [2, 3, 4, 5]
    assert [e.body for e in store.events("inv-1")] == [ACCEPTED, *batch]
    assert [e.seq for e in store.events("inv-1", after_seq=3)] == [4, 5]
    assert [e.seq for e in store.events("inv-1", after_seq=1, limit=2)] == [2, 3]
    ended = store.finish(
        "inv-1",
        StateEntered("succeeded"),
        3.0,
        before=[TextDelta("!")],
        output={"summary": "hello"},
        reply="hello!",
    )
    assert (ended.state, ended.output, ended.reply, ended.last_seq) == (
        "succeeded",
        {"summary": "hello"},
        "hello!",
        7,
    )
    assert store.get("inv-1") == ended
    assert [e.seq for e in store.events("inv-1")] == list(range(1, 8))


def test_ten_invocations_keep_their_timelines_apart(store: SubagentStore) -> None:
    # ids that are prefixes of each other: "i1" and "i10" must not share events
    for i in (1, 10, 100):
        store.create(invocation(f"i{i}"), ACCEPTED, 1.0)
        store.append(f"i{i}", [TextDelta(str(i))] * i, 2.0)
    for i in (1, 10, 100):
        events = store.events(f"i{i}")
        assert len(events) == i + 1 and {e.invocation_id for e in events} == {f"i{i}"}


def test_an_illegal_transition_writes_nothing_of_its_batch(store: SubagentStore) -> None:
    store.create(invocation(), ACCEPTED, 1.0)
    with pytest.raises(IllegalTransition):
        store.append("inv-1", [TextDelta("a"), StateEntered("succeeded")], 2.0)
    assert store.get("inv-1") == invocation(last_seq=1, updated_at=1.0)
    assert len(store.events("inv-1")) == 1
    store.finish("inv-1", StateEntered("cancelled", "subagent_cancelled"), 3.0)
    for late in ([TextDelta("late")], [RUNNING]):
        with pytest.raises(IllegalTransition):
            store.append("inv-1", late, 4.0)
    got = store.get("inv-1")
    assert got is not None and (got.state, got.last_seq) == ("cancelled", 2)
    with pytest.raises(UnknownInvocation):
        store.append("nope", [TextDelta("x")], 1.0)


def test_listings_filter_and_count_the_unfinished(store: SubagentStore) -> None:
    for i, agent in enumerate(["a", "b", "a", "a"]):
        store.create(invocation(f"i{i}", agent_id=agent, created_at=float(i)), ACCEPTED, 1.0)
    store.append("i1", [RUNNING], 2.0)
    store.finish("i2", StateEntered("failed", "subagent_runtime_failed", "exit 1"), 2.0)
    assert [i.id for i in store.invocations()] == ["i3", "i2", "i1", "i0"]
    assert [i.id for i in store.invocations(limit=2)] == ["i3", "i2"]
    assert [i.id for i in store.invocations(agent_id="a", state="accepted")] == ["i3", "i0"]
    assert [i.id for i in store.unfinished()] == ["i0", "i1", "i3"]
    assert store.running_counts() == {"a": 2, "b": 1}


def test_the_keys_view_answers_admission_with_the_latest_attempt(store: SubagentStore) -> None:
    store.create(invocation(), ACCEPTED, 1.0)
    store.create(invocation("free", idempotency_key=None), ACCEPTED, 1.0)
    keys = store.keys()
    key = ("agent:alpha", "run-7", "key-inv-1")
    assert key in keys and keys[key] == "inv-1"
    assert ("agent:alpha", "run-7", "other") not in keys
    assert list(keys) == [key] and len(keys) == 1
    store.recover(lambda inv: inv.id == "inv-1", lambda: "inv-1b", 5.0)
    assert keys[key] == "inv-1b"


STATES = ["running", "succeeded", "failed", "timed_out", "cancelled", "interrupted"]
BODY = st.one_of(
    st.builds(StateEntered, st.sampled_from(STATES)), st.builds(TextDelta, st.text(max_size=3))
)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(BODY, min_size=1, max_size=4), max_size=6))
def test_the_store_follows_the_pure_machine_batch_by_batch(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[EventBody]]
) -> None:
    """Whatever the batches, the stored record is the pure machine's, seqs have no gap,
    and a refused batch leaves no trace."""
    with SubagentStore(tmp_path_factory.mktemp("prop")) as s:
        s.create(invocation(), ACCEPTED, 0.0)
        model = s.get("inv-1")
        timeline: list[EventBody] = [ACCEPTED]
        assert model is not None
        for n, batch in enumerate(batches, 1):
            try:
                expected = model
                for body in batch:
                    check_event(expected, body)
                    if isinstance(body, StateEntered):
                        expected = advance(expected, body, float(n))
            except IllegalTransition:
                with pytest.raises(IllegalTransition):
                    s.append("inv-1", batch, float(n))
                continue
            s.append("inv-1", batch, float(n))
            timeline += batch
            model = s.get("inv-1")
            assert model is not None and model.state == expected.state
        events = s.events("inv-1")
        assert [e.body for e in events] == timeline
        assert [e.seq for e in events] == list(range(1, len(timeline) + 1))
        assert model.last_seq == len(timeline)


# --- restart recovery ---------------------------------------------------------------------


def test_recover_interrupts_links_one_retry_and_replays_both_attempts(
    store: SubagentStore,
) -> None:
    store.create(invocation("ro", agent_id="reader"), ACCEPTED, 1.0)
    store.append("ro", [RUNNING, TextDelta("half")], 2.0)
    store.create(invocation("wr", agent_id="writer"), ACCEPTED, 1.0)
    store.create(invocation("done", agent_id="reader"), ACCEPTED, 1.0)
    store.append("done", [RUNNING], 2.0)
    store.finish("done", StateEntered("succeeded"), 3.0)
    ids = iter(["ro-2"])
    interrupted, retries = store.recover(lambda inv: inv.agent_id == "reader", ids.__next__, 10.0)

    assert sorted(i.id for i in interrupted) == ["ro", "wr"]
    assert all(i.error_code == "daemon_restarted" for i in interrupted)
    assert {i.id: i.retried_by for i in interrupted} == {"ro": "ro-2", "wr": None}
    (retry,) = retries
    assert (retry.id, retry.attempt, retry.retry_of, retry.state) == ("ro-2", 2, "ro", "accepted")
    assert retry.digest == "d" * 64  # the revision that was accepted, not a newer one
    assert store.find_by_key("agent:alpha", "run-7", "key-ro") == retry
    assert [i.id for i in store.unfinished()] == ["ro-2"]
    ro = store.events("ro")
    assert ro[-1].body == StateEntered(
        "interrupted", "daemon_restarted", "the daemon stopped before the invocation ended"
    )
    timeline = store.timeline("ro-2")
    assert timeline is not None
    assert [(e.invocation_id, e.seq) for e in timeline] == [
        ("ro", 1),
        ("ro", 2),
        ("ro", 3),
        ("ro", 4),
        ("ro-2", 1),
    ]
    assert store.timeline("nope") is None

    # A second crash while the retry runs: interrupted, never re-run again.
    store.append("ro-2", [RUNNING], 11.0)
    interrupted, retries = store.recover(lambda inv: True, lambda: "never", 20.0)
    assert [i.id for i in interrupted] == ["ro-2"] and retries == []
    assert store.get("never") is None


def test_link_retry_needs_an_interrupted_attempt_not_yet_retried(store: SubagentStore) -> None:
    store.create(invocation(), ACCEPTED, 1.0)
    old = store.get("inv-1")
    assert old is not None
    with pytest.raises(IllegalTransition):
        store.link_retry("inv-1", retry_of(old, "inv-2", 2.0), 2.0)
    store.finish("inv-1", StateEntered("interrupted", "daemon_restarted"), 3.0)
    store.link_retry("inv-1", retry_of(old, "inv-2", 4.0), 4.0)
    with pytest.raises(IllegalTransition):
        store.link_retry("inv-1", retry_of(old, "inv-3", 5.0), 5.0)
    assert store.get("inv-3") is None
    linked = store.get("inv-1")
    assert linked is not None and linked.retried_by == "inv-2"


# --- the disk -------------------------------------------------------------------------------


def test_the_map_grows_instead_of_failing(tmp_path: Path) -> None:
    with SubagentStore(tmp_path / "s", map_size=1 << 16) as s:
        s.create(invocation(), ACCEPTED, 1.0)
        for n in range(60):
            s.append("inv-1", [TextDelta(f"{n}:" + "z" * 2000)] * 5, 2.0)
        assert s.env.info()["map_size"] > 1 << 16
        events = s.events("inv-1")
    assert [e.seq for e in events] == list(range(1, 302))


def test_a_second_opener_is_refused_in_this_process_and_in_another(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SubagentStore(path):
        with pytest.raises(SubagentStoreLocked, match="only one daemon"):
            SubagentStore(path)
        code = (
            "import sys\nfrom pathlib import Path\n"
            "from zeroclaw.subagents import SubagentStore, SubagentStoreLocked\n"
            "try:\n    SubagentStore(Path(sys.argv[1]))\n"
            "except SubagentStoreLocked as e:\n    print(e)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
        )
        assert f"in use by pid {os.getpid()}" in out.stdout
    with SubagentStore(path):  # closed: the next opener gets it
        pass


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from zeroclaw.subagents import SubagentStore
    from zeroclaw.turns import Invocation, StateEntered, TextDelta
    store = SubagentStore(Path(sys.argv[1]))
    inv = Invocation(id="k9", agent_id="a", digest="d", caller="cli", source="cli",
                     task="t", idempotency_key="once", created_at=1.0, updated_at=1.0)
    store.create(inv, StateEntered("accepted"), 1.0)
    store.append("k9", [StateEntered("running"), TextDelta("persisted")], 2.0)
    print("committed", flush=True)
    sys.stdin.read()  # hold the store open until killed
    """
)


def test_what_was_committed_survives_a_sigkill_of_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "s"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "committed\n"
        child.send_signal(signal.SIGKILL)
    finally:
        assert child.wait(timeout=30) == -signal.SIGKILL
    with SubagentStore(path) as s:  # the dead holder's lock is gone with it
        inv = s.find_by_key("cli", None, "once")
        assert inv is not None and (inv.id, inv.state, inv.last_seq) == ("k9", "running", 3)
        assert [e.body for e in s.events("k9")] == [
            ACCEPTED,
            RUNNING,
            TextDelta("persisted"),
        ]
        interrupted, _ = s.recover(lambda inv: False, lambda: "x", 3.0)
        assert [i.state for i in interrupted] == ["interrupted"]


@pytest.mark.parametrize("damage", ["empty", "zeroed", "truncated"])
def test_a_damaged_data_file_is_refused_and_left_as_it_is(tmp_path: Path, damage: str) -> None:
    path = filled(tmp_path / "s")
    data = path / "data.mdb"
    size = data.stat().st_size
    if damage == "empty":
        data.write_bytes(b"")
    elif damage == "zeroed":
        data.write_bytes(bytes(size))
    else:
        os.truncate(data, size // 2)
    before = data.read_bytes()
    for opener in (SubagentStore.open_verified, SubagentStore):
        with pytest.raises(SubagentStoreCorrupt) as caught:
            opener(path)
    message = str(caught.value)
    assert f"mv {path} {path}.damaged" in message and "Stop the daemon" in message
    assert data.read_bytes() == before  # nothing was written over it
    with pytest.raises(SubagentStoreCorrupt):  # and the refusal let go of the lock
        SubagentStore(path)


def test_every_damaged_page_is_refused_at_a_verified_open_or_reads_intact(
    tmp_path: Path,
) -> None:
    """Garbage over a page: open_verified refuses the store (the walk runs in a child,
    since LMDB aborts on some pages), or the page was free and everything reads."""
    good = filled(tmp_path / "good")
    page_size = os.sysconf("SC_PAGE_SIZE")
    pages = (good / "data.mdb").stat().st_size // page_size
    rng = random.Random(7)
    refused = 0
    sample = rng.sample(range(2, pages), min(8, pages - 2))  # 0 and 1 are the meta pages
    for page in sample:
        damaged = tmp_path / f"p{page}"
        damaged.mkdir()
        data = bytearray((good / "data.mdb").read_bytes())
        data[page * page_size : (page + 1) * page_size] = rng.randbytes(page_size)
        (damaged / "data.mdb").write_bytes(bytes(data))
        try:
            store = SubagentStore.open_verified(damaged)
        except SubagentStoreCorrupt as exc:
            assert "mv " in str(exc)
            refused += 1
            continue
        with store:
            assert len(store.invocations()) == 20
            assert all(len(store.events(f"i{i}")) == 3 for i in range(20))
    assert refused > 0


def test_a_page_damaged_after_open_fails_the_call_with_a_store_error(tmp_path: Path) -> None:
    path = filled(tmp_path / "s")
    page_size = os.sysconf("SC_PAGE_SIZE")
    with SubagentStore.open_verified(path) as s:
        # Damage every page's type flags behind the open store's map (MAP_SHARED sees it).
        with open(path / "data.mdb", "r+b") as fh:
            for page in range(2, os.fstat(fh.fileno()).st_size // page_size):
                fh.seek(page * page_size + 10)
                fh.write(b"\x00\x00")
        with pytest.raises(SubagentStoreError):
            s.invocations()
        with pytest.raises(SubagentStoreError):
            s.append("i1", [TextDelta("x")], 5.0)


def test_an_intact_store_opens_verified(tmp_path: Path) -> None:
    with SubagentStore.open_verified(filled(tmp_path / "s")) as s:
        assert len(s.invocations()) == 20
    with SubagentStore.open_verified(tmp_path / "new") as s:  # no file yet: nothing to read
        assert s.invocations() == []


def test_a_store_from_a_newer_zeroclaw_is_refused(tmp_path: Path) -> None:
    path = filled(tmp_path / "s")
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        txn.put(b"zeroclaw-subagents-format", struct.pack("<I", 99))
    env.close()
    with pytest.raises(SubagentStoreError, match="newer zeroclaw"):
        SubagentStore(path)


FULL_CHILD = textwrap.dedent(
    """
    import resource, signal, sys
    from pathlib import Path
    from zeroclaw.subagents import SubagentStore, SubagentStoreFull
    from zeroclaw.turns import TextDelta
    store = SubagentStore(Path(sys.argv[1]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
    size = (Path(sys.argv[1]) / "data.mdb").stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    try:
        store.append("i3", [TextDelta("y" * 200_000)], 9.0)
    except SubagentStoreFull as exc:
        print("full:", exc)
    """
)


def test_a_full_disk_is_a_typed_error_and_the_committed_state_survives(tmp_path: Path) -> None:
    path = filled(tmp_path / "s")
    out = subprocess.run(
        [sys.executable, "-c", FULL_CHILD, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.stdout.startswith("full: sub-agent store"), out.stderr
    assert "free disk space" in out.stdout
    with SubagentStore(path) as s:
        assert len(s.invocations()) == 20
        assert [e.seq for e in s.events("i3")] == [1, 2, 3]


# --- group commit: several writers, one durable transaction ---------------------------------


def test_write_many_commits_the_ops_together_and_a_refused_one_writes_nothing(
    store: SubagentStore,
) -> None:
    store.create(invocation("inv-1"), StateEntered("accepted"), 1.0)
    results = store.write_many(
        [
            store.create_op(invocation("inv-2"), StateEntered("accepted"), 2.0),
            # inv-1 is accepted: `succeeded` is not a move from there, so this one refuses
            store.finish_op("inv-1", StateEntered("succeeded"), 3.0, before=[TextDelta("x")]),
            store.append_op("inv-1", [StateEntered("running"), TextDelta("hi")], 4.0),
            store.create_op(invocation("inv-2"), StateEntered("accepted"), 5.0),  # taken
        ]
    )
    assert results[0].seq == 1
    assert isinstance(results[1], IllegalTransition)
    assert [e.seq for e in results[2]] == [2, 3]
    assert isinstance(results[3], DuplicateInvocation)
    first = store.get("inv-1")
    assert first is not None and (first.state, first.last_seq) == ("running", 3)
    assert [e.body for e in store.events("inv-1")][1:] == [StateEntered("running"), TextDelta("hi")]
    assert store.get("inv-2") is not None
