"""What the daemon keeps of its schedules across restarts: `<state_dir>/schedules`.

One LMDB environment, opened by the daemon alone (an exclusive lock file says so to a
second opener), every write one durable transaction (sync on commit). The shell writes a
batch of the scheduler's marks in one transaction before it acts on any of them, so a fire
is on disk before its turn starts, and a kill -9 leaves the marks of before the batch or
after it, never part.

Named databases (values msgpack):
  marks      "<agent>.<name>" -> StoredMark     (the scheduler's Mark)
  runs       "<agent>.<name>" -> StoredRun      (how its last run ended)
  reminders  "<agent>.<name>" -> StoredReminder (an agent-made schedule)
  meta       b"format" -> u32; b"seq" 0x00 agent -> u64 (its reminders' last number)

Blocking: the service calls it through `trio.to_thread.run_sync`. Opened after the zygote
exists and never carried across a fork (LMDB's rule).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import lmdb
import msgspec

from .._flock import FileLock, LockHeld
from .._lmdb import Unusable, disk_full, open_checked, walk_in_child
from ._spec import Mark, Running, RunSummary, ScheduleSpec
from ._triggers import Cron, Every, Once, Trigger

DEFAULT_MAP_SIZE = 1 << 24  # 16 MiB up front; doubles on MapFullError
MAX_MAP_SIZE = 1 << 34
FORMAT_VERSION = 1
VERIFY_TIMEOUT_SECS = 300.0
_DBS = ("marks", "runs", "reminders", "meta")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
T = TypeVar("T")


class StoredRunning(msgspec.Struct, frozen=True):
    run_id: str
    slot: float | None
    started_at: float


class StoredMark(msgspec.Struct, frozen=True, omit_defaults=True):
    last_slot: float | None = None
    paused: bool = False
    running: StoredRunning | None = None
    queued: float | None = None


class StoredRun(msgspec.Struct, frozen=True, omit_defaults=True):
    run_id: str
    outcome: str
    ended_at: float
    detail: str = ""
    slot: float | None = None


class StoredReminder(msgspec.Struct, frozen=True, omit_defaults=True):
    """One trigger of three: `at` (once), `every` (from `anchor`), or `cron` in `timezone`."""

    agent: str
    name: str
    text: str
    deliver_to: str
    created_by: str
    created_at: float
    at: float | None = None
    every: float | None = None
    anchor: float = 0.0
    cron: str | None = None
    timezone: str = "UTC"


class ScheduleStoreError(RuntimeError):
    """The store cannot do what was asked; the message says why and the fix."""


class ScheduleStoreCorrupt(ScheduleStoreError):
    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        super().__init__(
            f"schedule store {path} is damaged: {problem}. Stop the daemon and move it aside "
            f"(mv {path} {path}.damaged): schedules then count from the next start (runs "
            "missed meanwhile are not caught up, agents' reminders are lost), or put back a "
            "copy from your backups"
        )


class ScheduleStoreLocked(ScheduleStoreError):
    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"schedule store {path} is in use by {holder} (another zeroclaw daemon on the same "
            "state_dir?); only one daemon may open it"
        )


@dataclass(frozen=True)
class Loaded:
    marks: tuple[Mark, ...]
    runs: dict[str, RunSummary]
    reminders: tuple[ScheduleSpec, ...]


def mark_of(key: str, stored: StoredMark) -> Mark:
    running = stored.running
    return Mark(
        key,
        stored.last_slot,
        stored.paused,
        None if running is None else Running(running.run_id, running.slot, running.started_at),
        stored.queued,
    )


def stored_mark(mark: Mark) -> StoredMark:
    running = mark.running
    return StoredMark(
        mark.last_slot,
        mark.paused,
        None
        if running is None
        else StoredRunning(running.run_id, running.slot, running.started_at),
        mark.queued,
    )


def reminder_spec(record: StoredReminder) -> ScheduleSpec:
    trigger: Trigger
    if record.at is not None:
        trigger = Once(record.at)
    elif record.every is not None:
        trigger = Every(record.every, record.anchor)
    else:
        assert record.cron is not None
        trigger = Cron(record.cron, record.timezone)
    return ScheduleSpec(
        record.agent,
        record.name,
        trigger,
        record.text,
        kind="reminder",
        deliver_to=record.deliver_to,
        created_by=record.created_by,
        created_at=record.created_at,
    )


def stored_reminder(spec: ScheduleSpec) -> StoredReminder:
    trigger = spec.trigger
    base = StoredReminder(
        spec.agent,
        spec.name,
        spec.text,
        spec.deliver_to,
        spec.created_by or "",
        spec.created_at or 0.0,
    )
    if isinstance(trigger, Once):
        return msgspec.structs.replace(base, at=trigger.at)
    if isinstance(trigger, Every):
        return msgspec.structs.replace(base, every=trigger.interval, anchor=trigger.anchor)
    return msgspec.structs.replace(base, cron=trigger.expr, timezone=trigger.timezone)


_enc = msgspec.msgpack.Encoder()
_mark_dec = msgspec.msgpack.Decoder(StoredMark)
_run_dec = msgspec.msgpack.Decoder(StoredRun)
_reminder_dec = msgspec.msgpack.Decoder(StoredReminder)


@dataclass(frozen=True)
class Batch:
    """One durable write: marks to keep, keys to forget (with their run and reminder),
    last runs, reminders added, reminders deleted (`dropped`: their mark stays, so a run
    in progress is still reported if the daemon dies in it)."""

    marks: Sequence[Mark] = ()
    forget: Sequence[str] = ()
    runs: Sequence[tuple[str, RunSummary]] = ()
    reminders: Sequence[ScheduleSpec] = ()
    dropped: Sequence[str] = ()

    def __bool__(self) -> bool:
        return bool(self.marks or self.forget or self.runs or self.reminders or self.dropped)


class ScheduleStore:
    def __init__(self, path: Path, *, map_size: int = DEFAULT_MAP_SIZE) -> None:
        self.path = Path(path)
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = FileLock(self.path / "owner.lock", record_pid=True)
        try:
            self._lock.acquire()
        except LockHeld as exc:
            raise ScheduleStoreLocked(self.path, exc.pid) from None
        try:
            self.env, self._dbs = self._open(map_size)
        except BaseException:
            self._lock.release()
            raise
        self._pid = os.getpid()
        self._mutex = threading.Lock()

    @classmethod
    def open_verified(cls, path: Path, *, timeout: float = VERIFY_TIMEOUT_SECS) -> ScheduleStore:
        """Open after a child read every page once (LMDB has no checksums, and some damaged
        pages abort() the reader, which must not be the daemon)."""
        path = Path(path)
        if (path / "data.mdb").exists():
            problem = walk_in_child(["zeroclaw._lmdb", str(path), *_DBS], timeout)
            if problem is not None:
                raise ScheduleStoreCorrupt(path, problem)
        return cls(path)

    def _open(self, map_size: int) -> tuple[lmdb.Environment, dict[str, lmdb._Database]]:
        try:
            env = open_checked(
                self.path, map_size=map_size, max_dbs=len(_DBS) + 1, sync=True, lock=True
            )
        except Unusable as exc:
            raise ScheduleStoreCorrupt(self.path, str(exc)) from None
        try:
            dbs = {name: env.open_db(name.encode(), create=True) for name in _DBS}
            with env.begin(write=True) as txn:
                raw = txn.get(b"format", db=dbs["meta"])
                found = _U32.unpack(raw)[0] if raw else 0
                if found > FORMAT_VERSION:
                    raise ScheduleStoreError(
                        f"{self.path} was written by a newer zeroclaw (schedule store format "
                        f"{found}, this version reads up to {FORMAT_VERSION}); upgrade zeroclaw"
                    )
                if found == 0:
                    txn.put(b"format", _U32.pack(FORMAT_VERSION), db=dbs["meta"])
        except lmdb.Error as exc:
            env.close()
            raise ScheduleStoreCorrupt(self.path, f"a page cannot be read ({exc})") from None
        except BaseException:
            env.close()
            raise
        return env, dbs

    def close(self) -> None:
        with self._mutex:
            self.env.close()
            self._lock.release()

    def __enter__(self) -> ScheduleStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- plumbing ---------------------------------------------------------------------

    def _write(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        if os.getpid() != self._pid:
            raise RuntimeError("an LMDB environment must not be used across fork")
        with self._mutex:
            while True:
                try:
                    with self.env.begin(write=True) as txn:
                        return fn(txn)
                except lmdb.MapFullError:
                    size = int(self.env.info()["map_size"])
                    if size * 2 > MAX_MAP_SIZE:
                        raise ScheduleStoreError(f"schedule store {self.path} is full") from None
                    self.env.set_mapsize(size * 2)
                except lmdb.Error as exc:
                    what = "the disk is full; free some space" if disk_full(exc) else str(exc)
                    raise ScheduleStoreError(f"schedule store {self.path}: {what}") from exc

    def _read(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        if os.getpid() != self._pid:
            raise RuntimeError("an LMDB environment must not be used across fork")
        try:
            with self._mutex, self.env.begin() as txn:
                return fn(txn)
        except (lmdb.Error, msgspec.DecodeError) as exc:
            raise ScheduleStoreError(f"schedule store {self.path}: {exc}") from exc

    # --- the store --------------------------------------------------------------------

    def load(self) -> Loaded:
        def fn(txn: lmdb.Transaction) -> Loaded:
            marks = tuple(
                mark_of(bytes(k).decode(), _mark_dec.decode(v))
                for k, v in txn.cursor(db=self._dbs["marks"])
            )
            runs = {
                bytes(k).decode(): RunSummary(**msgspec.structs.asdict(_run_dec.decode(v)))
                for k, v in txn.cursor(db=self._dbs["runs"])
            }
            reminders = tuple(
                reminder_spec(_reminder_dec.decode(v))
                for _, v in txn.cursor(db=self._dbs["reminders"])
            )
            return Loaded(marks, runs, reminders)

        return self._read(fn)

    def write(self, batch: Batch) -> None:
        """One durable transaction: every part of `batch` or none."""
        if not batch:
            return

        def fn(txn: lmdb.Transaction) -> None:
            for spec in batch.reminders:
                txn.put(
                    spec.key.encode(), _enc.encode(stored_reminder(spec)), db=self._dbs["reminders"]
                )
            for mark in batch.marks:
                txn.put(mark.key.encode(), _enc.encode(stored_mark(mark)), db=self._dbs["marks"])
            for key, run in batch.runs:
                stored = StoredRun(run.run_id, run.outcome, run.ended_at, run.detail, run.slot)
                txn.put(key.encode(), _enc.encode(stored), db=self._dbs["runs"])
            for key in batch.forget:
                for db in ("marks", "runs", "reminders"):
                    txn.delete(key.encode(), db=self._dbs[db])
            for key in batch.dropped:
                txn.delete(key.encode(), db=self._dbs["reminders"])

        self._write(fn)

    def next_reminder_number(self, agent: str) -> int:
        """The next number of `agent`'s reminders (never reused, so a name never comes
        back for another reminder), counted durably."""

        def fn(txn: lmdb.Transaction) -> int:
            key = b"seq\x00" + agent.encode()
            raw = txn.get(key, db=self._dbs["meta"])
            number = (_U64.unpack(raw)[0] if raw else 0) + 1
            txn.put(key, _U64.pack(number), db=self._dbs["meta"])
            return number

        return self._write(fn)
