"""The LMDB memory store: one environment, one set of named databases per agent.

Scope is enforced *here*, in the only code that touches LMDB, and fails closed:
- every operation takes a `Scope` (the caller, plus namespaces it may read); writes go to
  the caller's namespace and nowhere else, because no write takes a namespace argument;
- reads may name namespaces, each of which must be the caller's or a granted one, else
  ScopeError — never an empty answer that hides a bug;
- purging a whole namespace needs an `OperatorScope`, which the agent-facing service
  never constructs.

All methods are blocking: callers run them in `trio.to_thread.run_sync`, one write
transaction per call (`apply_writes` takes a whole batch for group commit).

Per namespace `<a>` (named databases, created on first write):
  m/<a>/records  id -> Record (msgpack)
  m/<a>/keys     key -> id
  m/<a>/terms    term 0x00 id -> (tf u32, doc length u32, updated ms u64): all BM25 and
                 recency need, so ranking reads no records until the top hits are known
  m/<a>/df       term -> document frequency (u32)
  m/<a>/time     created_ms (u64 BE) id -> ""
  m/<a>/meta     b"docs" / b"length" / b"bytes" -> u64 (records, their tokens, their bytes);
                 b"tbytes" -> u64 (all transcripts' bytes); b"s" 0x00 session -> (turns,
                 bytes) u64 each; b"p" 0x00 sender -> u64 (an outside sender's share);
                 b"obytes" -> u64 (all outside senders' shares together);
                 b"usage" -> b"2" once those counters are kept (ADR 0046)
  m/<a>/sessions session 0x00 seq (u64 BE) -> Turn (msgpack)
  m/<a>/summaries session -> SessionDigest (msgpack): what compactions kept of the turns
                 they dropped (ADR 0059); its bytes count in its session's usage

Usage counters change in the write transaction that changes what they count, so a crash
(kill -9 included) leaves them exact; a namespace without them is recounted at open.
"""

from __future__ import annotations

import heapq
import math
import os
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import lmdb
import msgspec

from .._lmdb import committed_size_problem, data_file_problem
from .._tokens import message_tokens
from ..turns import (
    COMPACTED_CATEGORY,
    MAX_KEY_BYTES,
    MAX_SESSION_BYTES,
    AppendTurnArgs,
    AppendTurnsArgs,
    CompactArgs,
    ForgetArgs,
    StoreArgs,
)
from ._quota import (
    DEFAULT_QUOTA,
    MemoryQuota,
    OverQuota,
    QuotaKind,
    compaction_decision,
    sender_share,
    store_decision,
    transcript_decision,
)
from ._records import (
    MAX_CONTENT_BYTES,
    Record,
    SessionDigest,
    SessionSummary,
    Turn,
    new_id,
    valid_category,
)
from ._text import (
    BM25_B,
    BM25_K1,
    RECENCY_HALF_LIFE_SECS,
    RECENCY_WEIGHT,
    idf,
    term_frequencies,
    tokenize,
)

DEFAULT_MAP_SIZE = 1 << 30  # 1 GiB of address space up front; grows on MapFullError
MAX_READERS = 1024
MAX_DBS = 8192
_KINDS = ("records", "keys", "terms", "df", "time", "meta", "sessions", "summaries")
_U32 = struct.Struct("<I")
_POSTING = struct.Struct("<IIQ")
_U64 = struct.Struct("<Q")
_U64BE = struct.Struct(">Q")
_enc = msgspec.msgpack.Encoder()
_rec_dec = msgspec.msgpack.Decoder(Record)
_turn_dec = msgspec.msgpack.Decoder(Turn)
_digest_dec = msgspec.msgpack.Decoder(SessionDigest)
# A read or write transaction of the environment (generic only in lmdb's stubs).
Txn: TypeAlias = "lmdb.Transaction[bytes]"

# Version of the on-disk layout. 2: postings carry (tf, length, updated_ms). 3: usage
# counters for quotas. A store without the key is format 1 (or new) and is reindexed from
# its records (and its transcripts recounted) at open.
FORMAT_VERSION = 3
_SESSION_USAGE = struct.Struct("<QQ")  # turns, bytes
_USAGE_MARK = b"usage"
# Which counters the mark vouches for: "2" adds obytes (a namespace marked "1" is recounted).
_USAGE_KEPT = b"2"
_OUTSIDE_BYTES = b"obytes"
_FORMAT_KEY = b"zeroclaw-memory-format"

_RANKING_KINDS = ("records", "terms", "df", "meta")  # what ranking reads of a namespace
# A turn's recall ranks by the rarest terms of its text only, so that a long message costs
# no more than this many terms' postings (the common ones weigh next to nothing in BM25).
CONTEXT_TERMS = 16

_open_paths: set[str] = set()
_open_lock = threading.Lock()


class StoreCorrupt(RuntimeError):
    """The store on disk is damaged (truncated, emptied, a bad page). Never opened half-way:
    reading it through the map could SIGBUS the process or return garbage."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"memory store {path} is damaged: {problem}. Stop the daemon, move the directory "
            f"aside (mv {path} {path}.damaged) and start again with an empty store, or put "
            "back a copy from your backups"
        )


def _must(value: bytes | None) -> bytes:
    """Index entries always point at a record; a dangling one is corruption, said loudly."""
    if value is None:
        raise StoreCorrupt(Path("memory"), "an index entry points at a missing record")
    return value


class ScopeError(PermissionError):
    """An operation reached outside the caller's scope. Always a refusal, never a result."""


class MemoryInputError(ValueError):
    """Bad input for a memory operation (the message says which field)."""


class QuotaExceeded(Exception):
    """A write refused by one of the agent's quotas; nothing of it was written."""

    def __init__(self, refusal: OverQuota) -> None:
        super().__init__(refusal.detail)
        self.kind: QuotaKind = refusal.kind
        self.cap = refusal.cap


# What keeping one record or turn costs beyond its text (its LMDB keys, index entries,
# msgpack framing): counted too, so that empty texts cannot grow a store without bound.
RECORD_OVERHEAD_BYTES = 64
TURN_OVERHEAD_BYTES = 64


def record_bytes(key: str, content: str) -> int:
    """What a record counts against `max_bytes`: its key and content, UTF-8, and its
    keeping."""
    return len(key.encode()) + len(content.encode()) + RECORD_OVERHEAD_BYTES


def turn_bytes(content: str) -> int:
    """What a turn counts against the transcript caps: its content, UTF-8, and its
    keeping. A session's summary counts the same way, in its session."""
    return len(content.encode()) + TURN_OVERHEAD_BYTES


def fact_key(session: str, through_seq: int, index: int) -> str:
    """The key of the `index`-th fact (from 1) a compaction of `session` through
    `through_seq` stores: the same for a compaction sent again, so it never stores a fact
    twice (ADR 0059)."""
    return f"{COMPACTED_CATEGORY}/{session}/{through_seq}/{index}"


@dataclass(frozen=True)
class Scope:
    """Who is asking: the caller's own namespace, plus namespaces it may only read."""

    caller: str
    readable: frozenset[str] = frozenset()

    def may_read(self, namespace: str) -> bool:
        return namespace == self.caller or namespace in self.readable


@dataclass(frozen=True)
class OperatorScope:
    """The operator at the CLI: may read, export and purge any namespace."""

    reason: str = "operator"


TURN_ROLES = frozenset({"user", "assistant", "tool"})


WriteArgs = StoreArgs | ForgetArgs | AppendTurnArgs | AppendTurnsArgs | CompactArgs


@dataclass
class WriteOp:
    """One write in a group commit. Results are filled in by `apply_writes`."""

    scope: Scope
    args: WriteArgs  # the write's request struct, as it was decoded: no namespace in it
    quota: MemoryQuota = DEFAULT_QUOTA  # the caller's caps
    result: Any = None
    error: Exception | None = None
    dropped: int = 0  # oldest turns an append dropped to keep its session within caps


@dataclass(frozen=True)
class StoreUsage:
    """What one namespace's quotas count: records and their bytes, transcripts' bytes, each
    session's (turns, bytes), each outside sender's share."""

    records: int = 0
    record_bytes: int = 0
    transcript_bytes: int = 0
    sessions: dict[str, tuple[int, int]] = field(default_factory=dict)
    shares: dict[str, int] = field(default_factory=dict)


@dataclass
class RecallHit:
    record: Record
    score: float


@dataclass(frozen=True)
class SessionWindow:
    """A session as a turn is given it (ADR 0059): the newest turns that fit the history
    budget with the session's summary (oldest first, with their sequence numbers);
    whether older turns no summary covers were left out (`cut`); and, when a compaction
    was asked for and is due, the turns it should summarise (`overflow`, oldest first).
    `last`: the sequence number of the session's newest turn (0: it has none)."""

    turns: list[tuple[int, Turn]]
    digest: SessionDigest | None = None
    cut: bool = False
    overflow: list[tuple[int, Turn]] = field(default_factory=list)
    last: int = 0


@dataclass(frozen=True)
class Compacted:
    """A compaction's result: the session's summary now, how many turns it dropped, the
    keys of the facts it stored; `already` when an earlier one covered the range."""

    digest: SessionDigest
    dropped: int
    keys: list[str]
    already: bool = False


# An open LMDB named database, as lmdb's stubs name it.
Db = lmdb._Database
Dbs = dict[str, Db]  # kind ("records", "keys", ...) -> its handle


@dataclass
class _Handles:
    dbs: dict[str, Db] = field(default_factory=dict)


class MemoryStore:
    def __init__(self, path: Path, map_size: int = DEFAULT_MAP_SIZE) -> None:
        self.path = Path(path)
        key = os.path.realpath(self.path)
        with _open_lock:
            if key in _open_paths:
                raise RuntimeError(f"{self.path} is already open in this process")
            _open_paths.add(key)
        self._key = key
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            problem = data_file_problem(self.path / "data.mdb", os.sysconf("SC_PAGE_SIZE"))
            if problem is not None:
                raise StoreCorrupt(self.path, problem)
            try:
                self.env = lmdb.open(
                    str(self.path),
                    map_size=map_size,
                    max_dbs=MAX_DBS,
                    max_readers=MAX_READERS,
                    subdir=True,
                    sync=True,
                    metasync=True,
                    lock=True,
                )
            except lmdb.Error as exc:  # not an LMDB file, a version mismatch, a bad header
                raise StoreCorrupt(self.path, f"LMDB cannot open it ({exc})") from None
        except BaseException:
            with _open_lock:
                _open_paths.discard(key)
            raise
        self._dbs: dict[tuple[str, str], Db] = {}
        self._dbs_lock = threading.Lock()
        self.pid = os.getpid()
        try:
            self._check_integrity()
            self.stale_readers_cleared = self.env.reader_check()
            self.reindexed = self._check_format()
        except lmdb.Error as exc:
            self.close()
            raise StoreCorrupt(self.path, f"a page cannot be read ({exc})") from None
        except StoreCorrupt:
            self.close()
            raise

    def _check_integrity(self) -> None:
        """Before any read through the map: the file must hold every page the last commit
        uses, since a read past its end SIGBUSes the process. Pages are checked in a child
        by `open_verified` (LMDB aborts the process on some damaged pages)."""
        problem = committed_size_problem(self.env, self.path / "data.mdb")
        if problem is not None:
            raise StoreCorrupt(self.path, problem)

    @classmethod
    def open_verified(cls, path: Path, map_size: int = DEFAULT_MAP_SIZE) -> MemoryStore:
        """Open after every page was read once in a child process (`_verify`): a damaged
        store is a StoreCorrupt here, never a crash of the daemon at its first read."""
        from ._verify import verify_in_child  # a child process: only the openers need it

        verify_in_child(Path(path))
        return cls(path, map_size)

    def _check_format(self) -> int:
        """Refuse a store written by a newer zeroclaw; rebuild an older one's indexes.
        Returns how many namespaces were reindexed."""
        with self.env.begin() as txn:
            raw = txn.get(_FORMAT_KEY)
        found = _U32.unpack(raw)[0] if raw else 0
        if found > FORMAT_VERSION:
            self.close()
            raise RuntimeError(
                f"{self.path} was written by a newer zeroclaw (memory format {found}, this "
                f"version reads up to {FORMAT_VERSION}); upgrade zeroclaw"
            )
        if found == FORMAT_VERSION:
            # A namespace whose usage counters are missing is recounted (they are derived).
            stale = [ns for ns in self.namespaces() if not self._has_usage(ns)]
            for ns in stale:
                self._reindex(ns)
            return len(stale)
        namespaces = self.namespaces()
        for ns in namespaces:  # records are the truth; every index is derived from them
            self._reindex(ns)
        with self.env.begin(write=True) as txn:
            txn.put(_FORMAT_KEY, _U32.pack(FORMAT_VERSION))
        return len(namespaces)

    def _has_usage(self, namespace: str) -> bool:
        meta = self._db(namespace, "meta", create=False)
        if meta is None:
            return self._db(namespace, "records", create=False) is None
        with self.env.begin() as txn:
            return txn.get(_USAGE_MARK, db=meta) == _USAGE_KEPT

    def _reindex(self, namespace: str) -> None:
        h = self._handles(namespace)
        with self.env.begin(write=True) as txn:
            for kind in ("terms", "df", "meta"):
                txn.drop(h[kind], delete=False)
            records = [_rec_dec.decode(raw) for _, raw in txn.cursor(db=h["records"])]
            for record in records:
                self._index(txn, h, record)
            self._recount_transcripts(txn, h)
            txn.put(_USAGE_MARK, _USAGE_KEPT, db=h["meta"])

    def _recount_transcripts(self, txn: Any, h: Dbs) -> None:
        """Every session's (turns, bytes), each sender's share and the total, from the
        turns themselves (the meta db was emptied before)."""
        sessions: dict[bytes, list[int]] = {}
        for key, raw in txn.cursor(db=h["sessions"]):
            session = key[:-9]  # session 0x00 seq (8 bytes)
            usage = sessions.setdefault(session, [0, 0])
            usage[0] += 1
            usage[1] += turn_bytes(_turn_dec.decode(raw).content)
        for session, raw in txn.cursor(db=h["summaries"]):
            usage = sessions.setdefault(session, [0, 0])
            usage[1] += turn_bytes(_digest_dec.decode(raw).summary)
        shares: Counter[str] = Counter()
        for session, (turns, size) in sessions.items():
            txn.put(b"s\x00" + session, _SESSION_USAGE.pack(turns, size), db=h["meta"])
            share = sender_share(session.decode())
            if share is not None:
                shares[share] += size
        for share, size in shares.items():
            txn.put(b"p\x00" + share.encode(), _U64.pack(size), db=h["meta"])
        txn.put(_OUTSIDE_BYTES, _U64.pack(sum(shares.values())), db=h["meta"])
        total = sum(size for _, size in sessions.values())
        txn.put(b"tbytes", _U64.pack(total), db=h["meta"])

    def close(self) -> None:
        self.env.close()
        with _open_lock:
            _open_paths.discard(self._key)

    # --- plumbing ---------------------------------------------------------------------------

    def _check_fork(self) -> None:
        if os.getpid() != self.pid:
            raise RuntimeError("an LMDB environment must not be used across fork")

    def _db(self, namespace: str, kind: str, *, create: bool) -> Db | None:
        handle = self._dbs.get((namespace, kind))
        if handle is not None:
            return handle
        name = f"m/{namespace}/{kind}".encode()
        with self._dbs_lock:
            handle = self._dbs.get((namespace, kind))
            if handle is not None:
                return handle
            if not create:
                # Opening a named db without create needs it to exist; look first.
                with self.env.begin() as txn:
                    if txn.get(name) is None:
                        return None
            handle = self.env.open_db(name, create=create, dupsort=False)
            self._dbs[(namespace, kind)] = handle
            return handle

    def grow(self) -> int:
        """Double the map size. Only call with no transaction open in this process."""
        new = self.env.info()["map_size"] * 2
        self.env.set_mapsize(new)
        return int(new)

    def namespaces(self) -> list[str]:
        out = set()
        with self.env.begin() as txn:
            for name, _ in txn.cursor():
                parts = name.split(b"/")
                if len(parts) == 3 and parts[0] == b"m":
                    out.add(parts[1].decode())
        return sorted(out)

    # --- writes (one transaction for a whole batch) -----------------------------------------

    def apply_writes(self, ops: Sequence[WriteOp], now: float | None = None) -> None:
        """Apply a batch in one durable transaction. A bad op fails alone; MapFullError
        aborts the whole batch (nothing written) and propagates so the caller can grow."""
        self._check_fork()
        now = time.time() if now is None else now
        # Open (create) every db the batch needs before the write txn: open_db in a
        # nested write transaction would deadlock.
        for op in ops:
            for kind in _KINDS:
                self._db(op.scope.caller, kind, create=True)
        if any(isinstance(op.args, ForgetArgs) and op.args.id is not None for op in ops):
            # A forget by id looks for the id in other namespaces too, to refuse it typed.
            for namespace in self.namespaces():
                self._db(namespace, "records", create=False)
        with self.env.begin(write=True) as txn:
            for op in ops:
                op.result, op.error = None, None
                try:
                    self._apply(txn, op, now)
                except (MemoryInputError, ScopeError, QuotaExceeded) as exc:
                    op.error = exc
                except lmdb.Error:
                    raise  # MapFullError above all: the caller grows the map and retries
                except Exception as exc:  # wrong types from a caller: this op fails alone
                    op.error = MemoryInputError(f"bad arguments: {type(exc).__name__}: {exc}")

    def _apply(self, txn: Any, op: WriteOp, now: float) -> None:
        args = op.args
        if isinstance(args, StoreArgs):
            op.result = self._store(
                txn,
                op.scope,
                op.quota,
                now=now,
                key=args.key,
                content=args.content,
                category=args.category,
                session=args.session,
            )
        elif isinstance(args, ForgetArgs):
            op.result = self._forget(txn, op.scope, key=args.key, id=args.id)
        elif isinstance(args, AppendTurnArgs):
            turns = [(args.role, args.content)]
            op.result, op.dropped = self._append(txn, op, args.session, turns, now)
        elif isinstance(args, CompactArgs):
            op.result = self._compact(txn, op, args, now)
        else:  # AppendTurnsArgs: several turns of one session land in one commit or none
            turns = [(t.role, t.content) for t in args.turns]
            op.result, op.dropped = self._append(txn, op, args.session, turns, now)

    def _handles(self, namespace: str) -> Dbs:
        return {kind: self._created(namespace, kind) for kind in _KINDS}

    def _created(self, namespace: str, kind: str) -> Db:
        db = self._db(namespace, kind, create=True)
        assert db is not None  # created if it was not there
        return db

    def _store(
        self,
        txn: Any,
        scope: Scope,
        quota: MemoryQuota,
        *,
        key: str,
        content: str,
        category: str = "core",
        session: str | None = None,
        now: float,
    ) -> Record:
        if not key or len(key.encode()) > MAX_KEY_BYTES or "\x00" in key:
            raise MemoryInputError(f"key must be 1..{MAX_KEY_BYTES} bytes without NUL")
        if len(content.encode()) > MAX_CONTENT_BYTES:
            raise MemoryInputError(f"content is larger than {MAX_CONTENT_BYTES} bytes")
        if not valid_category(category):
            raise MemoryInputError("category must be 1..32 letters, digits, '_' or '-'")
        ns = scope.caller  # the only namespace a write can reach
        h = self._handles(ns)
        old_id = txn.get(key.encode(), db=h["keys"])
        old = None if old_id is None else _rec_dec.decode(_must(txn.get(old_id, db=h["records"])))
        decision = store_decision(
            quota,
            records=self._meta_u64(txn, h, b"docs"),
            record_bytes=self._meta_u64(txn, h, b"bytes"),
            new_bytes=record_bytes(key, content),
            old_bytes=None if old is None else record_bytes(old.key, old.content),
        )
        if isinstance(decision, OverQuota):
            raise QuotaExceeded(decision)
        created = now
        if old is not None:
            self._unindex(txn, h, old)
            record_id = old.id
            created = old.created_at
        else:
            record_id = new_id(now)
        tfs, length = term_frequencies(content)
        record = Record(
            id=record_id,
            agent=ns,
            key=key,
            content=content,
            category=category,
            created_at=created,
            updated_at=now,
            session=session,
            length=length,
        )
        rid = record_id.encode()
        txn.put(rid, _enc.encode(record), db=h["records"])
        txn.put(key.encode(), rid, db=h["keys"])
        txn.put(_U64BE.pack(int(created * 1000)) + rid, b"", db=h["time"])
        self._index(txn, h, record, tfs)
        return record

    def _index(self, txn: Any, h: Dbs, record: Record, tfs: Counter[str] | None = None) -> None:
        """Postings, document frequencies and totals for one record."""
        rid = record.id.encode()
        if tfs is None:
            tfs, _ = term_frequencies(record.content)
        length = record.length
        updated_ms = int(record.updated_at * 1000)
        for term, tf in tfs.items():
            t = term.encode()
            txn.put(t + b"\x00" + rid, _POSTING.pack(tf, length, updated_ms), db=h["terms"])
            df = txn.get(t, db=h["df"])
            txn.put(t, _U32.pack((_U32.unpack(df)[0] if df else 0) + 1), db=h["df"])
        self._bump(txn, h, docs=1, length=length, size=record_bytes(record.key, record.content))

    def _unindex(self, txn: Any, h: Dbs, record: Record) -> None:
        rid = record.id.encode()
        tfs, length = term_frequencies(record.content)
        for term in tfs:
            t = term.encode()
            txn.delete(t + b"\x00" + rid, db=h["terms"])
            df = txn.get(t, db=h["df"])
            left = (_U32.unpack(df)[0] if df else 1) - 1
            if left > 0:
                txn.put(t, _U32.pack(left), db=h["df"])
            else:
                txn.delete(t, db=h["df"])
        txn.delete(_U64BE.pack(int(record.created_at * 1000)) + rid, db=h["time"])
        size = record_bytes(record.key, record.content)
        self._bump(txn, h, docs=-1, length=-length, size=-size)

    def _bump(self, txn: Any, h: Dbs, *, docs: int, length: int, size: int) -> None:
        for name, delta in ((b"docs", docs), (b"length", length), (b"bytes", size)):
            self._add_u64(txn, h["meta"], name, delta)
        txn.put(_USAGE_MARK, _USAGE_KEPT, db=h["meta"])

    @staticmethod
    def _add_u64(txn: Any, db: Any, name: bytes, delta: int) -> None:
        raw = txn.get(name, db=db)
        txn.put(name, _U64.pack(max((_U64.unpack(raw)[0] if raw else 0) + delta, 0)), db=db)

    @staticmethod
    def _meta_u64(txn: Any, h: Dbs, name: bytes) -> int:
        raw = txn.get(name, db=h["meta"])
        return int(_U64.unpack(raw)[0]) if raw else 0

    def _forget(
        self, txn: Any, scope: Scope, *, key: str | None = None, id: str | None = None
    ) -> bool:
        h = self._handles(scope.caller)  # only ever the caller's own namespace
        if id is None:
            if key is None:
                raise MemoryInputError("forget needs a key or an id")
            raw = txn.get(key.encode(), db=h["keys"])
            if raw is None:
                return False
            id = raw.decode()
        raw_record = txn.get(id.encode(), db=h["records"])
        if raw_record is None:
            for (namespace, kind), handle in list(self._dbs.items()):
                if (
                    kind == "records"
                    and namespace != scope.caller
                    and txn.get(id.encode(), db=handle)
                ):
                    # Ids are unique across namespaces: a typed refusal, the record untouched.
                    raise ScopeError(
                        f"record {id} is in another agent's memory; an agent forgets only "
                        "its own records"
                    )
            return False  # not there: nothing to forget
        record = _rec_dec.decode(raw_record)
        self._unindex(txn, h, record)
        txn.delete(id.encode(), db=h["records"])
        txn.delete(record.key.encode(), db=h["keys"])
        return True

    def _append(
        self, txn: Any, op: WriteOp, session: str, turns: list[tuple[str, str]], now: float
    ) -> tuple[int, int]:
        """Append `turns` to `session` within the caller's quota: the oldest turns of the
        session are dropped to make room, or the whole append is refused. Every entry is
        checked before the first is written: an op that fails writes nothing. Returns the
        last sequence number written and how many turns were dropped."""
        _check_session(session)
        # msgspec does not check types when a struct is built: a bad turn stored now would
        # make the whole session unreadable later.
        for role, content in turns:
            if role not in TURN_ROLES or not isinstance(content, str):
                raise MemoryInputError(
                    f"a turn has a role in {sorted(TURN_ROLES)} and text content"
                )
        h = self._handles(op.scope.caller)
        db, meta = h["sessions"], h["meta"]
        prefix = session.encode() + b"\x00"
        usage = _session_usage(txn, meta, session)
        sizes = [turn_bytes(content) for _, content in turns]

        def oldest() -> Iterator[int]:
            cursor = txn.cursor(db=db)
            ok = cursor.set_range(prefix)
            while ok and cursor.key().startswith(prefix):
                yield turn_bytes(_turn_dec.decode(cursor.value()).content)
                ok = cursor.next()

        decision = transcript_decision(
            op.quota,
            turns=usage.turns,
            session_bytes=usage.size,
            oldest=oldest(),
            new=sizes,
            transcript_bytes=self._meta_u64(txn, h, b"tbytes"),
            share_bytes=None if usage.share is None else self._meta_u64(txn, h, usage.share),
            outside_bytes=self._meta_u64(txn, h, _OUTSIDE_BYTES),
        )
        if isinstance(decision, OverQuota):
            raise QuotaExceeded(decision)
        cursor = txn.cursor(db=db)
        seq = 0
        # The last entry of this session: position after the prefix range, step back.
        if cursor.set_range(prefix + b"\xff" * 8):
            if cursor.prev() and cursor.key().startswith(prefix):
                seq = _U64BE.unpack(cursor.key()[len(prefix) :])[0] + 1
        elif cursor.last() and cursor.key().startswith(prefix):
            seq = _U64BE.unpack(cursor.key()[len(prefix) :])[0] + 1
        digest = txn.get(session.encode(), db=h["summaries"])
        if digest is not None:  # numbers go on after the turns a compaction dropped
            seq = max(seq, _digest_dec.decode(digest).through_seq + 1)
        dropped = 0
        if decision.drop:
            cursor = txn.cursor(db=db)
            ok = cursor.set_range(prefix)
            while ok and dropped < decision.drop and cursor.key().startswith(prefix):
                ok = cursor.delete()  # moves to the next entry
                dropped += 1
        for offset, (role, content) in enumerate(turns):
            txn.put(
                prefix + _U64BE.pack(seq + offset), _enc.encode(Turn(role, content, now)), db=db
            )
        self._moved(txn, meta, usage, len(turns) - dropped, sum(sizes) - decision.dropped_bytes)
        return seq + len(turns) - 1, dropped

    def _compact(self, txn: Txn, op: WriteOp, args: CompactArgs, now: float) -> Compacted:
        """Store the facts, drop the session's turns up to `through_seq` and keep the
        summary in their place, in one nested transaction: all of it or, when a part is
        refused (a quota, a bad fact), nothing. A range an earlier compaction covered
        changes nothing (a compaction sent again after a lost answer, ADR 0059)."""
        _check_session(args.session)
        h = self._handles(op.scope.caller)
        session = args.session.encode()
        raw = txn.get(session, db=h["summaries"])
        old = None if raw is None else _digest_dec.decode(raw)
        if old is not None and old.through_seq >= args.through_seq:
            return Compacted(old, 0, [], already=True)
        keys = [fact_key(args.session, args.through_seq, i) for i in range(1, len(args.facts) + 1)]
        with self.env.begin(write=True, parent=txn) as child:
            for key, fact in zip(keys, args.facts, strict=True):
                self._store(
                    child,
                    op.scope,
                    op.quota,
                    key=key,
                    content=fact,
                    category=COMPACTED_CATEGORY,
                    session=args.session,
                    now=now,
                )
            prefix = session + b"\x00"
            dropped = dropped_bytes = 0
            cursor = child.cursor(db=h["sessions"])
            ok = cursor.set_range(prefix)
            while ok and cursor.key().startswith(prefix):
                if _U64BE.unpack(cursor.key()[len(prefix) :])[0] > args.through_seq:
                    break
                dropped_bytes += turn_bytes(_turn_dec.decode(cursor.value()).content)
                ok = cursor.delete()  # moves to the next entry
                dropped += 1
            digest = SessionDigest(
                args.summary,
                args.from_seq if old is None else old.first_seq,
                args.through_seq,
                dropped + (0 if old is None else old.turns),
                now,
            )
            old_bytes = 0 if old is None else turn_bytes(old.summary)
            growth = turn_bytes(args.summary) - old_bytes - dropped_bytes
            usage = _session_usage(child, h["meta"], args.session)
            decision = compaction_decision(
                op.quota,
                session_bytes=usage.size,
                growth=growth,
                transcript_bytes=self._meta_u64(child, h, b"tbytes"),
                share_bytes=None if usage.share is None else self._meta_u64(child, h, usage.share),
                outside_bytes=self._meta_u64(child, h, _OUTSIDE_BYTES),
            )
            if isinstance(decision, OverQuota):
                raise QuotaExceeded(decision)
            self._moved(child, h["meta"], usage, -dropped, growth)
            child.put(session, _enc.encode(digest), db=h["summaries"])
        return Compacted(digest, dropped, keys)

    def _moved(self, txn: Txn, meta: Db, usage: _SessionUsage, turns: int, growth: int) -> None:
        """A session's turns and bytes change by `turns` and `growth`, and its agent's (and
        its sender's, and all outside senders') transcript bytes by `growth`."""
        txn.put(
            usage.key,
            _SESSION_USAGE.pack(max(usage.turns + turns, 0), max(usage.size + growth, 0)),
            db=meta,
        )
        self._add_u64(txn, meta, b"tbytes", growth)
        if usage.share is not None:
            self._add_u64(txn, meta, usage.share, growth)
            self._add_u64(txn, meta, _OUTSIDE_BYTES, growth)
        txn.put(_USAGE_MARK, _USAGE_KEPT, db=meta)

    # --- reads ------------------------------------------------------------------------------

    def _readable(
        self, scope: Scope | OperatorScope, namespaces: Sequence[str] | None
    ) -> list[str]:
        if isinstance(scope, OperatorScope):
            return list(namespaces) if namespaces is not None else self.namespaces()
        wanted = [scope.caller] if namespaces is None else list(namespaces)
        for ns in wanted:
            if not scope.may_read(ns):
                raise ScopeError(f"{scope.caller!r} may not read the memory of {ns!r}")
        return wanted

    def _read_handles(
        self, scope: Scope | OperatorScope, namespaces: Sequence[str] | None, kinds: Sequence[str]
    ) -> dict[str, Dbs]:
        """Scope-check, then open every handle a read needs, before its transaction begins.
        Namespaces that have never been written to are skipped."""
        out = {}
        for ns in self._readable(scope, namespaces):
            dbs = {kind: self._db(ns, kind, create=False) for kind in kinds}
            opened = {kind: db for kind, db in dbs.items() if db is not None}
            if len(opened) == len(dbs):
                out[ns] = opened
        return out

    def _one_namespace(self, scope: Scope | OperatorScope, namespace: str | None) -> str:
        if namespace is None:
            if isinstance(scope, OperatorScope):
                raise MemoryInputError("the operator must name the agent")
            namespace = scope.caller
        (ns,) = self._readable(scope, [namespace])
        return ns

    def get(
        self,
        scope: Scope | OperatorScope,
        *,
        key: str | None = None,
        id: str | None = None,
        namespace: str | None = None,
    ) -> Record | None:
        self._check_fork()
        ns = self._one_namespace(scope, namespace)
        # Handles first: opening a named db inside a read transaction of the same thread
        # is invalid in LMDB.
        records, keys = self._db(ns, "records", create=False), self._db(ns, "keys", create=False)
        if records is None or keys is None:
            return None
        with self.env.begin() as txn:
            if id is None:
                if key is None:
                    raise MemoryInputError("get needs a key or an id")
                raw_id = txn.get(key.encode(), db=keys)
                if raw_id is None:
                    return None
                id = raw_id.decode()
            raw = txn.get(id.encode(), db=records)
            return None if raw is None else _rec_dec.decode(raw)

    def list_records(
        self,
        scope: Scope | OperatorScope,
        *,
        namespaces: Sequence[str] | None = None,
        category: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[Record]:
        """Newest first. Page with `before=<last id of the previous page>`."""
        self._check_fork()
        out: list[Record] = []
        handles = self._read_handles(scope, namespaces, ("time", "records"))
        with self.env.begin() as txn:
            for dbs in handles.values():
                tdb, rdb = dbs["time"], dbs["records"]
                cursor = txn.cursor(db=tdb)
                upper = _U64BE.pack(int((until if until is not None else 2**40) * 1000) + 1)
                positioned = cursor.set_range(upper)
                ok = cursor.prev() if positioned else cursor.last()
                count = 0
                while ok and count < limit:
                    k = cursor.key()
                    created_ms = _U64BE.unpack(k[:8])[0]
                    if since is not None and created_ms < since * 1000:
                        break
                    rid = k[8:].decode()
                    if before is None or rid < before:
                        record = _rec_dec.decode(_must(txn.get(k[8:], db=rdb)))
                        if category is None or record.category == category:
                            out.append(record)
                            count += 1
                    ok = cursor.prev()
        out.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return out[:limit]

    def recall(
        self,
        scope: Scope | OperatorScope,
        query: str,
        *,
        namespaces: Sequence[str] | None = None,
        limit: int = 10,
        now: float | None = None,
    ) -> list[RecallHit]:
        """BM25 over each namespace's own statistics, times a recency boost; best first."""
        self._check_fork()
        terms = sorted(set(tokenize(query)))
        if not terms:
            return []
        handles = self._read_handles(scope, namespaces, _RANKING_KINDS)
        with self.env.begin() as txn:
            return self._ranked(txn, handles, terms, limit, now)

    def _ranked(
        self,
        txn: Txn,
        handles: dict[str, Dbs],
        terms: list[str],
        limit: int,
        now: float | None,
        max_terms: int | None = None,
    ) -> list[RecallHit]:
        """The `limit` best records for `terms` over the namespaces of `handles`; with
        `max_terms`, by each namespace's `max_terms` rarest of them."""
        now = time.time() if now is None else now
        hits: list[RecallHit] = []
        for dbs in handles.values():
            docs_raw = txn.get(b"docs", db=dbs["meta"])
            docs = _U64.unpack(docs_raw)[0] if docs_raw else 0
            if docs == 0:
                continue
            length_raw = txn.get(b"length", db=dbs["meta"])
            avg = (_U64.unpack(length_raw)[0] if length_raw else 0) / docs
            partial: dict[bytes, float] = {}  # record id -> summed BM25 of matched terms
            updated: dict[bytes, int] = {}  # record id -> updated_at in ms
            cursor = txn.cursor(db=dbs["terms"])
            found = []  # (df, term) of the terms this namespace has
            for term in terms:
                df_raw = txn.get(term.encode(), db=dbs["df"])
                if df_raw is not None:
                    found.append((_U32.unpack(df_raw)[0], term))
            if max_terms is not None:
                found = sorted(found)[:max_terms]
            for df, term in found:
                t = term.encode()
                term_idf = idf(docs, df)
                prefix = t + b"\x00"
                if not cursor.set_range(prefix):
                    continue
                cut = len(prefix)
                # bm25() inlined with its per-term constants hoisted: this loop runs once
                # per posting and is recall's whole cost.
                lift = term_idf * (BM25_K1 + 1)
                base = BM25_K1 * (1 - BM25_B)
                slope = BM25_K1 * BM25_B / max(avg, 1e-9)
                unpack = _POSTING.unpack
                get = partial.get
                for k, v in cursor:
                    if not k.startswith(prefix):
                        break
                    tf, doc_len, updated_ms = unpack(v)
                    rid = k[cut:]
                    partial[rid] = get(rid, 0.0) + lift * tf / (tf + base + slope * doc_len)
                    updated[rid] = updated_ms
            # recency_boost() inlined for the same reason: one multiply per candidate.
            now_ms = now * 1000
            decay = math.log(0.5) / (RECENCY_HALF_LIFE_SECS * 1000)
            exp = math.exp
            scored = [
                (total * (1 + RECENCY_WEIGHT * exp(decay * max(now_ms - updated[rid], 0))), rid)
                for rid, total in partial.items()
            ]
            ranked = heapq.nlargest(limit, scored)
            for s, rid in ranked:  # only now read the records we will return
                record = _rec_dec.decode(_must(txn.get(rid, db=dbs["records"])))
                hits.append(RecallHit(record, s))
        hits.sort(key=lambda h: (-h.score, h.record.id))
        return hits[:limit]

    def context(
        self,
        scope: Scope,
        session: str,
        *,
        history_tokens: int,
        compact: bool = False,
        query: str = "",
        limit: int = 0,
        now: float | None = None,
    ) -> tuple[SessionWindow, list[RecallHit]]:
        """What a turn is given (ADR 0059), in one read transaction: the session's window
        (`SessionWindow`) within `history_tokens`, and the `limit` records of the caller's
        namespace and of every namespace it may read that rank best against `query`."""
        self._check_fork()
        turns_db = self._db(scope.caller, "sessions", create=False)
        digests_db = self._db(scope.caller, "summaries", create=False)
        terms = sorted(set(tokenize(query))) if limit else []
        readable = [scope.caller, *sorted(scope.readable)]
        handles = self._read_handles(scope, readable, _RANKING_KINDS) if terms else {}
        with self.env.begin() as txn:
            raw = None if digests_db is None else txn.get(session.encode(), db=digests_db)
            digest = None if raw is None else _digest_dec.decode(raw)
            window = SessionWindow([], digest)
            if turns_db is not None:
                window = _window(txn, turns_db, session, digest, history_tokens, compact)
            hits = self._ranked(txn, handles, terms, limit, now, CONTEXT_TERMS) if terms else []
        return window, hits

    def session(self, scope: Scope, session: str, *, limit: int = 200) -> list[Turn]:
        """The last `limit` turns of one of the caller's own sessions, oldest first."""
        self._check_fork()
        db = self._db(scope.caller, "sessions", create=False)
        if db is None:
            return []
        prefix = session.encode() + b"\x00"
        turns: list[Turn] = []
        with self.env.begin() as txn:
            cursor = txn.cursor(db=db)
            positioned = cursor.set_range(prefix + b"\xff" * 8)
            ok = cursor.prev() if positioned else cursor.last()
            while ok and cursor.key().startswith(prefix) and len(turns) < limit:
                turns.append(_turn_dec.decode(cursor.value()))
                ok = cursor.prev()
        turns.reverse()
        return turns

    def digest(self, scope: Scope, session: str) -> SessionDigest | None:
        """The summary compactions kept of one of the caller's sessions, if any."""
        self._check_fork()
        db = self._db(scope.caller, "summaries", create=False)
        if db is None:
            return None
        with self.env.begin() as txn:
            raw = txn.get(session.encode(), db=db)
        return None if raw is None else _digest_dec.decode(raw)

    def sessions(
        self, scope: Scope | OperatorScope, namespace: str | None = None
    ) -> list[SessionSummary]:
        """Every session of one readable namespace, by key; a key holds no NUL, so the
        entry key `session 0x00 seq` splits at its last 9 bytes."""
        self._check_fork()
        ns = self._one_namespace(scope, namespace)
        db = self._db(ns, "sessions", create=False)
        if db is None:
            return []
        out: list[SessionSummary] = []
        with self.env.begin() as txn:
            cursor = txn.cursor(db=db)
            ok = cursor.first()
            while ok:
                prefix = cursor.key()[:-8]
                first = _U64BE.unpack(cursor.key()[-8:])[0]
                # The session's last entry: position after its range, step back.
                positioned = cursor.set_range(prefix + b"\xff" * 8)
                if not (cursor.prev() if positioned else cursor.last()):
                    break
                last = _U64BE.unpack(cursor.key()[-8:])[0]
                at = _turn_dec.decode(cursor.value()).at
                out.append(SessionSummary(prefix[:-1].decode(), last - first + 1, at))
                ok = cursor.next()
        return out

    def export(
        self, scope: Scope | OperatorScope, namespace: str | None = None
    ) -> Iterator[Record]:
        """Every record of one readable namespace, oldest first."""
        self._check_fork()
        ns = self._one_namespace(scope, namespace)
        rdb = self._db(ns, "records", create=False)
        if rdb is None:
            return
        with self.env.begin() as txn:
            for _, raw in txn.cursor(db=rdb):
                yield _rec_dec.decode(raw)

    def stats(self, scope: Scope | OperatorScope) -> dict[str, dict[str, int]]:
        self._check_fork()
        namespaces = (
            self.namespaces()
            if isinstance(scope, OperatorScope)
            else [ns for ns in self.namespaces() if scope.may_read(ns)]
        )
        out = {}
        handles = {
            ns: (self._db(ns, "meta", create=False), self._db(ns, "sessions", create=False))
            for ns in namespaces
        }
        with self.env.begin() as txn:
            for ns, (meta, sessions) in handles.items():
                h: Dbs = {} if meta is None else {"meta": meta}
                known = meta is not None
                out[ns] = {
                    "records": self._meta_u64(txn, h, b"docs") if known else 0,
                    "session_turns": txn.stat(sessions)["entries"] if sessions is not None else 0,
                    "record_bytes": self._meta_u64(txn, h, b"bytes") if known else 0,
                    "transcript_bytes": self._meta_u64(txn, h, b"tbytes") if known else 0,
                }
        return out

    def usage(self, namespace: str) -> StoreUsage:
        """The usage counters as kept (what the quota decisions read)."""
        self._check_fork()
        meta = self._db(namespace, "meta", create=False)
        if meta is None:
            return StoreUsage()
        h = {"meta": meta}
        sessions: dict[str, tuple[int, int]] = {}
        shares: dict[str, int] = {}
        with self.env.begin() as txn:
            for key, value in txn.cursor(db=meta):
                if key.startswith(b"s\x00"):
                    turns, size = _SESSION_USAGE.unpack(value)
                    if turns:
                        sessions[key[2:].decode()] = (turns, size)
                elif key.startswith(b"p\x00") and _U64.unpack(value)[0]:
                    shares[key[2:].decode()] = _U64.unpack(value)[0]
            return StoreUsage(
                self._meta_u64(txn, h, b"docs"),
                self._meta_u64(txn, h, b"bytes"),
                self._meta_u64(txn, h, b"tbytes"),
                sessions,
                shares,
            )

    def recounted_usage(self, namespace: str) -> StoreUsage:
        """The same usage, counted from the records and turns themselves (for checks)."""
        self._check_fork()
        records = self._db(namespace, "records", create=False)
        turns_db = self._db(namespace, "sessions", create=False)
        digests_db = self._db(namespace, "summaries", create=False)
        if records is None or turns_db is None:
            return StoreUsage()
        count = size = 0
        sessions: dict[str, tuple[int, int]] = {}
        shares: Counter[str] = Counter()
        with self.env.begin() as txn:
            for _, raw in txn.cursor(db=records):
                record = _rec_dec.decode(raw)
                count += 1
                size += record_bytes(record.key, record.content)
            for key, raw in txn.cursor(db=turns_db):
                session = key[:-9].decode()
                turns, held = sessions.get(session, (0, 0))
                sessions[session] = (turns + 1, held + turn_bytes(_turn_dec.decode(raw).content))
            summaries = [] if digests_db is None else list(txn.cursor(db=digests_db))
        for key, raw in summaries:  # a session's summary counts in its bytes
            turns, held = sessions.get(key.decode(), (0, 0))
            sessions[key.decode()] = (turns, held + turn_bytes(_digest_dec.decode(raw).summary))
        for session, (_, held) in sessions.items():
            share = sender_share(session)
            if share is not None:
                shares[share] += held
        total = sum(held for _, held in sessions.values())
        # As `usage` lists them: the sessions that hold turns.
        held_turns = {session: usage for session, usage in sessions.items() if usage[0]}
        return StoreUsage(count, size, total, held_turns, dict(shares))

    def purge(self, scope: OperatorScope, namespace: str) -> int:
        """Drop a whole namespace. Operator only: an agent's Scope is refused."""
        if not isinstance(scope, OperatorScope):
            raise ScopeError("purging a namespace is for the operator CLI only")
        self._check_fork()
        count = self.stats(scope).get(namespace, {}).get("records", 0)
        dbs = [self._db(namespace, kind, create=False) for kind in _KINDS]
        with self.env.begin(write=True) as txn:
            for db in dbs:
                if db is not None:
                    txn.drop(db, delete=True)
        with self._dbs_lock:
            for kind in _KINDS:
                self._dbs.pop((namespace, kind), None)
        return int(count)


@dataclass(frozen=True)
class _SessionUsage:
    key: bytes  # its counters' key in the meta db
    turns: int
    size: int  # bytes
    share: bytes | None  # its outside sender's counter key, if it has one


def _session_usage(txn: Txn, meta: Db, session: str) -> _SessionUsage:
    key = b"s\x00" + session.encode()
    raw = txn.get(key, db=meta)
    turns, size = _SESSION_USAGE.unpack(raw) if raw else (0, 0)
    share = sender_share(session)
    return _SessionUsage(key, turns, size, None if share is None else b"p\x00" + share.encode())


def _check_session(session: str) -> None:
    if not session or len(session.encode()) > MAX_SESSION_BYTES or "\x00" in session:
        raise MemoryInputError(f"session must be 1..{MAX_SESSION_BYTES} bytes without NUL")


def _window(
    txn: Txn,
    db: Db,
    session: str,
    digest: SessionDigest | None,
    history_tokens: int,
    compact: bool,
) -> SessionWindow:
    """A session's window, read newest first only as far as the budget goes; the rule is
    ADR 0059's. Left for the summary: the budget less the summary's own tokens. Shown:
    the newest turns that fit in what is left, from a user turn. When some do not fit and
    a compaction is asked for, the turns to summarise: the oldest (no more than
    `history_tokens` of them at once), up to the newest turns that fit in half of what is
    left (at least the last two, and from the user turn that opened them)."""
    left = history_tokens - (message_tokens(digest.summary) if digest is not None else 0)
    prefix = session.encode() + b"\x00"
    cursor = txn.cursor(db=db)
    positioned = cursor.set_range(prefix + b"\xff" * 8)
    ok = cursor.prev() if positioned else cursor.last()
    seen: list[tuple[int, Turn, int]] = []  # newest first: (seq, turn, its tokens)
    used = 0
    cut = False
    while ok and cursor.key().startswith(prefix):
        turn = _turn_dec.decode(cursor.value())
        cost = message_tokens(turn.content)
        seen.append((_U64BE.unpack(cursor.key()[-8:])[0], turn, cost))
        if used + cost > left:
            cut = True
            break
        used += cost
        ok = cursor.prev()
    shown = [(seq, turn) for seq, turn, _ in (seen[:-1] if cut else seen)]
    shown.reverse()
    if cut:  # a model's history opens with a user turn (Anthropic's API requires it)
        while shown and shown[0][1].role != "user":
            shown.pop(0)
    last = seen[0][0] if seen else 0
    if not (cut and compact):
        return SessionWindow(shown, digest, cut, last=last)
    kept = keep_tokens = 0
    for _, _, cost in seen:
        if keep_tokens + cost > left // 2:
            break
        kept += 1
        keep_tokens += cost
    kept = min(max(kept, 2), len(seen))
    keep_from, first_kept, _ = seen[kept - 1]
    overflow: list[tuple[int, Turn]] = []
    tokens = 0
    ok = cursor.set_range(prefix)
    while ok and cursor.key().startswith(prefix):
        seq = _U64BE.unpack(cursor.key()[-8:])[0]
        if seq >= keep_from:
            # The kept turns start with the user turn that opened them.
            if overflow and first_kept.role != "user" and overflow[-1][1].role == "user":
                overflow.pop()
            break
        turn = _turn_dec.decode(cursor.value())
        tokens += message_tokens(turn.content)
        if overflow and tokens > history_tokens:
            break
        overflow.append((seq, turn))
        ok = cursor.next()
    return SessionWindow(shown, digest, cut, overflow, last)
