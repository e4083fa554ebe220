"""The turn service: the one way an inbound conversation enters an agent (daemon side).

A channel (the control socket's chat today; webhook and serial next) opens a turn with
the conversation's origin, reads its events, answers its approvals and may cancel it:

    async with turns.open_turn(agent, text, session=s, origin=o, interactive=i) as turn:
        async for event in turn.events():
            ...  # TurnEvents from the agent, then one terminal event

The turn's message enters the router as injected input `from` the daemon with its origin
(the router admits it by that). The agent answers with `TURN_SERVICE` requests; the
service takes them only from the agent the turn went to (the router says who sent
each), so no agent can speak into another agent's turn. Leaving the block before the
turn ended cancels the agent's work; approvals nobody answered are denied.

A chat turn's context from memory follows its message: read here once the message is on
its way (`ContextReader`) and sent to the agent as a Response it was told to expect, so the
agent starts its model call without a round trip to the memory service first, and reads
its identity files while the daemon reads its memory (ADR 0068).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import trio

from .._ops import BodyError, OpTable, encode_body
from ..bus import DAEMON_SENDER, Message, Origin, RefusalCode, Request, Response, session_key
from ..events import EventSink, TurnFinished
from ..turns import (
    TURN_APPROVE,
    TURN_EVENT,
    TURN_OPERATIONS,
    TURN_SERVICE,
    AgentTurnEvent,
    ApprovalAnswer,
    ApprovalAsked,
    ApprovalLedger,
    ApprovalQuestion,
    PrefetchedContext,
    TurnCancel,
    TurnDone,
    TurnEventPost,
    TurnInput,
    context_id,
)
from ._outcomes import (
    TERMINAL,
    AgentDown,
    ServiceEvent,
    TurnCancelled,
    TurnOverflow,
    TurnRefused,
)

if TYPE_CHECKING:
    from ..bus import Router

log = logging.getLogger("zeroclaw.turns")

CANCEL_GRACE_SECS = 5.0  # how long a cancelled turn may take to say it stopped
MAX_BUFFERED_EVENTS = 10_000  # events of one turn waiting for its reader before it is cut off
MAX_APPROVAL_TEXT = 500  # characters of an approval question shown to whoever answers
# Room left in a bus frame around a chat turn's context: a context that would leave less
# is not sent (the agent asks memory for it then).
CONTEXT_ROOM_BYTES = 16 * 1024

# A chat turn's context from memory, read while its message travels (agent, session key,
# text, the tools granted; ADR 0068); None when there is none to give (the agent asks).
ContextReader = Callable[
    [str, str, str, tuple[str, ...] | None], Awaitable[PrefetchedContext | None]
]


class Refusal(Protocol):
    def told_to(self, origin: Origin) -> str:
        """Why, as `origin` is told it (an outside sender is told less than the operator)."""
        ...


class TurnAdmission(Protocol):
    """Whether a turn may start, and its end: the daemon's budgets (ADR 0057)."""

    def admit(
        self, agent: str, origin: Origin, session: str, turn: str, *, text: str = ""
    ) -> Refusal | None:
        """None: the turn starts (and is counted); otherwise why it is refused. `text`:
        the turn's message (what it will spend at least)."""
        ...

    def budgeted(self, agent: str, origin: Origin) -> bool:
        """Whether any budget applies to a turn of `agent` from `origin` (when none does,
        the agent posts its steps' usage without waiting for a verdict, ADR 0068)."""
        ...

    def closed(self, agent: str, turn: str) -> None: ...


class AdmitAll:
    """No budgets (a turn service of the tests')."""

    def admit(
        self, agent: str, origin: Origin, session: str, turn: str, *, text: str = ""
    ) -> Refusal | None:
        return None

    def budgeted(self, agent: str, origin: Origin) -> bool:
        return False

    def closed(self, agent: str, turn: str) -> None:
        return None


def turn_outcome(event: ServiceEvent) -> str:
    """A terminal event as the small fixed set of outcomes a finished turn is counted by."""
    if isinstance(event, TurnDone):
        return "cancelled" if event.cancelled else "error" if event.error is not None else "ok"
    if isinstance(event, TurnRefused):
        return "refused"
    if isinstance(event, AgentDown):
        return "agent_down"
    if isinstance(event, TurnOverflow):
        return "overflow"
    return "cancelled"


class Turn:
    """One open turn, as its channel sees it."""

    def __init__(
        self, service: TurnService, turn_id: str, agent: str, origin: Origin, *, limit: int
    ) -> None:
        self.id = turn_id
        self.agent = agent
        self.origin = origin
        self._service = service
        self._limit = limit
        self._send, self._incoming = trio.open_memory_channel[ServiceEvent](math.inf)
        self._pending: dict[str, str] = {}  # approval request id -> its question, oldest first
        self._agent_working = False  # the agent may still be running this turn
        self._overflowed = False
        self._finished = False  # the terminal event was read
        self._closed = False  # the channel left the turn
        self._cancel_sent = False
        self._cancel_deadline = math.inf
        self._waiting: trio.CancelScope | None = None
        self.outcome = "abandoned"  # until its terminal event is read

    @property
    def pending_approvals(self) -> tuple[str, ...]:
        """Approval requests waiting for an answer, oldest first."""
        return tuple(self._pending)

    def events(self) -> AsyncIterator[ServiceEvent]:
        """The agent's events, ending with exactly one terminal event: `TurnDone`, or one of
        `TurnRefused`, `AgentDown`, `TurnOverflow`, `TurnCancelled`."""
        return _Events(self)

    def answer_approval(self, rid: str, approved: bool) -> bool:
        """Answer a pending approval; False if `rid` is not one (answered, or never asked)."""
        what = self._pending.pop(rid, None)
        if what is None:
            return False
        if approved:  # the daemon's own record of it, for the services that act on it
            self._service.approvals.record(self.agent, self.id, what)
        self._service._answer(self.agent, rid, approved)
        return True

    def cancel(self) -> None:
        """Stop the agent's work. Its last word (a cancelled `TurnDone`) still arrives; if it
        does not within the grace, the turn ends with `TurnCancelled`."""
        if self._cancel_deadline != math.inf:
            return
        self._cancel_deadline = trio.current_time() + self._service.cancel_grace
        if self._waiting is not None:
            self._waiting.deadline = self._cancel_deadline
        self._stop_agent()

    # --- the service's side -----------------------------------------------------------------

    def _push(self, event: ServiceEvent) -> None:
        if not self._closed:
            self._send.send_nowait(event)

    def _over_limit(self) -> bool:
        """Whether the turn is (now) cut off: the daemon does not hold an unbounded
        backlog for a reader that does not read (or an agent that does not stop), of
        events or of approval questions; the turn ends here, visibly."""
        if self._overflowed:
            return True
        if self._send.statistics().current_buffer_used >= self._limit:
            self._overflowed = True
            self._push(TurnOverflow(self._limit))
            self._stop_agent()
            return True
        return False

    def _from_agent(self, event: AgentTurnEvent) -> None:
        if self._over_limit():
            return
        if isinstance(event, TurnDone):
            self._agent_working = False
        self._push(event)

    def _asked(self, rid: str, what: str, timeout_secs: float | None = None) -> bool:
        if self._closed or rid in self._pending or self._over_limit():
            return False  # denied at once (a reused id too: one answer per question)
        shown = what[:MAX_APPROVAL_TEXT]
        self._pending[rid] = shown  # what is answered is what was shown
        self._push(ApprovalAsked(shown, rid, timeout_secs))
        return True

    def _delivered(self, code: RefusalCode | None, detail: str) -> None:
        if code is not None:
            self._agent_working = False
            self._push(TurnRefused(code, detail))

    def _down(self) -> None:
        self._agent_working = False
        self._push(AgentDown())

    def _stop_agent(self) -> None:
        if self._agent_working and not self._cancel_sent:
            self._cancel_sent = True
            self._service._send_cancel(self)

    def _close(self) -> None:
        self._closed = True
        self._stop_agent()
        for rid in self._pending:  # nobody will answer these now
            self._service._answer(self.agent, rid, False)
        self._pending.clear()
        self._service.approvals.forget(self.agent, self.id)


class _Events:
    """`Turn.events()`: an iterator object rather than an async generator, so that its
    cancel scope never spans a yield."""

    def __init__(self, turn: Turn) -> None:
        self._turn = turn

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> ServiceEvent:
        turn = self._turn
        if turn._finished:
            raise StopAsyncIteration
        event: ServiceEvent = TurnCancelled()
        with trio.CancelScope(deadline=turn._cancel_deadline) as scope:
            turn._waiting = scope
            try:
                event = await turn._incoming.receive()
            finally:
                turn._waiting = None
        if isinstance(event, TERMINAL):
            turn._finished = True
            turn.outcome = turn_outcome(event)
        return event


class TurnService:
    def __init__(
        self,
        router: Router,
        *,
        cancel_grace: float = CANCEL_GRACE_SECS,
        max_buffered: int = MAX_BUFFERED_EVENTS,
        events: EventSink | None = None,
        approvals: ApprovalLedger | None = None,
        admission: TurnAdmission | None = None,
        context: ContextReader | None = None,
    ) -> None:
        """`approvals`: where the yes answers of its turns are recorded (the composition
        root's one ledger, shared with the services that act on them; ADR 0052);
        `admission`: the budgets every turn passes before its agent hears of it;
        `context`: reads a chat turn's context from memory, sent behind its message
        (ADR 0068)."""
        self.router = router
        self.context = context
        self.admission: TurnAdmission = AdmitAll() if admission is None else admission
        self.approvals = ApprovalLedger() if approvals is None else approvals
        self.events = events  # each finished turn is published here (TurnFinished)
        self.cancel_grace = cancel_grace
        self.max_buffered = max_buffered
        self.turns: dict[str, Turn] = {}
        self.spoofed = 0  # requests from an agent the turn was not addressed to
        self.malformed = 0  # requests whose body did not decode
        self._ids = itertools.count(1)
        self._prefix = f"turn-{os.getpid():x}-{int(time.time()):x}"

    def check_agent(self, agent: str) -> TurnRefused | None:
        """Why a turn for `agent` cannot open (it is not an enabled agent), or None."""
        enabled = self.router.policy.enabled
        if agent in enabled or self.router.is_confined(agent):
            return None
        known = ", ".join(sorted(enabled)) or "none"
        return TurnRefused("unknown_agent", f"no enabled agent {agent!r}; known: {known}")

    def channels_of(self, agent: str) -> tuple[str, ...]:
        """The channel keys the agent binds."""
        return tuple(self.router.policy.bindings.get(agent, ()))

    @asynccontextmanager
    async def open_turn(
        self,
        agent: str,
        text: str,
        *,
        session: str | None,
        origin: Origin,
        interactive: bool = False,
        input: object = None,
        budget_origin: Origin | None = None,
    ) -> AsyncIterator[Turn]:
        """`input`: a sub-agent invocation's structured input (TurnInput.input).
        `budget_origin`: whose budgets the turn spends from, when not its origin's (an
        outside sender's reminder runs as a schedule and spends its maker's: ADR 0060).
        `session`: the name the origin asked for; the turn's session is the daemon's key
        for it inside the origin (`session_key`: an outside origin names only its own, and
        an operator's name that is not one raises SessionNameRefused before anything
        opens)."""
        key = session_key(origin, session)
        turn_id = f"{self._prefix}-{next(self._ids)}"
        opened = trio.current_time()
        turn = self.turns[turn_id] = Turn(self, turn_id, agent, origin, limit=self.max_buffered)
        # Decided here, from the config, for every way in: a caller cannot forget it, and
        # an origin the grant does not know gets nothing (ADR 0042).
        tools = self.router.policy.origin_grant(agent, origin).tool_names()
        admitted = False  # counted by the budgets: closed with them at the end
        try:
            refusal = self.check_agent(agent)
            budgeted = refusal is None and self._budgeted(agent, origin)
            over = (
                self.admission.admit(agent, budget_origin or origin, key, turn_id, text=text)
                if budgeted
                else None
            )
            if refusal is not None:
                turn._push(refusal)
            elif over is not None:  # before the agent hears of it: no provider call
                turn._push(TurnRefused("budget_exceeded", over.told_to(budget_origin or origin)))
            else:
                admitted = budgeted
                turn._agent_working = True
                budgets = self.admission.budgeted(agent, budget_origin or origin)
                # Only to an agent on the bus now: a message queued while an on-demand
                # agent starts would arrive after a Response sent meanwhile (dropped).
                follows = (
                    self.context is not None
                    and input is None
                    and self.router.core.conn_of(agent) is not None
                )
                chat = TurnInput(
                    text, interactive, input, tools, context_follows=follows, budgeted=budgets
                )
                self.router.turn_opened(agent, turn_id, tools, budget_origin or origin)
                self.router.inject(
                    Message(
                        id=turn_id,
                        to=agent,
                        channel=origin.channel,
                        body=encode_body(chat),
                        sent_at=time.time(),
                        from_=DAEMON_SENDER,
                        session=key,
                        kind="chat",
                    ),
                    origin,
                    turn._delivered,
                )
                if follows and turn._agent_working:  # not refused on the way
                    await self._send_context(agent, turn_id, key, chat)
            yield turn
        finally:
            del self.turns[turn_id]
            if admitted:
                self.admission.closed(agent, turn_id)
            self.router.turn_closed(agent, turn_id)
            turn._close()
            if self.events is not None:
                self.events.publish(
                    TurnFinished(
                        agent,
                        origin.channel,
                        turn.outcome,
                        round(trio.current_time() - opened, 6),
                    )
                )

    async def _send_context(self, agent: str, turn_id: str, session: str, chat: TurnInput) -> None:
        """The context the agent was told follows its chat message: read now, while the
        message travels, and sent as the Response `context_id(turn_id)`; not ok when there
        is none to give or it would crowd the bus frame (the agent asks memory then)."""
        assert self.context is not None
        context = await self.context(agent, session, chat.text, chat.tools)
        body = None if context is None else encode_body(context)
        if body is not None and len(body) + CONTEXT_ROOM_BYTES <= self.router.core.max_frame:
            self.router.reply(agent, Response(id=context_id(turn_id), body=body))
        else:
            self.router.reply(agent, Response(id=context_id(turn_id), ok=False, error="none"))

    def _budgeted(self, agent: str, origin: Origin) -> bool:
        """Whether the budgets hear of this turn: not when the router will refuse its
        origin anyway (a refused sender must not spend anyone's budget)."""
        refused = self.router.policy.origin_refusal(agent, origin)
        return refused is None or self.router.is_confined(agent)

    def cancel_turn(self, agent: str, turn_id: str) -> None:
        """Cancel `agent`'s turn `turn_id`, if it is open (the daemon's budgets ending a
        turn whose agent went on after it was told to stop)."""
        turn = self.turns.get(turn_id)
        if turn is not None and turn.agent == agent:
            turn.cancel()

    # --- the router's side ------------------------------------------------------------------

    def agent_down(self, alias: str) -> None:
        """The router: `alias` exited. Its turns end."""
        for turn in self.turns.values():
            if turn.agent == alias:
                turn._down()

    def on_request(self, sender: str, request: Request) -> None:
        """The router: a `TURN_SERVICE` request from the agent `sender`, decoded and handed
        to its operation's handler by the service's one table."""
        try:
            _TABLE.run((self, sender, request.id), request.op, request.body)
        except BodyError:
            self.malformed += 1
            if request.op != TURN_EVENT.name:  # a posted event has nobody to tell
                self._refuse(sender, request.id, "bad_request")

    def _on_event(self, sender: str, post: TurnEventPost) -> None:
        turn = self._turn_of(sender, post.turn)
        if turn is not None:
            turn._from_agent(post.event)

    def _on_approve(self, sender: str, rid: str, question: ApprovalQuestion) -> None:
        turn = self._turn_of(sender, question.turn)
        if turn is None:
            self._refuse(sender, rid, "unknown_turn")
        elif not turn._asked(rid, question.what, question.timeout_secs):
            self._answer(sender, rid, False)

    def _turn_of(self, sender: str, turn_id: str) -> Turn | None:
        turn = self.turns.get(turn_id)
        if turn is not None and turn.agent != sender:
            self.spoofed += 1
            log.warning("agent %s sent an event for another agent's turn", sender)
            return None
        return turn

    def _answer(self, alias: str, rid: str, approved: bool) -> None:
        self.router.reply(
            alias, Response(id=rid, ok=True, body=encode_body(ApprovalAnswer(approved)))
        )

    def _refuse(self, alias: str, rid: str, code: str) -> None:
        self.router.reply(alias, Response(id=rid, ok=False, error=code))

    def _send_cancel(self, turn: Turn) -> None:
        self.router.inject(
            Message(
                id=f"{turn.id}-cancel",
                to=turn.agent,
                channel=turn.origin.channel,
                body=encode_body(TurnCancel(turn.id)),
                sent_at=time.time(),
                from_=DAEMON_SENDER,
                kind="cancel",
            ),
            turn.origin,
            lambda code, detail: None,
        )


_Ctx = tuple[TurnService, str, str]  # the service, the sender, the request's id

# The turn service's one table: op -> request struct -> handler.
_TABLE: OpTable[_Ctx, None] = (
    OpTable[_Ctx, None](TURN_SERVICE)
    .on(TURN_EVENT, lambda ctx, post: ctx[0]._on_event(ctx[1], post))
    .on(TURN_APPROVE, lambda ctx, question: ctx[0]._on_approve(ctx[1], ctx[2], question))
    .require(TURN_OPERATIONS)
)
