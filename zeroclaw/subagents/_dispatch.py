"""The dispatch pipeline in the daemon, the trust boundary (issue 12, Deliver 4).

In order: admission (`admit`: idempotency, existence, caller policy, input schema,
concurrency; pure) -> `accepted` persisted durably -> the revision's runtime (started on
demand by the supervisor) -> `running` -> every runtime event persisted with its sequence
number -> timeout or cancel -> the terminal state persisted, after the output contract was
judged (`verdict`; pure). Nothing appends to a running invocation.

An invocation runs in this service's nursery, not in its caller's task: a control client
that hangs up, or an agent whose request is cancelled, does not stop it half-way. Only the
daemon's own end stops it, and then its record stays `accepted`/`running` until the next
start turns it into `interrupted` (`recover`).

Callers are identities the daemon authenticated: an agent alias from the router, `cli` for
the control socket (whose permissions are the operator's). A body never names its caller.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, cast

import msgspec
import trio

from .._ops import OpTable
from .._schema_check import Invalid, Outcome, OutOfBound, Unusable
from ..bus import Origin, Request, Response, answer, refusal, serve_op
from ..conversations import ServiceEvent, Turn, TurnService
from ..events import EventSink, InvocationFinished
from ..turns import (
    SUBAGENT_CATALOG,
    SUBAGENT_DISPATCH,
    SUBAGENT_OPERATIONS,
    SUBAGENT_SERVICE,
    CatalogAnswer,
    CatalogCall,
    CatalogEntry,
    Delta,
    DispatchAnswer,
    DispatchCall,
    EventBody,
    Invocation,
    InvocationErrorCode,
    InvocationEvent,
    InvocationState,
    RevisionRecord,
    StateEntered,
    TextDelta,
    ToolCalled,
    ToolUsed,
    TurnDone,
)
from ._admission import (
    Admission,
    Admitted,
    DispatchRequest,
    Existing,
    Refused,
    admit,
)
from ._api import LoadedRevision
from ._bundle import Bundle, BundleProblems
from ._registry import SubagentRegistry
from ._revision import SnapshotDamaged
from ._schema import check_instance
from ._store import DuplicateInvocation, SubagentStore, WriteOp
from ._validator import ValidatorPool

log = logging.getLogger("zeroclaw.subagents")

SUBAGENT_CHANNEL = "subagent"  # the channel key an invocation's turn travels on
RETRYABLE_EFFECTS = frozenset({"none", "read_only"})  # safe to run again after a restart
ENVELOPE_BYTES = 16 * 1024  # room for the message around a task and its input
MAX_TOOL_ARGS_BYTES = 8192  # a tool event's arguments kept whole up to this size
MAX_EVENT_TEXT_BYTES = 1 << 20  # text a runtime may stream into one invocation's record
EVENT_FLUSH_SECS = 0.25  # a running invocation's events are on disk at most this late
MAX_COMMIT_BATCH = 256  # writes of several invocations that share one commit
FOLLOW_BUFFER = 1000  # events a slow `invocations events --follow` reader may lag behind
EndedBy = Literal["timeout", "cancel"]
T = TypeVar("T")
P = ParamSpec("P")


class RuntimeHost(Protocol):
    """Who starts revision runtimes (the supervisor)."""

    def ensure_runtime(self, revision: LoadedRevision) -> None: ...

    def runtime_running(self, identity: str) -> bool:
        """Its process is up (it read its snapshot when it started)."""

    def retire_stale_runtimes(self) -> None:
        """Stop the runtimes of revisions no dispatch can reach any more."""


@dataclass(frozen=True)
class Verdict:
    """How an invocation ends, judged from how its turn ended."""

    state: InvocationState
    error_code: InvocationErrorCode | None = None
    detail: str = ""
    output: Any = None
    reply: str = ""
    pointer: str | None = None


def verdict(
    last: ServiceEvent | None,
    output_schema: dict[str, object] | None,
    ended_by: EndedBy | None,
    checked: Outcome | None = None,
) -> Verdict:
    """The terminal state of an invocation whose turn ended with `last` (None: it never
    ran). Pure: the output contract lives here. A turn that completed is judged on its
    result even if a cancel or the deadline came just after. `checked`: the result already
    validated against `output_schema` by a worker (the daemon's way); without it the
    result is validated here."""
    if not isinstance(last, TurnDone) or last.cancelled:
        # Did the runtime confirm it stopped the turn, or did the turn service's grace end it?
        stopped = (
            "the runtime stopped its turn"
            if isinstance(last, TurnDone)
            else "the runtime did not confirm it stopped"
        )
        if ended_by == "cancel":
            return Verdict("cancelled", "subagent_cancelled", f"cancelled; {stopped}")
        if ended_by == "timeout":
            return Verdict("timed_out", "subagent_timed_out", f"timeoutSeconds passed; {stopped}")
        if last is None:
            return Verdict("failed", "subagent_runtime_failed", "the turn ended without a result")
        detail = getattr(last, "detail", "") or type(last).__name__
        return Verdict("failed", "subagent_runtime_failed", f"the runtime's turn ended: {detail}")
    if last.error is not None:
        return Verdict("failed", "subagent_provider_error", last.error, reply=last.reply)
    if output_schema is None:
        return Verdict("succeeded", output=last.result, reply=last.reply)
    if last.result is None:
        return Verdict(
            "failed",
            "subagent_no_result",
            "nothing was submitted through subagent_submit_result; free text is not a result",
            reply=last.reply,
        )
    if checked is None:
        checked = check_instance(output_schema, last.result)
    if isinstance(checked, Invalid):
        return Verdict(
            "failed",
            "subagent_output_invalid",
            checked.message,
            output=last.result,
            reply=last.reply,
            pointer=checked.pointer,
        )
    if isinstance(checked, Unusable):
        detail = f"the output schema cannot be applied: {checked.detail}"
        return Verdict("failed", "subagent_output_invalid", detail, output=last.result)
    if isinstance(checked, OutOfBound):
        return Verdict("failed", "subagent_validation_timeout", checked.detail, output=last.result)
    return Verdict("succeeded", output=last.result, reply=last.reply)


@dataclass
class EventBudget:
    """What a runtime may put into its invocation's record (pure): at most maxToolCalls
    tool events, each with its arguments cut to MAX_TOOL_ARGS_BYTES, and at most
    MAX_EVENT_TEXT_BYTES of text. `keep` answers the body to persist, or why to stop."""

    max_tool_calls: int
    tool_calls: int = 0
    text_bytes: int = 0

    def keep(self, body: EventBody) -> EventBody | str:
        if isinstance(body, ToolCalled):
            self.tool_calls += 1
            if self.tool_calls > self.max_tool_calls:
                return f"the runtime made more than maxToolCalls ({self.max_tool_calls}) calls"
            size = len(msgspec.json.encode(body.args))
            if size > MAX_TOOL_ARGS_BYTES:
                return msgspec.structs.replace(body, args={"truncated_bytes": size})
            return body
        if isinstance(body, TextDelta):
            self.text_bytes += len(body.text.encode())
            if self.text_bytes > MAX_EVENT_TEXT_BYTES:
                return f"the runtime streamed more than {MAX_EVENT_TEXT_BYTES} bytes of text"
        return body


def as_event_body(event: ServiceEvent) -> EventBody | None:
    if isinstance(event, Delta):
        return TextDelta(event.text)
    if isinstance(event, ToolUsed):
        return ToolCalled(event.name, event.args, event.ok, event.error_code)
    return None


@dataclass
class _PendingWrite:
    op: WriteOp[Any]
    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None


class GroupCommit:
    """The writes of every running invocation, committed together: whoever waits for a
    commit shares its fsync with whoever else waits at that moment (as the memory service
    does), in the order they were asked for. Durable when `write` returns."""

    def __init__(self, store: SubagentStore) -> None:
        self.store = store
        self.commits = 0
        self._send, self._receive = trio.open_memory_channel[_PendingWrite](math.inf)

    async def write(self, op: WriteOp[T]) -> T:
        pending = _PendingWrite(op)
        self._send.send_nowait(pending)
        await pending.done.wait()
        if isinstance(pending.result, BaseException):
            raise pending.result
        return cast(T, pending.result)

    async def run(self) -> None:
        async for first in self._receive:
            batch = [first]
            while len(batch) < MAX_COMMIT_BATCH:
                try:
                    batch.append(self._receive.receive_nowait())
                except trio.WouldBlock:
                    break
            try:
                results = await trio.to_thread.run_sync(
                    self.store.write_many, [p.op for p in batch]
                )
            except Exception as exc:  # the store failed: every writer of the batch hears it
                log.error("sub-agent store commit failed: %s", exc)
                results = [exc] * len(batch)
            self.commits += 1
            for pending, result in zip(batch, results, strict=True):
                pending.result = result
                pending.done.set()


@dataclass
class _Live:
    """An invocation running in this daemon."""

    done: trio.Event = field(default_factory=trio.Event)
    final: Invocation | None = None
    ended_by: EndedBy | None = None
    overrun: str | None = None  # how the runtime broke its bounds (tool calls, text)
    stop: trio.Event = field(default_factory=trio.Event)  # cancel or timeout asked
    followers: list[trio.MemorySendChannel[InvocationEvent]] = field(default_factory=list)

    def publish(self, events: Sequence[InvocationEvent]) -> None:
        for follower in list(self.followers):
            for event in events:
                try:
                    follower.send_nowait(event)
                except (trio.WouldBlock, trio.ClosedResourceError):
                    follower.close()  # too slow, or gone: it stops following
                    self.followers.remove(follower)
                    break


class DispatchService:
    """The pipeline, the agents' `subagent` service, and the operator API (SubagentsApi)."""

    def __init__(
        self,
        registry: SubagentRegistry,
        store: SubagentStore,
        turns: TurnService,
        runtimes: RuntimeHost,
        *,
        max_frame: Callable[[], int] = lambda: 1 << 20,
        events: EventSink | None = None,
    ) -> None:
        self.registry = registry
        self.events = events  # each invocation's terminal state is published here
        self.store = store
        self.turns = turns
        self.runtimes = runtimes
        # What a runtime's bus frame carries (the config's max_frame_bytes, minus the
        # envelope): a bigger task and input are refused before anything is accepted.
        self._max_frame = max_frame
        self.validators = ValidatorPool()  # input and output schemas, in killable workers
        self._running: Counter[str] = Counter()  # accepted or running, per sub-agent
        self._keys: dict[tuple[str, str | None, str], str] = {}  # this daemon's keys
        self._live: dict[str, _Live] = {}
        self.commits = GroupCommit(store)
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()  # recovery done: new dispatches may be admitted
        self._prefix = f"inv-{int(time.time()):x}-{os.getpid():x}"
        self._count = 0

    def _new_id(self) -> str:
        self._count += 1
        return f"{self._prefix}-{self._count}"

    # --- life ------------------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover what the last daemon left, then hold the nursery invocations run in."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.commits.run)
                revisions = self.registry.current().values()
                if any(r.bundle.input_schema or r.bundle.output_schema for r in revisions):
                    nursery.start_soon(self.validators.warm)
                retries = await self.recover()
                for invocation in retries:
                    self._start(invocation, self.registry.by_digest(invocation.digest))
                self._ready.set()
                task_status.started()
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.validators.aclose()

    async def recover(self) -> list[Invocation]:
        """Every invocation the last daemon left accepted or running is `interrupted`
        (`daemon_restarted`); those of sub-agents safe to run again (effects none or
        read_only, retry_on_restart) get one more attempt under the same key."""
        interrupted, retries = await _blocking(
            self.store.recover, self._retryable, self._new_id, time.time()
        )
        for invocation in interrupted:
            log.warning(
                "sub-agent invocation %s (%s) interrupted by a daemon restart",
                invocation.id,
                invocation.agent_id,
                extra={"invocation": invocation.id, "subagent": invocation.agent_id},
            )
        for retry in retries:
            log.info(
                "sub-agent invocation %s re-runs %s once (attempt %d)",
                retry.id,
                retry.retry_of,
                retry.attempt,
                extra={"invocation": retry.id, "subagent": retry.agent_id},
            )
        return list(retries)

    def _retryable(self, invocation: Invocation) -> bool:
        try:
            manifest = self.registry.by_digest(invocation.digest).bundle.manifest
        except (SnapshotDamaged, OSError) as exc:
            log.error("cannot re-run invocation %s: %s", invocation.id, exc)
            return False
        return manifest.retry_on_restart and manifest.effects in RETRYABLE_EFFECTS

    # --- the pipeline -----------------------------------------------------------------------

    async def dispatch(self, request: DispatchRequest, task: str) -> Invocation | Refused:
        await self._ready.wait()
        key = request.key
        known: dict[tuple[str, str | None, str], str] = {}
        if key is not None:
            found = self._keys.get(key)
            if found is None:
                earlier = await _blocking(self.store.find_by_key, *key)
                found = self._keys.get(key) or (earlier.id if earlier is not None else None)
            if found is not None:
                known[key] = found
        current = self.registry.current()
        bundles = {agent_id: revision.bundle for agent_id, revision in current.items()}
        admission = await self._admit(request, task, bundles, known)
        if isinstance(admission, Existing):
            return await self._existing(admission.invocation_id, request, task)
        if isinstance(admission, Refused):
            log.info(
                "dispatch to %s by %s refused: %s (%s)",
                request.agent_id,
                request.caller,
                admission.code,
                admission.detail,
                extra={"subagent": request.agent_id, "caller": request.caller},
            )
            return admission
        # From here to `_start` nothing awaits: the concurrency count is taken in the same
        # step as its last check, so N+1 racing dispatches cannot all pass a limit of N.
        revision = current[request.agent_id]
        now = time.time()
        invocation = Invocation(
            id=self._new_id(),
            agent_id=request.agent_id,
            digest=revision.bundle.digest,
            caller=request.caller,
            source=request.source,
            task=task,
            input=request.input,
            parent_run_id=request.parent_run_id,
            idempotency_key=request.idempotency_key,
            created_at=now,
            updated_at=now,
        )
        self._running[invocation.agent_id] += 1
        if key is not None:
            self._keys[key] = invocation.id
        live = self._live[invocation.id] = _Live()
        try:
            await self.commits.write(
                self.store.create_op(invocation, StateEntered("accepted"), now)
            )
        except BaseException as exc:
            self._running[invocation.agent_id] -= 1
            del self._live[invocation.id]
            if key is not None and self._keys.get(key) == invocation.id:
                del self._keys[key]
            if isinstance(exc, DuplicateInvocation):  # the key was taken under our feet
                return await self._existing(exc.existing_id, request, task)
            raise
        self._start(invocation, revision, live)
        await live.done.wait()
        assert live.final is not None
        return live.final

    def max_input_bytes(self) -> int:
        return self._max_frame() - ENVELOPE_BYTES

    async def _admit(
        self,
        request: DispatchRequest,
        task: str,
        bundles: Mapping[str, Bundle],
        known: Mapping[tuple[str, str | None, str], str],
    ) -> Admission:
        """`admit`, then the checks that need the caller's bytes: the size a runtime can
        receive, and (again, now that nothing awaits before the count is taken) the
        concurrency limit. An input schema is applied in a worker process under a bound: a
        costly schema (uniqueItems over thousands of objects) is killed at the bound and the
        dispatch refused `subagent_validation_timeout`; an error in the schema refuses the
        dispatch, never the daemon."""
        bundle = bundles.get(request.agent_id)
        checked: Outcome | None = None
        key = request.key
        if (
            bundle is not None
            and bundle.input_schema is not None
            and request.caller in bundle.manifest.policy.allowedCallers
            and (key is None or key not in known)
        ):
            # Only where `admit` would reach the input schema: a worker process checks it
            # under the bound, and is killed at the bound (ADR 0046).
            lane = f"input {request.agent_id} {request.caller}"
            checked = await self.validators.check(bundle.input_schema, request.input, lane=lane)
            if isinstance(checked, Unusable):
                log.error("input schema of %s cannot be applied: %s", request.agent_id, checked)
        admission = admit(
            request, bundles=bundles, invocations_by_key=known, running={}, checked=checked
        )
        if not isinstance(admission, Admitted):
            return admission
        size = len(msgspec.json.encode([task, request.input]))
        if size > self.max_input_bytes():
            return Refused(
                "subagent_input_invalid",
                f"the task and input are {size} bytes; a runtime receives at most "
                f"{self.max_input_bytes()} (max_frame_bytes)",
            )
        policy = admission.bundle.manifest.policy
        if self._running[request.agent_id] >= policy.maxConcurrency:
            return Refused(
                "subagent_concurrency_limit",
                f"{request.agent_id} already runs {policy.maxConcurrency} invocation(s), its limit",
            )
        return admission

    async def _existing(
        self, invocation_id: str, request: DispatchRequest, task: str
    ) -> Invocation | Refused:
        """The invocation an idempotency key already names: waited for if it runs here. A
        key is one request: reused for another sub-agent, task or input, it is refused."""
        live = self._live.get(invocation_id)
        if live is not None:
            await live.done.wait()
            invocation = live.final
        else:
            invocation = await _blocking(self.store.get, invocation_id)
        if invocation is None:  # the store lost it: never run it twice all the same
            return Refused("subagent_not_found", f"invocation {invocation_id} is gone")
        same = (invocation.agent_id, invocation.task, invocation.input) == (
            request.agent_id,
            task,
            request.input,
        )
        if not same:
            return Refused(
                "subagent_idempotency_conflict",
                f"idempotency key {request.idempotency_key!r} was used for invocation "
                f"{invocation.id} of {invocation.agent_id} with another task or input",
            )
        return invocation

    def _start(
        self, invocation: Invocation, revision: LoadedRevision, live: _Live | None = None
    ) -> None:
        if live is None:
            self._running[invocation.agent_id] += 1
            live = self._live[invocation.id] = _Live()
        assert self._nursery is not None, "DispatchService.run is not running"
        self._nursery.start_soon(self._run, invocation, revision, live)

    async def _run(self, invocation: Invocation, revision: LoadedRevision, live: _Live) -> None:
        try:
            try:
                with self.registry.hold(revision):
                    final = await self._run_turn(invocation, revision, live)
            except Exception as exc:  # a bug or the store: this invocation ends, not the daemon
                log.exception("sub-agent invocation %s could not be run or recorded", invocation.id)
                final = await self._fail_internally(invocation, exc)
            live.final = final
            if self.events is not None:
                self.events.publish(
                    InvocationFinished(final.agent_id, final.state, final.error_code or "")
                )
            log.info(
                "sub-agent invocation %s (%s by %s): %s%s",
                final.id,
                final.agent_id,
                final.caller,
                final.state,
                f" ({final.error_code}: {final.error_detail})" if final.error_code else "",
                extra={"invocation": final.id, "subagent": final.agent_id, "state": final.state},
            )
        finally:
            self._running[invocation.agent_id] -= 1
            del self._live[invocation.id]
            key = DispatchRequest(
                invocation.agent_id,
                invocation.caller,
                None,
                invocation.source,
                invocation.parent_run_id,
                invocation.idempotency_key,
            ).key
            if key is not None and self._keys.get(key) == invocation.id:
                del self._keys[key]  # on disk now: find_by_key answers from here on
            self.runtimes.retire_stale_runtimes()  # the last one on a replaced revision
            for follower in live.followers:
                follower.close()
            live.done.set()

    async def _run_turn(
        self, invocation: Invocation, revision: LoadedRevision, live: _Live
    ) -> Invocation:
        bundle = revision.bundle
        if live.stop.is_set():  # cancelled before it ran
            return await self._finish(invocation.id, verdict(None, None, "cancel"), live)
        if not self.runtimes.runtime_running(revision.identity):
            # It is about to start and read its snapshot: what it reads must be the digest.
            await trio.to_thread.run_sync(self.registry.ensure_snapshot, revision)
        try:
            self.runtimes.ensure_runtime(revision)
        except Exception as exc:  # a supervisor bug must not leave the record running
            log.exception("cannot start the runtime of %s", revision.identity)
            failed = Verdict("failed", "subagent_runtime_failed", f"cannot start: {exc}")
            return await self._finish(invocation.id, failed, live)
        deadline = trio.current_time() + bundle.manifest.policy.timeoutSeconds
        origin = Origin.subagent(invocation.caller)
        last: ServiceEvent | None = None
        async with self.turns.open_turn(
            revision.identity, invocation.task, session=None, origin=origin, input=invocation.input
        ) as turn:
            # `running` and the runtime's events are group-committed at most
            # EVENT_FLUSH_SECS after they happen, and always before the terminal state, in
            # order: a fast invocation costs two commits (accepted, its end), and a crash
            # in between ends as `interrupted` whatever was on disk (ADR 0024).
            pending: list[EventBody] = [StateEntered("running")]

            async def flush_every() -> None:
                nonlocal pending
                while True:
                    await trio.sleep(EVENT_FLUSH_SECS)
                    if pending:
                        batch, pending = pending, []
                        with trio.CancelScope(shield=True):  # in order, and told to followers
                            await self._append(invocation.id, batch, live)

            budget = EventBudget(bundle.manifest.policy.maxToolCalls)
            async with trio.open_nursery() as watchers:
                watchers.start_soon(_stop_at, turn, live, deadline)
                watchers.start_soon(flush_every)
                async for event in turn.events():
                    body = as_event_body(event)
                    if body is None:
                        last = event  # the terminal event: the iteration ends with it
                        continue
                    kept = budget.keep(body)
                    if isinstance(kept, str):  # the runtime broke its bounds: it stops here
                        if live.overrun is None:
                            live.overrun = kept
                            live.stop.set()
                    elif (
                        pending
                        and isinstance(kept, TextDelta)
                        and isinstance(pending[-1], TextDelta)
                    ):
                        pending[-1] = TextDelta(pending[-1].text + kept.text)
                    else:
                        pending.append(kept)
                watchers.cancel_scope.cancel()
        if live.overrun is not None:
            judged = Verdict("failed", "subagent_runtime_failed", live.overrun)
        else:
            lane = f"output {invocation.agent_id}"
            judged = await self._judge(last, bundle.output_schema, live.ended_by, lane)
        return await self._finish(invocation.id, judged, live, pending)

    async def _judge(
        self,
        last: ServiceEvent | None,
        output_schema: dict[str, object] | None,
        ended_by: EndedBy | None,
        lane: str = "",
    ) -> Verdict:
        """`verdict`, with a result applied to its schema in a worker process under a bound
        (`subagent_validation_timeout` past it), and an error in the schema failing the
        invocation, never the daemon."""
        result = last.result if isinstance(last, TurnDone) else None
        if output_schema is None or result is None:
            return verdict(last, output_schema, ended_by)
        size = len(msgspec.json.encode(result))
        if size > self.max_input_bytes():
            detail = f"the result is {size} bytes; at most {self.max_input_bytes()}"
            return Verdict("failed", "subagent_output_invalid", detail)
        checked = await self.validators.check(output_schema, result, lane=lane)
        if isinstance(checked, Unusable):
            log.error("output schema cannot be applied: %s", checked.detail)
        return verdict(last, output_schema, ended_by, checked)

    async def _fail_internally(self, invocation: Invocation, exc: Exception) -> Invocation:
        """End the record as failed `subagent_internal_error` if the store still takes it;
        else the caller hears it all the same, and the next start makes it `interrupted`."""
        detail = f"{type(exc).__name__}: {exc}"[:500]
        entered = StateEntered("failed", "subagent_internal_error", detail)
        try:
            return await self.commits.write(
                self.store.finish_op(invocation.id, entered, time.time())
            )
        except Exception:
            log.exception(
                "sub-agent invocation %s: not even its failure was recorded", invocation.id
            )
            return msgspec.structs.replace(
                invocation,
                state="failed",
                error_code="subagent_internal_error",
                error_detail=detail,
                updated_at=time.time(),
            )

    async def _append(self, invocation_id: str, bodies: list[EventBody], live: _Live) -> None:
        events = await self.commits.write(self.store.append_op(invocation_id, bodies, time.time()))
        live.publish(events)

    async def _finish(
        self, invocation_id: str, judged: Verdict, live: _Live, before: Sequence[EventBody] = ()
    ) -> Invocation:
        entered = StateEntered(judged.state, judged.error_code, judged.detail)
        invocation = await self.commits.write(
            self.store.finish_op(
                invocation_id,
                entered,
                time.time(),
                before=before,
                output=judged.output,
                reply=judged.reply,
                pointer=judged.pointer,
            )
        )
        last = invocation.last_seq
        first = last - len(before)
        live.publish(
            [
                *(
                    InvocationEvent(invocation.id, first + i, invocation.updated_at, body)
                    for i, body in enumerate(before)
                ),
                InvocationEvent(invocation.id, last, invocation.updated_at, entered),
            ]
        )
        return invocation

    # --- the operator's API (SubagentsApi) -------------------------------------------------

    def current(self) -> Mapping[str, LoadedRevision]:
        return self.registry.current()

    def problems(self) -> Sequence[BundleProblems]:
        return self.registry.problems()

    async def revisions(self, agent_id: str) -> list[RevisionRecord]:
        return await _blocking(self.store.revisions, agent_id)

    async def invocations(
        self, *, state: InvocationState | None, agent_id: str | None, limit: int
    ) -> list[Invocation]:
        return await _blocking(self.store.invocations, state=state, agent_id=agent_id, limit=limit)

    async def invocation(self, invocation_id: str) -> Invocation | None:
        return await _blocking(self.store.get, invocation_id)

    async def timeline(
        self, invocation_id: str, after_seq: int = 0
    ) -> list[InvocationEvent] | None:
        return await _blocking(self.store.timeline, invocation_id, after_seq=after_seq)

    @asynccontextmanager
    async def follow(
        self, invocation_id: str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[InvocationEvent]]:
        send, receive = trio.open_memory_channel[InvocationEvent](FOLLOW_BUFFER)
        live = self._live.get(invocation_id)
        if live is None:
            send.close()  # not running here: nothing more will come
        else:
            live.followers.append(send)
        try:
            yield receive
        finally:
            if live is not None and send in live.followers:
                live.followers.remove(send)
            send.close()

    async def cancel(self, invocation_id: str) -> Invocation | None:
        live = self._live.get(invocation_id)
        if live is None:
            return await self.invocation(invocation_id)
        if not live.stop.is_set():
            live.ended_by = "cancel"
            live.stop.set()
        await live.done.wait()
        return live.final

    # --- the agents' service ----------------------------------------------------------------

    async def serve(self, sender: str, request: Request) -> Response:
        """`SUBAGENT_SERVICE` requests from an agent; `sender` is the router's identity. A
        failure here is this request's, never the router's (whose nursery runs it)."""
        return await serve_op(
            _TABLE, (self, sender, request), request, log=log, service="sub-agents", sender=sender
        )

    async def _catalog(self, sender: str, request: Request, call: CatalogCall) -> Response:
        entries = [
            CatalogEntry(
                revision.bundle.manifest.id,
                revision.bundle.manifest.description,
                input_schema=revision.bundle.input_schema,
            )
            for _, revision in sorted(self.registry.current().items())
            if sender in revision.bundle.manifest.policy.allowedCallers
        ]
        return answer(request, CatalogAnswer(entries))

    async def _dispatch_call(self, sender: str, request: Request, call: DispatchCall) -> Response:
        outcome = await self.dispatch(
            DispatchRequest(
                agent_id=call.agent_id,
                caller=sender,
                input=call.input,
                source=f"agent:{sender}",
                idempotency_key=call.idempotency_key,
            ),
            call.task,
        )
        if isinstance(outcome, Refused):
            detail = outcome.detail + (f" at {outcome.pointer}" if outcome.pointer else "")
            return refusal(request, outcome.code, detail)
        return answer(
            request,
            DispatchAnswer(
                invocation_id=outcome.id,
                state=outcome.state,
                output=outcome.output,
                reply=outcome.reply,
                error_code=outcome.error_code,
                error_detail=outcome.error_detail,
                error_pointer=outcome.error_pointer,
            ),
        )


_Ctx = tuple[DispatchService, str, Request]  # the service, the sender, its request

# The sub-agent service's one table: op -> request struct -> handler.
_TABLE: OpTable[_Ctx, Awaitable[Response]] = (
    OpTable[_Ctx, Awaitable[Response]](SUBAGENT_SERVICE)
    .on(SUBAGENT_CATALOG, lambda ctx, call: ctx[0]._catalog(ctx[1], ctx[2], call))
    .on(SUBAGENT_DISPATCH, lambda ctx, call: ctx[0]._dispatch_call(ctx[1], ctx[2], call))
    .require(SUBAGENT_OPERATIONS)
)


async def _blocking(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """A store call (blocking LMDB) in a worker thread."""
    return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def _stop_at(turn: Turn, live: _Live, deadline: float) -> None:
    """Cancel the runtime's turn when the invocation is cancelled or its deadline passes;
    the turn then ends with the runtime's last word (or the turn service's grace)."""
    with trio.move_on_at(deadline):
        await live.stop.wait()
    if live.ended_by is None:
        live.ended_by = "timeout"
        live.stop.set()
    turn.cancel()
