"""The agent runtime in a daemon-started agent: turns arrive and leave through the bus.

Inbound messages by kind:
  chat     from "daemon" (the daemon's turn service, for any channel): a `TurnInput`; run a
           turn, post its events back as `TurnEventPost` requests to the turn service, and
           ask its approvals as `ApprovalQuestion` requests.
  cancel   from "daemon": a `TurnCancel`; cancel that turn.
  ask / delegate  from a peer agent: run a turn (no one to approve anything, and only the
           tools in this agent's `peer_tools`) and send the answer back as a `reply`.
  reply    from the peer this agent asked: wakes the waiting tool call.
The router has already checked that a peer message comes from an allowed peer and stamped
its real sender; "daemon" is a reserved alias no agent can have.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal, TypeVar

import msgspec
import trio

from .._ops import BodyError, CallRefused, Operation, decode_body
from ..bus import (
    DAEMON_SENDER,
    DEFAULT_SESSION,
    QUESTION_KINDS,
    AgentBus,
    Message,
    Origin,
    Outcome,
    PeerAnswer,
    PeerQuestion,
    session_key,
)
from ..tools import Approver, ToolResult, as_tool_error
from ..turns import (
    ADAPTER_ADMIT,
    ADAPTER_INVOKE,
    ADAPTER_SERVICE,
    SCHEDULE_SERVICE,
    SUBAGENT_CATALOG,
    SUBAGENT_DISPATCH,
    SUBAGENT_SERVICE,
    TURN_APPROVE,
    TURN_EVENT,
    USAGE_REPORT,
    AdapterCall,
    AdapterInvoke,
    AgentTurnEvent,
    ApprovalQuestion,
    CatalogCall,
    Delta,
    DispatchCall,
    PrefetchedContext,
    ToolUsed,
    TurnCancel,
    TurnDone,
    TurnEventPost,
    TurnInput,
    UsageReport,
    UsageVerdict,
    context_id,
)
from ._turn import TurnEngine, TurnResult

log = logging.getLogger("zeroclaw.agent")

PEER_REPLY_SECS = 120.0  # how long an ask waits for the peer's answer
PEER_TURNS = 4  # peers' asks this agent works on at once
PEER_BACKLOG = 32  # asks waiting for a turn; beyond that a peer is told "busy" at once
# How long a dispatch waits for its invocation to end. The daemon enforces the sub-agent's
# own timeout (policy.timeoutSeconds) and answers `timed_out` then, so this only bounds a
# wait for a daemon that never answers; it is long because sub-agents may legitimately run
# for many minutes, and bounded so a lost answer cannot hold a turn forever.
DISPATCH_WAIT_SECS = 3600.0
CATALOG_WAIT_SECS = 30.0
ADMIT_WAIT_SECS = 30.0
# How a malformed answer names its service to the model.
SERVICE_NAMES = {
    SUBAGENT_SERVICE: "sub-agent",
    ADAPTER_SERVICE: "adapter",
    SCHEDULE_SERVICE: "schedule",
}
# A reminder request waits for the schedule store's commit (and nothing else).
SCHEDULE_WAIT_SECS = 30.0
ADAPTER_WAIT_SECS = 3600.0  # an invoke answers when the program ended (its own timeout)
METER_WAIT_SECS = 30.0  # the daemon's verdict on a step; none by then is "go on"
CONTEXT_WAIT_SECS = 30.0  # a chat turn's context from the daemon; none by then: ask memory
BodyT = TypeVar("BodyT", TurnInput, TurnCancel, PeerQuestion, PeerAnswer)
Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)


class BusReach:
    """Memory, peers and sub-agents through the router."""

    def __init__(self, bus: AgentBus) -> None:
        self.bus = bus
        self.waiting: dict[str, tuple[str, trio.MemorySendChannel[PeerAnswer]]] = {}

    async def memory(self, op: Operation[Req, Ans], request: Req) -> Ans:
        return await self.bus.call(op, request)

    async def message_peer(
        self,
        to: str,
        text: str,
        *,
        delegate: bool,
        depth: int,
        session: str = "default",
        turn: str | None = None,
    ) -> ToolResult:
        """Ask (or delegate to) a peer and wait for its reply. `depth` is this agent's own
        count; the router decides the depth (and whether a delegation is allowed) itself and
        stamps it on the delivered question (ADR 0018), so it is not sent. `session` (the
        asking turn's) is sent: the router keys the callee's session by it, inside this
        agent's peer namespace, so a sender's turn never continues the operator's."""
        message_id = self.bus.new_id()
        answer_in, answer_out = trio.open_memory_channel[PeerAnswer](1)
        self.waiting[message_id] = (to, answer_in)
        try:
            outcome = await self.bus.send(
                to,
                "",  # the router picks the channel a peer group shares
                PeerQuestion(text),
                session=session,
                turn=turn,
                kind="delegate" if delegate else "ask",
                message_id=message_id,
            )
            if not outcome.delivered:
                return ToolResult.refused(
                    as_tool_error(outcome.code, "unavailable"), outcome.detail
                )
            with trio.move_on_after(PEER_REPLY_SECS):
                answer = await answer_out.receive()
                if answer.error:
                    return ToolResult(False, "", "unavailable", f"{to}: {answer.error}")
                return ToolResult(True, answer.text)
            return ToolResult.refused("unavailable", f"{to} did not answer in {PEER_REPLY_SECS:g}s")
        finally:
            del self.waiting[message_id]

    async def subagent(
        self, op: Literal["catalog", "dispatch"], body: CatalogCall | DispatchCall
    ) -> ToolResult:
        """A request to the daemon's sub-agent service; the router stamps who asks."""
        if isinstance(body, DispatchCall):
            return await self._call(SUBAGENT_DISPATCH, body, DISPATCH_WAIT_SECS)
        return await self._call(SUBAGENT_CATALOG, body, CATALOG_WAIT_SECS)

    async def adapter(
        self, op: Literal["admit", "invoke"], body: AdapterCall | AdapterInvoke
    ) -> ToolResult:
        """A request to the daemon's adapter service; the router stamps who asks."""
        if isinstance(body, AdapterInvoke):
            return await self._call(ADAPTER_INVOKE, body, ADAPTER_WAIT_SECS)
        return await self._call(ADAPTER_ADMIT, body, ADMIT_WAIT_SECS)

    async def _call(self, op: Operation[Req, Ans], body: Req, wait: float) -> ToolResult:
        """One daemon service request: ok with the typed answer as builtins in `data`, or
        the service's refusal (a code of its own, passed on) or the bus's (timeout, ...)."""
        try:
            answer = await self.bus.call(op, body, wait_secs=wait)
        except CallRefused as exc:
            detail = exc.detail or exc.code
            if exc.code == "malformed":
                name = SERVICE_NAMES.get(op.service, op.service)
                detail = detail.replace(f"the {op.service} service", f"the {name} service")
            return ToolResult.refused(as_tool_error(exc.code, "unavailable"), detail)
        return ToolResult(True, data=msgspec.to_builtins(answer))

    async def schedule(self, op: Operation[Req, Ans], body: Req) -> ToolResult:
        """A request to the daemon's schedule service; the router stamps who asks."""
        return await self._call(op, body, SCHEDULE_WAIT_SECS)

    def on_question_refused(self, outcome: Outcome) -> None:
        """The router: the peer exited before it answered. The ask ends now."""
        waiter = self.waiting.get(outcome.id)
        if waiter is not None:
            with contextlib.suppress(trio.WouldBlock):
                waiter[1].send_nowait(
                    PeerAnswer(outcome.id, error=outcome.detail or "the peer is gone")
                )

    def on_reply(self, message: Message) -> None:
        answer = _decoded(message, PeerAnswer)
        waiter = None if answer is None else self.waiting.get(answer.in_reply_to)
        if answer is None or waiter is None or waiter[0] != message.from_:
            return  # malformed, late, or not from the agent we asked
        with contextlib.suppress(trio.WouldBlock):  # a second answer to the same question
            waiter[1].send_nowait(answer)


class BusMeter:
    """A turn's usage, reported to the daemon's usage service; the router stamps who
    reports. A refusal or no answer is read as "go on": the daemon still admits (or
    refuses) every next turn itself (ADR 0057)."""

    def __init__(self, bus: AgentBus) -> None:
        self.bus = bus

    async def step(self, report: UsageReport) -> UsageVerdict:
        try:
            return await self.bus.call(USAGE_REPORT, report, wait_secs=METER_WAIT_SECS)
        except CallRefused as exc:
            log.warning("usage of turn %s not reported: %s %s", report.turn, exc.code, exc.detail)
            return UsageVerdict()

    def post(self, report: UsageReport) -> None:
        self.bus.post_request(USAGE_REPORT, report)


async def nobody_told(turns: int) -> None:
    return None


class BusyTurns:
    """The turns running in this process. The daemon hears of 0 <-> busy, so that an
    on-demand process (an agent, a sub-agent runtime) is never stopped as idle mid-turn."""

    def __init__(self, on_busy: Callable[[int], Awaitable[None]] = nobody_told) -> None:
        self.count = 0
        self._on_busy = on_busy

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        self.count += 1
        if self.count == 1:
            await self._on_busy(1)
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                with trio.CancelScope(shield=True):
                    await self._on_busy(0)


def turn_event_poster(bus: AgentBus, turn: str) -> Callable[[AgentTurnEvent], None]:
    """How a process posts one turn's events to the daemon's turn service."""

    def post(event: AgentTurnEvent) -> None:
        bus.post_request(TURN_EVENT, TurnEventPost(turn, event))

    return post


def _decoded(message: Message, body_type: type[BodyT]) -> BodyT | None:
    """A message's body as its struct; None (and a warning) if it is not one."""
    try:
        return decode_body(message.body, body_type)
    except BodyError as exc:
        log.warning("dropped a %s message that does not decode: %s", message.kind, exc)
        return None


class AgentInbox:
    """What the bus hands the runtime: delivered messages, and refusals of questions it
    already delivered. Built before the bus (and given to it at construction), so nothing
    arrives before someone listens."""

    def __init__(self) -> None:
        self._send, self.received = trio.open_memory_channel[Message | Outcome](math.inf)

    def message(self, message: Message) -> None:
        self._send.send_nowait(message)

    def late_refusal(self, outcome: Outcome) -> None:
        self._send.send_nowait(outcome)


class AgentRuntime:
    def __init__(
        self,
        bus: AgentBus,
        engine: TurnEngine,
        reach: BusReach,
        inbox: AgentInbox,
        *,
        on_busy: Callable[[int], Awaitable[None]] = nobody_told,
    ) -> None:
        self.bus = bus
        self.engine = engine
        self.reach = reach
        self.busy = BusyTurns(on_busy)  # chat and peer turns running now
        self.chats: dict[str, trio.CancelScope] = {}
        self._peer_slots = trio.CapacityLimiter(PEER_TURNS)
        self.peer_busy = 0  # asks answered "busy" (a peer asking faster than we answer)
        self.inbox = inbox

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            async for item in self.inbox.received:
                if isinstance(item, Outcome):
                    self.reach.on_question_refused(item)
                else:
                    self._dispatch(item, nursery)

    def _dispatch(self, message: Message, nursery: trio.Nursery) -> None:
        kind = message.kind
        if kind == "reply":
            self.reach.on_reply(message)
        elif kind in QUESTION_KINDS and message.from_ != DAEMON_SENDER:
            if (question := _decoded(message, PeerQuestion)) is None:
                self._answer(message, PeerAnswer(message.id, error="the question does not decode"))
            else:
                nursery.start_soon(self._peer_turn, message, question)
        elif kind == "chat" and message.from_ == DAEMON_SENDER:
            if (chat := _decoded(message, TurnInput)) is not None:
                nursery.start_soon(self._chat_turn, message, chat)
        elif kind == "cancel" and message.from_ == DAEMON_SENDER:
            cancel = _decoded(message, TurnCancel)
            scope = self.chats.get(cancel.turn) if cancel is not None else None
            if scope is not None:
                scope.cancel()

    async def _chat_turn(self, message: Message, chat: TurnInput) -> None:
        async with self.busy.turn():
            await self._run_chat_turn(message, chat)

    async def _run_chat_turn(self, message: Message, chat: TurnInput) -> None:
        turn = message.id
        emit = turn_event_poster(self.bus, turn)

        async def on_event(event: Delta | ToolUsed) -> None:
            emit(event)

        approver: Approver | None = None
        if chat.interactive:

            async def approver(what: str) -> bool:
                question = ApprovalQuestion(turn, what, self.engine.approval_timeout)
                try:
                    answer = await self.bus.call(TURN_APPROVE, question, wait_secs=math.inf)
                except CallRefused:
                    return False  # refused, or an answer we cannot read: no yes
                return answer.approved

        answered = False

        def on_answer(result: TurnResult) -> None:
            # The reply goes out now; the transcript append finishes after it (ADR 0038).
            nonlocal answered
            answered = True
            emit(
                TurnDone(
                    result.reply,
                    tuple(result.tool_calls),
                    result.error,
                    usage=tuple(result.usage),
                    stopped=result.stopped,
                )
            )

        with trio.CancelScope() as scope:
            self.chats[turn] = scope
            try:
                await self.engine.tools_ready()  # its MCP servers' first start (cancellable)
                await self.engine.run_turn(
                    chat.text,
                    session=message.session or DEFAULT_SESSION,  # the daemon's key
                    on_event=on_event,
                    approver=approver,
                    # What the daemon granted this turn's origin (ADR 0042).
                    toolset=self.engine.origin_toolset(chat.tools),
                    turn_id=turn,
                    on_answer=on_answer,
                    prefetched=functools.partial(self._context_of, turn)
                    if chat.context_follows
                    else None,
                    budgeted=chat.budgeted,
                )
            finally:
                del self.chats[turn]
        if not answered:
            emit(TurnDone("", cancelled=True))

    async def _context_of(self, turn: str) -> PrefetchedContext | None:
        """The context the daemon sends behind a chat turn's message (ADR 0068); None when
        it had none to give or it does not come in time (the engine asks memory then)."""
        response = await self.bus.expect(context_id(turn), wait_secs=CONTEXT_WAIT_SECS)
        if response is None or not response.ok:
            return None
        try:
            return decode_body(response.body, PrefetchedContext)
        except BodyError as exc:
            log.warning("turn %s: the context sent with it does not decode: %s", turn, exc)
            return None

    async def _peer_turn(self, message: Message, question: PeerQuestion) -> None:
        async with self.busy.turn():
            await self._run_peer_turn(message, question)

    async def _run_peer_turn(self, message: Message, question: PeerQuestion) -> None:
        # Bounded: a peer that asks faster than this agent answers gets "busy", not an
        # ever-growing pile of turns (and of tasks and memory in this process).
        if self._peer_slots.statistics().tasks_waiting >= PEER_BACKLOG:
            self.peer_busy += 1
            self._answer(
                message, PeerAnswer(message.id, error="busy: too many requests from peers")
            )
            return

        def on_answer(result: TurnResult) -> None:
            # The asker hears the answer now; the transcript append follows (ADR 0038).
            self._answer(message, PeerAnswer(message.id, result.reply, result.error))

        async with self._peer_slots:
            await self.engine.tools_ready()
            await self.engine.run_turn(
                question.text,
                # The router's key in the peer namespace (ADR 0041); the fallback is the
                # same key, for a router that did not stamp one.
                session=message.session or session_key(Origin.peer(message.from_), None),
                depth=max(message.depth, 1),  # the router's count, not the asker's word
                # A peer gets only what the config grants it (ADR 0015), and of that
                # only what the origin at the chain's start was granted (ADR 0042), as
                # the router stamped it: never the asker's word (ADR 0052).
                toolset=self.engine.peer_origin_toolset(message.tools),
                # The router's name for this turn: the bare id is the asker's, and could
                # name another asker's question or one of this agent's chats (ADR 0052).
                turn_id=message.turn,
                on_answer=on_answer,
            )

    def _answer(self, question: Message, answer: PeerAnswer) -> None:
        def sent(outcome: Outcome) -> None:
            if not outcome.delivered:
                log.info("reply to %s not delivered: %s", question.from_, outcome.label)

        self.bus.post(question.from_, question.channel, answer, sent, kind="reply")
