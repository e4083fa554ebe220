"""The daemon's usage ledger: what every agent spent, per day, origin, session and provider.

One LMDB environment in its own directory (`<state_dir>/usage`, ADR 0057), opened for
writing by the daemon alone (an exclusive lock file says so to a second opener); `zeroclaw
usage` with no daemon running opens it read-only. Written in batches (the usage service
gathers a second of steps and commits them in one durable transaction, on a worker
thread); all methods block.

    ledger   day 0x00 agent 0x00 origin 0x00 session 0x00 provider -> Tally (msgpack)

`day` is the UTC date (`2026-12-05`), so a scan from a day on is a range of keys; `origin`
is who started the turns (`operator`, `webhook.ops:ci-bot`, `peer:beta`, ...). Counts and
costs saturate at 2^63-1 (they never wrap, and no budget comes near).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple, TypeVar

import lmdb
import msgspec

from .._flock import FileLock, LockHeld
from .._lmdb import Unusable, disk_full, open_checked, walk_in_child
from ._prices import saturated

DEFAULT_MAP_SIZE = 1 << 26  # 64 MiB of address space up front; doubles on MapFullError
MAX_MAP_SIZE = 1 << 40
FORMAT_VERSION = 1
_FORMAT_KEY = b"zeroclaw-usage-format"
_DBS = ("ledger",)
_SEP = b"\x00"
_U32 = struct.Struct("<I")
VERIFY_TIMEOUT_SECS = 600.0
T = TypeVar("T")


class Tally(msgspec.Struct, frozen=True, array_like=True):
    """What one key spent: turns started, provider steps, tokens by kind, cost (pico-units),
    and how many steps' tokens were estimated (their server reported none)."""

    turns: int = 0
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    cost: int = 0
    estimated_steps: int = 0

    def plus(self, other: Tally) -> Tally:
        return Tally(
            *(
                saturated(a + b)
                for a, b in zip(
                    msgspec.structs.astuple(self), msgspec.structs.astuple(other), strict=True
                )
            )
        )

    @property
    def tokens(self) -> int:
        return saturated(
            self.input_tokens
            + self.output_tokens
            + self.cached_input_tokens
            + self.cache_write_tokens
        )


class LedgerKey(NamedTuple):
    day: str
    agent: str
    origin: str
    session: str
    provider: str  # "" for a turn's start (no provider yet)

    def encode(self) -> bytes:
        """Each part with `%` and NUL escaped, so a part (an outside sender's name) can
        never hold the separator and shift the others."""
        return _SEP.join(_escape(part).encode("utf-8", "surrogatepass") for part in self)

    @classmethod
    def decode(cls, raw: bytes) -> LedgerKey | None:
        parts = raw.split(_SEP)
        if len(parts) != len(cls._fields):
            return None
        return cls(*(_unescape(part.decode("utf-8", "surrogatepass")) for part in parts))


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("\x00", "%00")


def _unescape(part: str) -> str:
    return part.replace("%00", "\x00").replace("%25", "%")


_enc = msgspec.msgpack.Encoder()
_tally = msgspec.msgpack.Decoder(Tally)


class LedgerError(RuntimeError):
    """The ledger cannot do what was asked (the subclasses say why)."""


class LedgerCorrupt(LedgerError):
    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        super().__init__(
            f"usage ledger {path} is damaged: {problem}. Stop the daemon, move the directory "
            f"aside (mv {path} {path}.damaged) and start again with an empty ledger (the "
            "usage history is lost, budgets count from zero), or put back a copy from your "
            "backups"
        )


class LedgerLocked(LedgerError):
    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"usage ledger {path} is in use by {holder} (another zeroclaw daemon on the "
            "same state_dir?); only one daemon may open it"
        )


class LedgerFull(LedgerError):
    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"usage ledger {path} cannot grow ({detail}); free disk space")


class UsageLedger:
    def __init__(
        self, path: Path, *, readonly: bool = False, map_size: int = DEFAULT_MAP_SIZE
    ) -> None:
        """`readonly`: a reader beside no daemon (`zeroclaw usage`); it takes no lock and
        never writes. A ledger that does not exist yet reads as empty."""
        self.path = Path(path)
        self.readonly = readonly
        self._lock: FileLock | None = None
        self._mutex = threading.Lock()  # one call at a time: growing the map needs it
        self._pid = os.getpid()
        self.env: lmdb.Environment | None = None
        self._db: lmdb._Database | None = None
        if readonly:
            if (self.path / "data.mdb").exists():
                self.env, self._db = self._open(map_size)
            return
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = FileLock(self.path / "owner.lock", record_pid=True)
        try:
            self._lock.acquire()
        except LockHeld as exc:
            raise LedgerLocked(self.path, exc.pid) from None
        try:
            self.env, self._db = self._open(map_size)
        except BaseException:
            self._lock.release()
            raise

    @classmethod
    def open_verified(cls, path: Path, *, timeout: float = VERIFY_TIMEOUT_SECS) -> UsageLedger:
        """Open after a child read every page once (LMDB has no checksums, and a damaged
        page may abort() its reader, which must not be the daemon)."""
        path = Path(path)
        if (path / "data.mdb").exists():
            problem = walk_in_child(["zeroclaw._lmdb", str(path), *_DBS], timeout)
            if problem is not None:
                raise LedgerCorrupt(path, problem)
        return cls(path)

    def _open(self, map_size: int) -> tuple[lmdb.Environment, lmdb._Database | None]:
        try:
            env = open_checked(
                self.path,
                map_size=map_size,
                max_dbs=len(_DBS) + 1,
                subdir=True,
                readonly=self.readonly,
                lock=not self.readonly,
                sync=True,
                metasync=True,
            )
        except Unusable as exc:
            raise LedgerCorrupt(self.path, str(exc)) from None
        try:
            with env.begin() as txn:
                raw = txn.get(_FORMAT_KEY)
            found = _U32.unpack(raw)[0] if raw else 0
            if found > FORMAT_VERSION:
                raise LedgerError(
                    f"{self.path} was written by a newer zeroclaw (usage ledger format "
                    f"{found}, this version reads up to {FORMAT_VERSION}); upgrade zeroclaw"
                )
            if self.readonly:
                db = env.open_db(b"ledger", create=False) if found else None
            else:
                db = env.open_db(b"ledger", create=True)
                if found == 0:
                    with env.begin(write=True) as txn:
                        txn.put(_FORMAT_KEY, _U32.pack(FORMAT_VERSION))
        except lmdb.Error as exc:
            env.close()
            if disk_full(exc):
                raise LedgerFull(self.path, str(exc)) from None
            raise LedgerCorrupt(self.path, f"a page cannot be read ({exc})") from None
        except BaseException:
            env.close()
            raise
        return env, db

    def close(self) -> None:
        with self._mutex:
            if self.env is not None:
                self.env.close()
                self.env = None
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> UsageLedger:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError("an LMDB environment must not be used across fork")

    # --- writing ----------------------------------------------------------------------------

    def add(self, batch: Mapping[LedgerKey, Tally]) -> None:
        """Add each tally to its key's, in one durable transaction (all or nothing); a full
        map is grown and the batch applied again from the start."""
        assert not self.readonly, "a read-only ledger is never written"
        self._check_fork()

        def apply(txn: lmdb.Transaction[bytes]) -> None:
            for key, tally in batch.items():
                raw_key = key.encode()
                raw = txn.get(raw_key, db=self._db)
                total = tally if raw is None else _tally.decode(raw).plus(tally)
                txn.put(raw_key, _enc.encode(total), db=self._db)

        with self._mutex:
            env = self.env
            if env is None:
                raise LedgerError(f"usage ledger {self.path} is closed")
            while True:
                try:
                    with env.begin(write=True) as txn:
                        apply(txn)
                    return
                except lmdb.MapFullError:
                    size = int(env.info()["map_size"])
                    if size * 2 > MAX_MAP_SIZE:
                        raise LedgerFull(self.path, f"the map is at {size} bytes") from None
                    env.set_mapsize(size * 2)
                except lmdb.Error as exc:
                    if disk_full(exc):
                        raise LedgerFull(self.path, str(exc)) from None
                    raise LedgerError(f"usage ledger {self.path}: {exc}") from exc
                except msgspec.DecodeError as exc:
                    raise LedgerError(f"usage ledger {self.path}: {exc}") from exc

    # --- reading ----------------------------------------------------------------------------

    def rows(
        self, since: str = "", agent: str | None = None, until: str | None = None
    ) -> list[tuple[LedgerKey, Tally]]:
        """Every row of the days from `since` (a UTC date) up to `until` (inclusive), of
        `agent` or of all; in key order."""
        return self._read(lambda txn: list(self._scan(txn, since, agent, until)))

    def _scan(
        self, txn: lmdb.Transaction[bytes], since: str, agent: str | None, until: str | None
    ) -> Iterator[tuple[LedgerKey, Tally]]:
        cursor = txn.cursor(db=self._db)
        if not cursor.set_range(since.encode()):
            return
        for raw_key, raw in cursor:
            key = LedgerKey.decode(bytes(raw_key))
            if key is None:
                continue  # not a row of this format: skipped, never fatal
            if until is not None and key.day > until:
                return
            if agent is None or key.agent == agent:
                yield key, _tally.decode(raw)

    def _read(self, fn: Callable[[lmdb.Transaction[bytes]], list[T]]) -> list[T]:
        self._check_fork()
        if self.env is None or self._db is None:
            return []  # read-only, and nothing was ever written
        try:
            with self._mutex, self.env.begin() as txn:
                return fn(txn)
        except (lmdb.Error, msgspec.DecodeError) as exc:
            raise LedgerError(f"usage ledger {self.path}: {exc}") from exc
