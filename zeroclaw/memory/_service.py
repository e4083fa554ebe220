"""The memory service in the daemon: group commit, safe map growth, scoped requests.

- Writes queue up; one task takes everything queued, applies it in ONE durable LMDB
  transaction inside ONE `trio.to_thread.run_sync` call, and only then answers each
  request. Many concurrent writers share each fsync.
- Reads run in threads too, behind a gate: growing the map (on MapFullError) needs no
  transaction open in the process, so growth waits for reads to drain and holds new ones.
- Requests from agents arrive through the router, which passes the *authenticated* alias;
  the scope is built from that alias and the config's `read_memory_from`, never from the
  request body. Whatever a body says about namespaces, writes land in the caller's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import lmdb
import trio

from ..events import EventSink
from ._store import (
    MemoryInputError,
    MemoryStore,
    OperatorScope,
    RecallHit,
    Scope,
    ScopeError,
    StoreCorrupt,
    WriteOp,
)

log = logging.getLogger("zeroclaw.memory")

MAX_BATCH = 1024
MAX_LIMIT = 1000  # records or hits one list/recall returns
QUEUE_LIMIT = 10_000
WRITE_OPS = frozenset({"store", "forget", "append_turn", "append_turns"})
READ_OPS = frozenset({"get", "list", "recall", "session", "stats", "export"})


class MemoryServiceError(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass
class _Pending:
    op: WriteOp
    done: trio.Event


def record_json(record: Any) -> dict[str, Any]:
    return {
        "id": record.id,
        "agent": record.agent,
        "key": record.key,
        "content": record.content,
        "category": record.category,
        "session": record.session,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def hit_json(hit: RecallHit) -> dict[str, Any]:
    return {**record_json(hit.record), "score": round(hit.score, 6)}


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        grants: Mapping[str, frozenset[str]],
        *,
        events: EventSink | None = None,
    ) -> None:
        self.store = store
        self.events = events if events is not None else EventSink()
        self.grants = dict(grants)
        self._send, self._queue = trio.open_memory_channel[_Pending](QUEUE_LIMIT)
        self._readers = 0
        self._no_readers = trio.Event()
        self._no_readers.set()
        self._held: trio.Event | None = None  # set while a _without_reads section runs
        self._exclusive = trio.Lock()
        self.commits = 0
        self.committed_ops = 0
        self.growths = 0

    def scope_for(self, alias: str) -> Scope:
        return Scope(alias, self.grants.get(alias, frozenset()))

    def update_grants(self, grants: Mapping[str, frozenset[str]]) -> None:
        self.grants = dict(grants)

    # --- writes: group commit ----------------------------------------------------------------

    async def write(self, scope: Scope, kind: str, args: dict[str, Any]) -> Any:
        """Queue one write; return its result once the batch holding it is durable."""
        pending = _Pending(WriteOp(scope, kind, args), trio.Event())
        try:
            self._send.send_nowait(pending)
        except trio.WouldBlock:
            raise MemoryServiceError("busy", "too many memory writes queued") from None
        await pending.done.wait()
        if pending.op.error is not None:
            raise pending.op.error
        return pending.op.result

    async def run_committer(self) -> None:
        async for first in self._queue:
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.receive_nowait())
                except trio.WouldBlock:
                    break
            await self._commit(batch)

    async def _commit(self, batch: list[_Pending]) -> None:
        ops = [p.op for p in batch]
        while True:
            try:
                await trio.to_thread.run_sync(self.store.apply_writes, ops)
                break
            except lmdb.MapFullError:
                await self._grow()
            except lmdb.Error as exc:
                log.error("memory commit failed: %s", exc)
                for op in ops:
                    op.error = MemoryServiceError("storage_error", str(exc))
                break
        self.commits += 1
        self.committed_ops += len(ops)
        for pending in batch:
            pending.done.set()

    @asynccontextmanager
    async def _without_reads(self) -> AsyncIterator[None]:
        """Hold new reads and wait for running ones: for work that needs no transaction open
        in the process (growing the map) or must not race readers (purge). One at a time, so
        one section ending cannot reopen reads while another is still running."""
        async with self._exclusive:
            self._held = trio.Event()
            try:
                await self._no_readers.wait()
                yield
            finally:
                self._held.set()
                self._held = None

    async def _grow(self) -> None:
        async with self._without_reads():
            size = await trio.to_thread.run_sync(self.store.grow)
        self.growths += 1
        log.info("memory map grown to %d bytes", size)

    # --- reads ---------------------------------------------------------------------------------

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        while self._held is not None:
            await self._held.wait()
        self._readers += 1
        self._no_readers = trio.Event() if self._readers == 1 else self._no_readers
        try:
            return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        finally:
            self._readers -= 1
            if self._readers == 0:
                self._no_readers.set()

    # --- one request ------------------------------------------------------------------------

    async def handle(self, scope: Scope | OperatorScope, op: str, body: Any) -> Any:
        """Run one operation; returns JSON-ready data or raises MemoryServiceError."""
        args = body if isinstance(body, dict) else {}
        try:
            if op in WRITE_OPS:
                if not isinstance(scope, Scope):
                    raise MemoryServiceError("bad_request", "writes need an agent scope")
                allowed = {
                    "store": ("key", "content", "category", "session"),
                    "forget": ("key", "id"),
                    "append_turn": ("session", "role", "content"),
                    "append_turns": ("session", "turns"),
                }[op]
                # Only the fields of this write; anything naming a namespace is dropped.
                clean = {k: v for k, v in args.items() if k in allowed}
                result = await self.write(scope, op, clean)
                if op == "store":
                    return {"record": record_json(result)}
                if op == "forget":
                    return {"forgotten": bool(result)}
                return {"seq": result}
            if op == "get":
                record = await self.read(
                    self.store.get,
                    scope,
                    key=_opt_str(args, "key"),
                    id=_opt_str(args, "id"),
                    namespace=_opt_str(args, "agent"),
                )
                return {"record": record_json(record) if record else None}
            if op == "list":
                records = await self.read(
                    self.store.list_records,
                    scope,
                    namespaces=_namespaces(args),
                    category=_opt_str(args, "category"),
                    since=_opt_float(args, "since"),
                    until=_opt_float(args, "until"),
                    limit=_limit(args),
                    before=_opt_str(args, "before"),
                )
                return {"records": [record_json(r) for r in records]}
            if op == "recall":
                hits = await self.read(
                    self.store.recall,
                    scope,
                    str(args.get("query", "")),
                    namespaces=_namespaces(args),
                    limit=_limit(args, 10),
                )
                return {"hits": [hit_json(h) for h in hits]}
            if op == "session":
                if not isinstance(scope, Scope):
                    raise MemoryServiceError("bad_request", "sessions belong to an agent scope")
                turns = await self.read(
                    self.store.session, scope, str(args.get("session", "")), limit=_limit(args, 200)
                )
                return {
                    "turns": [{"role": t.role, "content": t.content, "at": t.at} for t in turns]
                }
            if op == "stats":
                stats = await self.read(self.store.stats, scope)
                return {
                    "namespaces": stats,
                    "commits": self.commits,
                    "committed_ops": self.committed_ops,
                    "map_growths": self.growths,
                }
            if op == "export":
                records = await self.read(
                    lambda: list(self.store.export(scope, _opt_str(args, "agent")))
                )
                return {"records": [record_json(r) for r in records]}
            if op == "purge":
                if not isinstance(scope, OperatorScope):
                    raise MemoryServiceError("forbidden", "purge is for the operator CLI only")
                agent = _opt_str(args, "agent")
                if not agent:
                    raise MemoryServiceError("bad_request", "purge needs 'agent'")
                return {"purged": await self._purge(scope, agent)}
        except ScopeError as exc:
            raise MemoryServiceError("forbidden", str(exc)) from None
        except (lmdb.Error, StoreCorrupt) as exc:
            # A page damaged after the open-time check: this request fails, the daemon lives.
            log.error("memory %s failed on the store: %s", op, exc)
            raise MemoryServiceError("storage_error", f"the memory store failed: {exc}") from None
        except (MemoryInputError, TypeError, ValueError) as exc:
            raise MemoryServiceError("bad_request", str(exc)) from None
        raise MemoryServiceError("bad_request", f"unknown memory operation {op!r}")

    async def _purge(self, scope: OperatorScope, agent: str) -> int:
        async with self._without_reads():
            return int(await trio.to_thread.run_sync(self.store.purge, scope, agent))


def _opt_str(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise MemoryServiceError("bad_request", f"{name!r} must be a string")
    return value


def _opt_float(args: dict[str, Any], name: str) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise MemoryServiceError("bad_request", f"{name!r} must be a number")
    if not math.isfinite(value):
        raise MemoryServiceError("bad_request", f"{name!r} must be a finite number")
    return float(value)


def _limit(args: dict[str, Any], default: int = 50) -> int:
    value = args.get("limit", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LIMIT:
        raise MemoryServiceError("bad_request", f"'limit' must be an integer from 1 to {MAX_LIMIT}")
    return value


def _namespaces(args: dict[str, Any]) -> list[str] | None:
    value = args.get("agents")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MemoryServiceError("bad_request", "'agents' must be a list of aliases")
    return value


def memory_grants(config: Any) -> dict[str, frozenset[str]]:
    """Each agent's read-only grants over other namespaces, from `memory.read_memory_from`."""
    return {
        alias: frozenset(agent.memory.read_memory_from) for alias, agent in config.agents.items()
    }


# --- the operator's entry point (control socket, or the CLI without a daemon) ----------------


async def operator_request(
    service: MemoryService, known_agents: frozenset[str], op: str, agent: str, args: dict[str, Any]
) -> Any:
    """An operator acts on one agent's namespace: writes as that agent, reads as operator."""
    if agent not in known_agents:
        raise MemoryServiceError(
            "unknown_agent", f"no agent {agent!r}; known: {', '.join(sorted(known_agents))}"
        )
    if op in WRITE_OPS or op == "session":
        return await service.handle(Scope(agent), op, args)
    args = dict(args)
    if op == "stats":
        data = await service.handle(OperatorScope(), op, args)
        data["namespaces"] = {
            agent: data["namespaces"].get(agent, {"records": 0, "session_turns": 0})
        }
        return data
    if op in ("get", "export", "purge"):
        args.setdefault("agent", agent)
    elif op in ("list", "recall"):
        args.setdefault("agents", [agent])
    return await service.handle(OperatorScope(), op, args)
