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

import dataclasses
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import lmdb
import msgspec
import trio

from .._ops import BodyError, OpTable, decode_body
from ..config import readonly_agents
from ..events import EventSink, MemoryOperation
from ..turns import (
    MEMORY_APPEND_TURN,
    MEMORY_APPEND_TURNS,
    MEMORY_COMPACT,
    MEMORY_CONTEXT,
    MEMORY_EXPORT,
    MEMORY_FORGET,
    MEMORY_GET,
    MEMORY_LIST,
    MEMORY_OPERATIONS,
    MEMORY_OPS,
    MEMORY_PURGE,
    MEMORY_RECALL,
    MEMORY_SERVICE,
    MEMORY_SESSION,
    MEMORY_STATS,
    MEMORY_STORE,
    WRITE_OPS,
    AppendTurnArgs,
    AppendTurnsArgs,
    CompactArgs,
    ContextArgs,
    ExportArgs,
    ForgetArgs,
    GetArgs,
    ListArgs,
    MemoryAppended,
    MemoryArgs,
    MemoryCompacted,
    MemoryContext,
    MemoryForgotten,
    MemoryFound,
    MemoryHit,
    MemoryHits,
    MemoryPurged,
    MemoryQuotaInfo,
    MemoryRecord,
    MemoryRecords,
    MemoryReply,
    MemorySession,
    MemoryStats,
    MemoryStored,
    NamespaceCounts,
    PurgeArgs,
    RecallArgs,
    SessionArgs,
    SessionTurn,
    StatsArgs,
    StoreArgs,
)
from ._args import decode_args
from ._context import context_turns, fit_memories, memory_summary
from ._errors import MemoryServiceError
from ._quota import DEFAULT_QUOTA, QUOTA_KINDS, MemoryQuota
from ._records import Record
from ._store import (
    Compacted,
    MemoryInputError,
    MemoryStore,
    OperatorScope,
    QuotaExceeded,
    RecallHit,
    Scope,
    ScopeError,
    StoreCorrupt,
    WriteArgs,
    WriteOp,
)

log = logging.getLogger("zeroclaw.memory")

MAX_BATCH = 1024
QUEUE_LIMIT = 10_000


@dataclass
class _Pending:
    op: WriteOp
    done: trio.Event


def memory_record(record: Record) -> MemoryRecord:
    return MemoryRecord(
        record.id,
        record.agent,
        record.key,
        record.content,
        record.category,
        record.session,
        record.created_at,
        record.updated_at,
    )


def memory_hit(hit: RecallHit) -> MemoryHit:
    record = msgspec.structs.asdict(memory_record(hit.record))
    return MemoryHit(**record, score=round(hit.score, 6))


AnyScope = Scope | OperatorScope


@dataclass(frozen=True)
class MemoryGrants:
    """Who may do what beyond its own namespace: each agent's read grants over other
    namespaces (`memory.read_memory_from`), and the agents whose profile is readonly (their
    stores and forgets are refused, ADR 0039)."""

    read: Mapping[str, frozenset[str]]
    readonly: frozenset[str] = frozenset()
    quotas: Mapping[str, MemoryQuota] = field(default_factory=dict)  # alias -> its caps

    def quota(self, alias: str) -> MemoryQuota:
        return self.quotas.get(alias, DEFAULT_QUOTA)


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        grants: MemoryGrants,
        *,
        events: EventSink | None = None,
    ) -> None:
        self.store = store
        self.events = events if events is not None else EventSink()
        self.grants = grants
        self._send, self._queue = trio.open_memory_channel[_Pending](QUEUE_LIMIT)
        self._readers = 0
        self._no_readers = trio.Event()
        self._no_readers.set()
        self._held: trio.Event | None = None  # set while a _without_reads section runs
        self._exclusive = trio.Lock()
        self.commits = 0
        self.committed_ops = 0
        self.growths = 0
        # Commits by batch size (at most MAX_BATCH keys): read by metrics when scraped.
        self.batch_sizes: Counter[int] = Counter()
        # Writes refused by a quota, by (agent, quota kind), and the oldest transcript turns
        # dropped to keep sessions within their caps, by agent: metrics and `memory stats`.
        self.quota_refusals: Counter[tuple[str, str]] = Counter()
        self.turns_dropped: Counter[str] = Counter()

    def scope_for(self, alias: str) -> Scope:
        return Scope(alias, self.grants.read.get(alias, frozenset()))

    def update_grants(self, grants: MemoryGrants) -> None:
        self.grants = grants

    # --- writes: group commit ----------------------------------------------------------------

    async def write(self, scope: Scope, args: WriteArgs) -> Any:
        """Queue one write (its struct, as decoded); return its result once the batch
        holding it is durable."""
        op = WriteOp(scope, args, quota=self.grants.quota(scope.caller))
        pending = _Pending(op, trio.Event())
        try:
            self._send.send_nowait(pending)
        except trio.WouldBlock:
            raise MemoryServiceError("busy", "too many memory writes queued") from None
        await pending.done.wait()
        if isinstance(pending.op.error, QuotaExceeded):
            self.quota_refusals[(scope.caller, pending.op.error.kind)] += 1
            raise MemoryServiceError("quota_exceeded", str(pending.op.error)) from None
        if pending.op.error is not None:
            raise pending.op.error
        if pending.op.dropped:
            self.turns_dropped[scope.caller] += pending.op.dropped
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
        self.batch_sizes[len(ops)] += 1
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

    async def handle(self, scope: AnyScope, op: str, body: msgspec.Raw | bytes) -> MemoryReply:
        """Run one operation from its encoded body (an agent's request through the router);
        returns the op's answer struct or raises MemoryServiceError. Publishes one
        MemoryOperation, named after the caller (an agent's scope) or "operator"."""
        operation = MEMORY_OPERATIONS.get(op)
        if operation is None:
            error = MemoryServiceError("bad_request", f"unknown memory operation {op[:64]!r}")
            return await self._published(self._who(scope), op, _raise(error))
        try:
            args = _decode(op, body)
        except MemoryServiceError as exc:
            return await self._published(self._who(scope), op, _raise(exc))
        return await self.run(scope, args)

    async def run(self, scope: AnyScope, args: MemoryArgs) -> MemoryReply:
        """Run one decoded operation (the service's table picks its handler by the args'
        struct); publishes one MemoryOperation."""
        op = _OP_OF[type(args)]
        who = self._who(scope)
        readonly = self.grants.readonly
        writes = op in AGENT_WRITES or (isinstance(args, CompactArgs) and bool(args.facts))
        if isinstance(scope, Scope) and writes and scope.caller in readonly:
            # Its tool refuses first; this is for an agent that skips its tool (ADR 0039).
            refusal = MemoryServiceError(
                "read_only_profile", f"{scope.caller!r} has a readonly risk profile: no {op}"
            )
            return await self._published(who, op, _raise(refusal))
        return await self._published(who, op, self._handle(scope, args))

    @staticmethod
    def _who(scope: AnyScope) -> str:
        return scope.caller if isinstance(scope, Scope) else scope.reason

    async def _published(self, agent: str, op: str, work: Awaitable[MemoryReply]) -> MemoryReply:
        # An op name comes from the caller: kept only when it is one, so the ring's events
        # stay small whatever an agent sends.
        op = op if op in MEMORY_OPS else "unknown"
        try:
            result = await work
        except MemoryServiceError as exc:
            self.events.publish(MemoryOperation(agent=agent, op=op, ok=False, code=exc.code))
            raise
        self.events.publish(MemoryOperation(agent=agent, op=op))
        return result

    async def _handle(self, scope: AnyScope, args: MemoryArgs) -> MemoryReply:
        op = _OP_OF[type(args)]
        try:
            return await _TABLE.call((self, scope), op, args)
        except ScopeError as exc:
            raise MemoryServiceError("forbidden", str(exc)) from None
        except (lmdb.Error, StoreCorrupt) as exc:
            # A page damaged after the open-time check: this request fails, the daemon lives.
            log.error("memory %s failed on the store: %s", op, exc)
            raise MemoryServiceError("storage_error", f"the memory store failed: {exc}") from None
        except (MemoryInputError, TypeError, ValueError) as exc:
            # The structs checked types and sizes; the store checks the rest of its input.
            raise MemoryServiceError("bad_request", str(exc)) from None

    # --- one handler per operation (the table below names them) ----------------------------

    async def _written(self, scope: AnyScope, args: WriteArgs) -> Any:
        if not isinstance(scope, Scope):
            raise MemoryServiceError("bad_request", "writes need an agent scope")
        # The write's struct: nothing in it names a namespace (the scope decides).
        return await self.write(scope, args)

    async def _store_op(self, scope: AnyScope, args: StoreArgs) -> MemoryReply:
        return MemoryStored(memory_record(await self._written(scope, args)))

    async def _forget_op(self, scope: AnyScope, args: ForgetArgs) -> MemoryReply:
        return MemoryForgotten(bool(await self._written(scope, args)))

    async def _append_op(
        self, scope: AnyScope, args: AppendTurnArgs | AppendTurnsArgs
    ) -> MemoryReply:
        return MemoryAppended(int(await self._written(scope, args)))

    async def _get_op(self, scope: AnyScope, args: GetArgs) -> MemoryReply:
        record = await self.read(
            self.store.get, scope, key=args.key, id=args.id, namespace=args.agent
        )
        return MemoryFound(memory_record(record) if record else None)

    async def _list_op(self, scope: AnyScope, args: ListArgs) -> MemoryReply:
        records = await self.read(
            self.store.list_records,
            scope,
            namespaces=args.agents,
            category=args.category,
            since=args.since,
            until=args.until,
            limit=args.limit,
            before=args.before,
        )
        return MemoryRecords([memory_record(r) for r in records])

    async def _recall_op(self, scope: AnyScope, args: RecallArgs) -> MemoryReply:
        namespaces = args.agents
        if namespaces is not None and args.with_own and isinstance(scope, Scope):
            namespaces = list(dict.fromkeys([scope.caller, *namespaces]))
        hits = await self.read(
            self.store.recall, scope, args.query, namespaces=namespaces, limit=args.limit
        )
        return MemoryHits([memory_hit(h) for h in hits])

    async def _session_op(self, scope: AnyScope, args: SessionArgs) -> MemoryReply:
        if not isinstance(scope, Scope):
            raise MemoryServiceError("bad_request", "sessions belong to an agent scope")
        turns = await self.read(self.store.session, scope, args.session, limit=args.limit)
        return MemorySession([SessionTurn(t.role, t.content, t.at) for t in turns])

    async def _context_op(self, scope: AnyScope, args: ContextArgs) -> MemoryReply:
        """A turn's history and recall in one read (ADR 0059). The namespaces recalled
        from are the scope's (the caller's and its `read_memory_from`), never the body's."""
        if not isinstance(scope, Scope):
            raise MemoryServiceError("bad_request", "a turn's context belongs to an agent scope")
        window, hits = await self.read(
            self.store.context,
            scope,
            args.session,
            history_tokens=args.history_tokens,
            compact=args.compact,
            query=args.query,
            limit=args.recall_k,
        )
        return MemoryContext(
            context_turns(window.turns),
            None if window.digest is None else memory_summary(window.digest),
            window.cut,
            context_turns(window.overflow),
            fit_memories([hit.record for hit in hits], args.recall_tokens),
            window.last,
        )

    async def _compact_op(self, scope: AnyScope, args: CompactArgs) -> MemoryReply:
        done: Compacted = await self._written(scope, args)
        return MemoryCompacted(memory_summary(done.digest), done.dropped, done.keys, done.already)

    async def _stats_op(self, scope: AnyScope, args: StatsArgs) -> MemoryReply:
        stats = await self.read(self.store.stats, scope)
        counts = {ns: self._counts(ns, c) for ns, c in stats.items()}
        return MemoryStats(counts, self.commits, self.committed_ops, self.growths)

    async def _export_op(self, scope: AnyScope, args: ExportArgs) -> MemoryReply:
        namespace = args.agent
        records = await self.read(lambda: list(self.store.export(scope, namespace)))
        return MemoryRecords([memory_record(r) for r in records])

    async def _purge_op(self, scope: AnyScope, args: PurgeArgs) -> MemoryReply:
        if not isinstance(scope, OperatorScope):
            raise MemoryServiceError("forbidden", "purge is for the operator CLI only")
        if not args.agent:
            raise MemoryServiceError("bad_request", "purge needs 'agent'")
        return MemoryPurged(await self._purge(scope, args.agent))

    def _counts(self, namespace: str, counted: Mapping[str, int]) -> NamespaceCounts:
        """What the store counted, with the agent's caps and what they refused or dropped."""
        quota = self.grants.quotas.get(namespace)
        refusals = {
            kind: n
            for (agent, kind), n in sorted(self.quota_refusals.items())
            if agent == namespace
        }
        return NamespaceCounts(
            **counted,
            quota=None if quota is None else MemoryQuotaInfo(**dataclasses.asdict(quota)),
            quota_refusals=refusals,
            turns_dropped=self.turns_dropped[namespace],
        )

    async def _purge(self, scope: OperatorScope, agent: str) -> int:
        async with self._without_reads():
            return int(await trio.to_thread.run_sync(self.store.purge, scope, agent))


# The memory writes an agent's readonly profile refuses (and a compaction's facts). Session
# transcripts (append_turn[s]) are the record of its own chat and stay written, and so
# does a compaction's summary of them.
AGENT_WRITES = frozenset({"store", "forget"})


async def _raise(error: MemoryServiceError) -> MemoryReply:
    raise error


def _decode(op: str, body: msgspec.Raw | bytes) -> MemoryArgs:
    try:
        args: MemoryArgs = decode_body(body, MEMORY_OPERATIONS[op].request)
    except BodyError as exc:
        raise MemoryServiceError("bad_request", f"bad {op} arguments: {exc.detail}") from None
    return args


def _on(method: Callable[..., Awaitable[MemoryReply]]) -> Callable[..., Awaitable[MemoryReply]]:
    async def handler(ctx: tuple[MemoryService, AnyScope], args: MemoryArgs) -> MemoryReply:
        service, scope = ctx
        return await method(service, scope, args)

    return handler


# The service's one table: op -> request struct -> handler (every operation has one).
_TABLE: OpTable[tuple[MemoryService, AnyScope], Awaitable[MemoryReply]] = (
    OpTable[tuple[MemoryService, AnyScope], Awaitable[MemoryReply]](MEMORY_SERVICE)
    .on(MEMORY_STORE, _on(MemoryService._store_op))
    .on(MEMORY_FORGET, _on(MemoryService._forget_op))
    .on(MEMORY_APPEND_TURN, _on(MemoryService._append_op))
    .on(MEMORY_APPEND_TURNS, _on(MemoryService._append_op))
    .on(MEMORY_GET, _on(MemoryService._get_op))
    .on(MEMORY_LIST, _on(MemoryService._list_op))
    .on(MEMORY_RECALL, _on(MemoryService._recall_op))
    .on(MEMORY_SESSION, _on(MemoryService._session_op))
    .on(MEMORY_STATS, _on(MemoryService._stats_op))
    .on(MEMORY_EXPORT, _on(MemoryService._export_op))
    .on(MEMORY_PURGE, _on(MemoryService._purge_op))
    .on(MEMORY_CONTEXT, _on(MemoryService._context_op))
    .on(MEMORY_COMPACT, _on(MemoryService._compact_op))
    .require(MEMORY_OPERATIONS.values())
)
_OP_OF: dict[type[Any], str] = {op.request: op.name for op in MEMORY_OPERATIONS.values()}


def memory_grants(config: Any) -> MemoryGrants:
    """Each agent's read-only grants over other namespaces, from `memory.read_memory_from`,
    the agents whose risk profile is readonly, and each agent's quotas."""
    return MemoryGrants(
        {alias: frozenset(agent.memory.read_memory_from) for alias, agent in config.agents.items()},
        readonly=readonly_agents(config),
        quotas={alias: memory_quota(agent.memory) for alias, agent in config.agents.items()},
    )


def memory_quota(memory: Any) -> MemoryQuota:
    """An agent's `[agents.<a>.memory]` caps."""
    return MemoryQuota(**{f"max_{kind}": getattr(memory, f"max_{kind}") for kind in QUOTA_KINDS})


# --- the operator's entry point (control socket, or the CLI without a daemon) ----------------


async def operator_request(
    service: MemoryService, known_agents: frozenset[str], op: str, agent: str, args: object
) -> MemoryReply:
    """An operator acts on one agent's namespace: writes as that agent, reads as operator.
    Publishes one MemoryOperation named after that agent. The answer is the operation's
    struct (MEMORY_OPERATIONS[op].answer)."""
    return await service._published(agent, op, _operator(service, known_agents, op, agent, args))


async def _operator(
    service: MemoryService, known_agents: frozenset[str], op: str, agent: str, args: object
) -> MemoryReply:
    if agent not in known_agents:
        raise MemoryServiceError(
            "unknown_agent", f"no agent {agent!r}; known: {', '.join(sorted(known_agents))}"
        )
    decoded = decode_args(op, args)
    if op in WRITE_OPS or isinstance(decoded, SessionArgs | ContextArgs):
        return await service._handle(Scope(agent), decoded)
    if isinstance(decoded, StatsArgs):
        stats = await service._handle(OperatorScope(), decoded)
        assert isinstance(stats, MemoryStats)
        counts = stats.namespaces.get(agent) or service._counts(
            agent, {"records": 0, "session_turns": 0}
        )
        return msgspec.structs.replace(stats, namespaces={agent: counts})
    # The operator's reads default to the named agent's namespace.
    if isinstance(decoded, GetArgs | ExportArgs | PurgeArgs) and not decoded.agent:
        decoded = msgspec.structs.replace(decoded, agent=agent)
    elif isinstance(decoded, ListArgs | RecallArgs) and decoded.agents is None:
        decoded = msgspec.structs.replace(decoded, agents=[agent])
    return await service._handle(OperatorScope(), decoded)
