"""The daemon's durable record of sub-agents: revisions, invocations and their timelines.

One LMDB environment in its own directory (`<state_dir>/subagents`), opened by the daemon
alone (an exclusive lock file says so to a second opener). Every write is one durable
transaction (sync on commit): an invocation is `accepted` on disk before anything runs,
and after a SIGKILL the daemon finds every event it was told was persisted. All methods
block: the daemon calls them through `trio.to_thread.run_sync`. The daemon opens it with
`open_verified` (every page read once in a child), then calls `recover` before serving.

Named databases (values are msgpack of the msgspec records):
  revisions        digest -> RevisionRecord
  agent-revisions  agent_id 0x00 first_seen µs (u64 BE) digest -> ""
  invocations      id -> Invocation
  created          created_at µs (u64 BE) id -> ""       (listing, newest first)
  unfinished       id -> ""                              (accepted or running)
  keys             msgpack [source, parent_run_id, key] -> the first attempt's id
  events           id 0x00 seq (u64 BE) -> InvocationEvent
"""

from __future__ import annotations

import os
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import msgspec

from .._flock import FileLock, LockHeld
from .._lmdb import Unusable, disk_full, open_checked, walk_in_child
from ..turns import (
    TERMINAL_STATES,
    EventBody,
    Invocation,
    InvocationEvent,
    InvocationState,
    RevisionRecord,
    StateEntered,
)
from ._admission import IdempotencyKey
from ._invocation import (
    UNFINISHED,
    IllegalTransition,
    advance,
    check_event,
    recovery_plan,
    retry_of,
)

DEFAULT_MAP_SIZE = 1 << 26  # 64 MiB of address space up front; doubles on MapFullError
MAX_MAP_SIZE = 1 << 40
FORMAT_VERSION = 1
_FORMAT_KEY = b"zeroclaw-subagents-format"
_DBS = ("revisions", "agent-revisions", "invocations", "created", "unfinished", "keys", "events")
_MAX_RETRY_CHAIN = 16  # retries are never retried; a longer chain is damage, not data
_U32 = struct.Struct("<I")
_U64BE = struct.Struct(">Q")

_enc = msgspec.msgpack.Encoder()
_inv_dec = msgspec.msgpack.Decoder(Invocation)
_event_dec = msgspec.msgpack.Decoder(InvocationEvent)
_rev_dec = msgspec.msgpack.Decoder(RevisionRecord)
_key_dec = msgspec.msgpack.Decoder(tuple[str, str | None, str])

VERIFY_TIMEOUT_SECS = 600.0
T = TypeVar("T")
# One write of the store as a function of a write transaction (see `write_many`).
WriteOp = Callable[[Any], T]


class SubagentStoreError(RuntimeError):
    """The sub-agent store cannot do what was asked (the subclasses say why)."""


class SubagentStoreCorrupt(SubagentStoreError):
    """The store on disk is damaged; it is never opened half-way (a read through the map of
    a truncated file SIGBUSes the daemon)."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"sub-agent store {path} is damaged: {problem}. Stop the daemon, move the "
            f"directory aside (mv {path} {path}.damaged) and start again with an empty store "
            "(the invocation history is lost; revisions are recorded again from the bundles), "
            "or put back a copy from your backups"
        )


class SubagentStoreLocked(SubagentStoreError):
    def __init__(self, path: Path, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"sub-agent store {path} is in use by {holder} (another zeroclaw daemon on the "
            "same state_dir?); only one daemon may open it"
        )


class SubagentStoreFull(SubagentStoreError):
    """The disk (or the map's ceiling) is full. The write was aborted as a whole: the state
    committed before it is intact."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path = path
        super().__init__(
            f"sub-agent store {path} cannot grow ({detail}); free disk space, then retry"
        )


class DuplicateInvocation(ValueError):
    """The id, or the idempotency key, is taken: `existing_id` is the invocation to answer
    with (the latest attempt under that key)."""

    def __init__(self, existing_id: str) -> None:
        super().__init__(f"invocation {existing_id} already exists for this id or key")
        self.existing_id = existing_id


class UnknownInvocation(LookupError):
    pass


def _key_of(inv: Invocation) -> bytes | None:
    if inv.idempotency_key is None:
        return None
    return _enc.encode((inv.source, inv.parent_run_id, inv.idempotency_key))


def _micros(t: float) -> bytes:
    return _U64BE.pack(max(int(t * 1_000_000), 0))


def _event_key(invocation_id: str, seq: int) -> bytes:
    return invocation_id.encode() + b"\x00" + _U64BE.pack(seq)


class SubagentStore:
    def __init__(self, path: Path, *, map_size: int = DEFAULT_MAP_SIZE) -> None:
        self.path = Path(path)
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Our own flock, not LMDB's lock.mdb: LMDB allows many openers, and a second daemon
        # would recover (interrupt) the first one's running invocations.
        self._lock = FileLock(self.path / "owner.lock", record_pid=True)
        try:
            self._lock.acquire()
        except LockHeld as exc:
            raise SubagentStoreLocked(self.path, exc.pid) from None
        try:
            self.env, self._dbs = self._open(map_size)
        except BaseException:
            self._lock.release()
            raise
        self._pid = os.getpid()
        # One call at a time: growing the map needs no transaction open in this process,
        # and the daemon's calls are short (a read, or one commit).
        self._mutex = threading.Lock()

    @classmethod
    def open_verified(
        cls, path: Path, *, map_size: int = DEFAULT_MAP_SIZE, timeout: float = VERIFY_TIMEOUT_SECS
    ) -> SubagentStore:
        """Open after a child process read every page once: LMDB has no checksums, and some
        damaged pages abort() the reader, which must not be the daemon."""
        path = Path(path)
        if (path / "data.mdb").exists():
            verify_in_child(path, timeout)
        return cls(path, map_size=map_size)

    def _open(self, map_size: int) -> tuple[Any, Mapping[str, object]]:
        try:
            env = open_checked(
                self.path,
                map_size=map_size,
                max_dbs=len(_DBS) + 1,
                subdir=True,
                sync=True,
                metasync=True,
                lock=True,
            )
        except Unusable as exc:
            raise SubagentStoreCorrupt(self.path, str(exc)) from None
        try:
            with env.begin() as txn:
                raw = txn.get(_FORMAT_KEY)
            found = _U32.unpack(raw)[0] if raw else 0
            if found > FORMAT_VERSION:
                raise SubagentStoreError(
                    f"{self.path} was written by a newer zeroclaw (sub-agent store format "
                    f"{found}, this version reads up to {FORMAT_VERSION}); upgrade zeroclaw"
                )
            dbs = {name: env.open_db(name.encode(), create=True) for name in _DBS}
            if found == 0:
                with env.begin(write=True) as txn:
                    txn.put(_FORMAT_KEY, _U32.pack(FORMAT_VERSION))
        except lmdb.Error as exc:
            env.close()
            if disk_full(exc):  # the first commit of a new store
                raise SubagentStoreFull(self.path, str(exc)) from None
            raise SubagentStoreCorrupt(self.path, f"a page cannot be read ({exc})") from None
        except BaseException:
            env.close()
            raise
        return env, dbs

    def close(self) -> None:
        with self._mutex:
            self.env.close()
            self._lock.release()

    def __enter__(self) -> SubagentStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- plumbing ---------------------------------------------------------------------------

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError("an LMDB environment must not be used across fork")

    def _write(self, fn: Callable[[Any], T]) -> T:
        """Run `fn` in one durable write transaction; an exception in it writes nothing
        (the caller's own errors pass through, storage errors become SubagentStoreError).
        A full map is grown and `fn` run again from the start."""
        self._check_fork()
        with self._mutex:
            while True:
                try:
                    with self.env.begin(write=True) as txn:
                        return fn(txn)
                except lmdb.MapFullError:
                    size = int(self.env.info()["map_size"])
                    if size * 2 > MAX_MAP_SIZE:
                        raise SubagentStoreFull(self.path, f"the map is at {size} bytes") from None
                    self.env.set_mapsize(size * 2)
                except lmdb.Error as exc:
                    if disk_full(exc):
                        raise SubagentStoreFull(self.path, str(exc)) from None
                    raise SubagentStoreError(f"sub-agent store {self.path}: {exc}") from exc
                except msgspec.DecodeError as exc:
                    raise SubagentStoreError(f"sub-agent store {self.path}: {exc}") from exc

    def _read(self, fn: Callable[[Any], T]) -> T:
        """Run `fn` in a read transaction. A storage failure (a damaged page, a record that
        does not decode) is a SubagentStoreError: the daemon answers it, and lives."""
        self._check_fork()
        try:
            with self._mutex, self.env.begin() as txn:
                return fn(txn)
        except (lmdb.Error, msgspec.DecodeError) as exc:
            raise SubagentStoreError(f"sub-agent store {self.path}: {exc}") from exc

    def _get(self, txn: Any, invocation_id: str) -> Invocation | None:
        raw = txn.get(invocation_id.encode(), db=self._dbs["invocations"])
        return None if raw is None else _inv_dec.decode(raw)

    def _must_get(self, txn: Any, invocation_id: str) -> Invocation:
        inv = self._get(txn, invocation_id)
        if inv is None:
            raise UnknownInvocation(f"no invocation {invocation_id!r}")
        return inv

    def _put(self, txn: Any, inv: Invocation) -> None:
        """The record, and its place in the unfinished index (which follows its state)."""
        rid = inv.id.encode()
        txn.put(rid, _enc.encode(inv), db=self._dbs["invocations"])
        if inv.state in UNFINISHED:
            txn.put(rid, b"", db=self._dbs["unfinished"])
        else:
            txn.delete(rid, db=self._dbs["unfinished"])

    def _latest(self, txn: Any, invocation_id: str) -> Invocation:
        inv = self._must_get(txn, invocation_id)
        for _ in range(_MAX_RETRY_CHAIN):
            if inv.retried_by is None:
                return inv
            inv = self._must_get(txn, inv.retried_by)
        raise SubagentStoreCorrupt(self.path, f"the retry chain of {invocation_id} never ends")

    def _create(self, txn: Any, inv: Invocation, first: EventBody, now: float) -> InvocationEvent:
        if not inv.id or "\x00" in inv.id:
            raise ValueError("an invocation id is 1 or more characters without NUL")
        if inv.state != "accepted":
            raise IllegalTransition(inv.id, "new", f"the state {inv.state}")
        if not isinstance(first, StateEntered) or first.state != "accepted":
            raise ValueError("an invocation's first event is its StateEntered('accepted')")
        if self._get(txn, inv.id) is not None:
            raise DuplicateInvocation(inv.id)
        key = _key_of(inv)
        # A retry runs under its first attempt's key, which already leads to it.
        if key is not None and inv.retry_of is None:
            existing = txn.get(key, db=self._dbs["keys"])
            if existing is not None:
                raise DuplicateInvocation(self._latest(txn, existing.decode()).id)
            txn.put(key, inv.id.encode(), db=self._dbs["keys"])
        self._put(txn, msgspec.structs.replace(inv, last_seq=1, updated_at=now))
        txn.put(_micros(inv.created_at) + inv.id.encode(), b"", db=self._dbs["created"])
        event = InvocationEvent(inv.id, 1, now, first)
        txn.put(_event_key(inv.id, 1), _enc.encode(event), db=self._dbs["events"])
        return event

    def _append(
        self,
        txn: Any,
        invocation_id: str,
        bodies: Sequence[EventBody],
        now: float,
        *,
        output: Any = None,
        reply: str = "",
        pointer: str | None = None,
    ) -> tuple[Invocation, list[InvocationEvent]]:
        inv = self._must_get(txn, invocation_id)
        events = []
        for body in bodies:
            check_event(inv, body)
            if isinstance(body, StateEntered):
                if body.state in TERMINAL_STATES:  # results belong to the state that ends it
                    inv = advance(inv, body, now, output=output, reply=reply, pointer=pointer)
                else:
                    inv = advance(inv, body, now)
            seq = inv.last_seq + 1
            inv = msgspec.structs.replace(inv, last_seq=seq, updated_at=now)
            event = InvocationEvent(inv.id, seq, now, body)
            txn.put(_event_key(inv.id, seq), _enc.encode(event), db=self._dbs["events"])
            events.append(event)
        if events:
            self._put(txn, inv)
        return inv, events

    def _link(self, txn: Any, old: Invocation, new: Invocation, now: float) -> InvocationEvent:
        if old.state != "interrupted" or old.retried_by is not None:
            raise IllegalTransition(old.id, old.state, "a retry")
        if new.retry_of != old.id:
            raise ValueError(f"{new.id} is not a retry of {old.id}")
        first = StateEntered("accepted", detail=f"attempt {new.attempt}, a retry of {old.id}")
        event = self._create(txn, new, first, now)
        self._put(txn, msgspec.structs.replace(old, retried_by=new.id, updated_at=now))
        return event

    def _events(
        self, txn: Any, invocation_id: str, after_seq: int, limit: int | None
    ) -> list[InvocationEvent]:
        prefix = invocation_id.encode() + b"\x00"
        out: list[InvocationEvent] = []
        cursor = txn.cursor(db=self._dbs["events"])
        ok = cursor.set_range(_event_key(invocation_id, after_seq + 1))
        while ok and cursor.key().startswith(prefix) and (limit is None or len(out) < limit):
            out.append(_event_dec.decode(cursor.value()))
            ok = cursor.next()
        return out

    def _unfinished(self, txn: Any) -> list[Invocation]:
        ids = [rid.decode() for rid, _ in txn.cursor(db=self._dbs["unfinished"])]
        return sorted((self._must_get(txn, i) for i in ids), key=lambda v: (v.created_at, v.id))

    # --- revisions --------------------------------------------------------------------------

    def record_revision(self, rec: RevisionRecord) -> bool:
        """True when the digest is new. Same digest, same revision: the first record (and its
        first_seen) is kept."""

        def fn(txn: Any) -> bool:
            digest = rec.digest.encode()
            if txn.get(digest, db=self._dbs["revisions"]) is not None:
                return False
            txn.put(digest, _enc.encode(rec), db=self._dbs["revisions"])
            index = rec.agent_id.encode() + b"\x00" + _micros(rec.first_seen) + digest
            txn.put(index, b"", db=self._dbs["agent-revisions"])
            return True

        return self._write(fn)

    def revision(self, digest: str) -> RevisionRecord | None:
        raw = self._read(lambda txn: txn.get(digest.encode(), db=self._dbs["revisions"]))
        return None if raw is None else _rev_dec.decode(raw)

    def revisions(self, agent_id: str) -> list[RevisionRecord]:
        """Every revision of one sub-agent, oldest first."""
        prefix = agent_id.encode() + b"\x00"

        def fn(txn: Any) -> list[RevisionRecord]:
            out = []
            cursor = txn.cursor(db=self._dbs["agent-revisions"])
            ok = cursor.set_range(prefix)
            while ok and cursor.key().startswith(prefix):
                digest = cursor.key()[len(prefix) + 8 :]
                out.append(_rev_dec.decode(txn.get(digest, db=self._dbs["revisions"])))
                ok = cursor.next()
            return out

        return self._read(fn)

    # --- invocations: writes ----------------------------------------------------------------

    # Each write exists as an op (a function of a write transaction) and as a method that
    # commits that one op. `write_many` commits several callers' ops together (the daemon's
    # group commit): one fsync for all of them.

    def create_op(self, inv: Invocation, first: EventBody, now: float) -> WriteOp[InvocationEvent]:
        return lambda txn: self._create(txn, inv, first, now)

    def create(self, inv: Invocation, first: EventBody, now: float) -> InvocationEvent:
        """Persist a new `accepted` invocation, its idempotency key and its event 1 in one
        durable transaction. DuplicateInvocation when the id or the key is taken."""
        return self._write(self.create_op(inv, first, now))

    def append_op(
        self, invocation_id: str, bodies: Sequence[EventBody], now: float
    ) -> WriteOp[list[InvocationEvent]]:
        return lambda txn: self._append(txn, invocation_id, bodies, now)[1]

    def append(
        self, invocation_id: str, bodies: Sequence[EventBody], now: float
    ) -> list[InvocationEvent]:
        """Number `bodies` last_seq+1.. and persist them in one durable transaction. A
        StateEntered moves the record's state (IllegalTransition: nothing of the batch is
        written); an ended invocation takes no more events."""
        return self._write(self.append_op(invocation_id, bodies, now))

    def finish_op(
        self,
        invocation_id: str,
        entered: StateEntered,
        now: float,
        *,
        before: Sequence[EventBody] = (),
        output: Any = None,
        reply: str = "",
        pointer: str | None = None,
    ) -> WriteOp[Invocation]:
        if entered.state not in TERMINAL_STATES:
            raise ValueError(f"finish takes a terminal state, not {entered.state}")

        def fn(txn: Any) -> Invocation:
            bodies = [*before, entered]
            inv, _ = self._append(
                txn, invocation_id, bodies, now, output=output, reply=reply, pointer=pointer
            )
            return inv

        return fn

    def finish(
        self,
        invocation_id: str,
        entered: StateEntered,
        now: float,
        *,
        before: Sequence[EventBody] = (),
        output: Any = None,
        reply: str = "",
        pointer: str | None = None,
    ) -> Invocation:
        """Persist `before` (the last deltas), then the terminal `entered` with the results,
        in one durable transaction; the ended record."""
        return self._write(
            self.finish_op(
                invocation_id,
                entered,
                now,
                before=before,
                output=output,
                reply=reply,
                pointer=pointer,
            )
        )

    def write_many(self, ops: Sequence[WriteOp[Any]]) -> list[Any]:
        """Several ops in one durable commit, each in its own nested transaction: an op that
        refuses (IllegalTransition, DuplicateInvocation, UnknownInvocation, ValueError)
        writes nothing and its exception is its result; the others commit together. A
        storage failure fails the whole batch (raised, as by every write)."""

        def fn(txn: Any) -> list[Any]:
            results: list[Any] = []
            for op in ops:
                child = self.env.begin(write=True, parent=txn)
                try:
                    results.append(op(child))
                except _REFUSALS as exc:
                    child.abort()
                    results.append(exc)
                except BaseException:
                    child.abort()
                    raise
                else:
                    child.commit()
            return results

        return self._write(fn)

    def link_retry(self, old_id: str, new: Invocation, now: float) -> InvocationEvent:
        """Create `new`, the next attempt of the interrupted `old_id`, and link both ways;
        the idempotency key then leads to `new`. One durable transaction."""
        return self._write(lambda txn: self._link(txn, self._must_get(txn, old_id), new, now))

    def recover(
        self, retryable: Callable[[Invocation], bool], new_id: Callable[[], str], now: float
    ) -> tuple[list[Invocation], list[Invocation]]:
        """At daemon start: interrupt every unfinished invocation (daemon_restarted) and
        create the retries `recovery_plan` allows, in one durable transaction. Returns
        (the interrupted records, the new accepted attempts the daemon should run)."""

        def fn(txn: Any) -> tuple[list[Invocation], list[Invocation]]:
            interrupted, retries = [], []
            for step in recovery_plan(self._unfinished(txn), retryable):
                inv, _ = self._append(txn, step.invocation.id, [step.entered], now)
                if step.retry:
                    new = retry_of(inv, new_id(), now)
                    self._link(txn, inv, new, now)
                    inv = self._must_get(txn, inv.id)
                    retries.append(self._must_get(txn, new.id))
                interrupted.append(inv)
            return interrupted, retries

        return self._write(fn)

    # --- invocations: reads -----------------------------------------------------------------

    def get(self, invocation_id: str) -> Invocation | None:
        return self._read(lambda txn: self._get(txn, invocation_id))

    def find_by_key(self, source: str, parent_run_id: str | None, key: str) -> Invocation | None:
        """The latest attempt under an idempotency key (a retry replaces its first attempt)."""
        raw_key = _enc.encode((source, parent_run_id, key))

        def fn(txn: Any) -> Invocation | None:
            first = txn.get(raw_key, db=self._dbs["keys"])
            return None if first is None else self._latest(txn, first.decode())

        return self._read(fn)

    def invocations(
        self, *, state: InvocationState | None = None, agent_id: str | None = None, limit: int = 100
    ) -> list[Invocation]:
        """Newest first, filtered by state and sub-agent."""

        def fn(txn: Any) -> list[Invocation]:
            out: list[Invocation] = []
            cursor = txn.cursor(db=self._dbs["created"])
            ok = cursor.last()
            while ok and len(out) < limit:
                inv = self._must_get(txn, cursor.key()[8:].decode())
                if (state is None or inv.state == state) and (
                    agent_id is None or inv.agent_id == agent_id
                ):
                    out.append(inv)
                ok = cursor.prev()
            return out

        return self._read(fn)

    def unfinished(self) -> list[Invocation]:
        """Every accepted or running invocation, oldest first."""
        return self._read(self._unfinished)

    def running_counts(self) -> dict[str, int]:
        """Accepted plus running invocations per sub-agent: admission's `running`."""
        return dict(Counter(inv.agent_id for inv in self.unfinished()))

    def events(
        self, invocation_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[InvocationEvent]:
        """One invocation's timeline in sequence order, from after_seq + 1."""
        return self._read(lambda txn: self._events(txn, invocation_id, after_seq, limit))

    def timeline(self, invocation_id: str, *, after_seq: int = 0) -> list[InvocationEvent] | None:
        """The events of every earlier attempt this one re-runs, then its own after
        `after_seq`: attempt by attempt, each in sequence order (None: no such invocation)."""

        def fn(txn: Any) -> list[InvocationEvent] | None:
            inv = self._get(txn, invocation_id)
            if inv is None:
                return None
            chain = [inv]
            while chain[-1].retry_of is not None and len(chain) < _MAX_RETRY_CHAIN:
                chain.append(self._must_get(txn, chain[-1].retry_of))
            out: list[InvocationEvent] = []
            for attempt in reversed(chain):
                after = after_seq if attempt is inv else 0
                out.extend(self._events(txn, attempt.id, after, None))
            return out

        return self._read(fn)

    def keys(self) -> InvocationKeys:
        """The idempotency index as admit()'s `invocations_by_key` mapping, read live."""
        return InvocationKeys(self)


def verify_in_child(path: Path, timeout: float = VERIFY_TIMEOUT_SECS) -> None:
    """SubagentStoreCorrupt unless a child read the whole store (`zeroclaw._lmdb.walk`)."""
    problem = walk_in_child(["zeroclaw._lmdb", str(path), *_DBS], timeout)
    if problem is not None:
        raise SubagentStoreCorrupt(path, problem)


_REFUSALS = (IllegalTransition, DuplicateInvocation, UnknownInvocation, ValueError)


class InvocationKeys(Mapping[IdempotencyKey, str]):
    """(source, parent_run_id, key) -> the latest attempt's id, backed by the store."""

    def __init__(self, store: SubagentStore) -> None:
        self._store = store

    def __getitem__(self, key: IdempotencyKey) -> str:
        inv = self._store.find_by_key(*key)
        if inv is None:
            raise KeyError(key)
        return inv.id

    def __iter__(self) -> Iterator[IdempotencyKey]:
        store = self._store
        raw = store._read(lambda txn: [k for k, _ in txn.cursor(db=store._dbs["keys"])])
        return iter([_key_dec.decode(k) for k in raw])

    def __len__(self) -> int:
        store = self._store
        return int(store._read(lambda txn: txn.stat(store._dbs["keys"])["entries"]))
