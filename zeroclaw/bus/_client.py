"""The agent's end of the bus: one DEALER, authenticated with the keys of this start."""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import trio
import zmq

from .._ops import BodyError, CallRefused, Operation, decode_body, encode_body
from ._wire import (
    Ack,
    Deliver,
    Hello,
    Message,
    MessageKind,
    Refusal,
    Request,
    Response,
    Send,
    WireError,
    decode_from_router,
    encode,
)
from ._zsocket import Frames, SocketOwner

log = logging.getLogger("zeroclaw.bus")

Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)

SEND_WINDOW = 512  # messages awaiting an outcome before senders wait
# Responses that arrived before anyone waited for them (a chat turn's context, which the
# daemon sends right behind the turn's message: ADR 0068), the oldest dropped first.
EARLY_RESPONSES = 16
# The ids of those dropped, remembered (a few bytes each) so that whoever expects one is
# told at once that it will not come, rather than waiting out its deadline.
DROPPED_RESPONSES = 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one send ended: delivered (acked by the destination) or refused with a code."""

    id: str
    delivered: bool
    code: str | None = None
    detail: str = ""

    @property
    def label(self) -> str:
        return "delivered" if self.delivered else (self.code or "refused")


OutcomeHandler = Callable[[Outcome], None]


@dataclass(frozen=True)
class BusCredentials:
    alias: str
    endpoint: str
    server_public: bytes
    public: bytes
    secret: bytes
    max_frame: int


class AgentBus:
    def __init__(
        self,
        creds: BusCredentials,
        *,
        window: int = SEND_WINDOW,
        on_message: Callable[[Message], None] = lambda message: None,
        on_late_refusal: OutcomeHandler = lambda outcome: None,
        sandbox: tuple[str, bool] = ("", False),
    ) -> None:
        self.creds = creds
        self.sandbox = sandbox  # (summary, in force): told to the daemon in the Hello
        self.alias = creds.alias
        self.on_message = on_message
        # A Refusal for a message already delivered: the router saying a question this
        # agent asked will never be answered (its callee exited).
        self.on_late_refusal = on_late_refusal
        self._requests: dict[str, trio.MemorySendChannel[Response]] = {}
        self._early: OrderedDict[str, Response] = OrderedDict()
        self._dropped: OrderedDict[str, None] = OrderedDict()
        self._window = window
        self._waiting: dict[str, OutcomeHandler] = {}
        self._room = trio.Event()
        self._acks: list[int] = []
        self._ids = itertools.count(1)
        self._prefix = f"{creds.alias}-{os.getpid():x}-{int(time.time() * 1000) % 100000:x}"
        self._owner: SocketOwner | None = None
        self.ctx: zmq.Context[zmq.Socket[bytes]] | None = None

    # --- sending ---------------------------------------------------------------------------

    def new_id(self) -> str:
        return f"{self._prefix}-{next(self._ids)}"

    @property
    def outstanding(self) -> int:
        return len(self._waiting)

    async def wait_for_room(self) -> None:
        while len(self._waiting) >= self._window:
            room = self._room
            await room.wait()

    def post(
        self,
        to: str,
        channel: str,
        body: msgspec.Struct | msgspec.Raw,
        on_outcome: OutcomeHandler,
        *,
        session: str | None = None,
        kind: MessageKind = "message",
        message_id: str | None = None,
        turn: str | None = None,
    ) -> str:
        """Queue one message; `on_outcome` is called exactly once with its fate."""
        message = Message(
            id=message_id or self.new_id(),
            to=to,
            channel=channel,
            body=body if isinstance(body, msgspec.Raw) else encode_body(body),
            sent_at=time.time(),
            session=session,
            kind=kind,
            turn=turn,
        )
        payload = encode(Send(message=message))
        if len(payload) > self.creds.max_frame:
            on_outcome(
                Outcome(
                    message.id, False, "too_large", f"{len(payload)} bytes > {self.creds.max_frame}"
                )
            )
            return message.id
        self._waiting[message.id] = on_outcome
        assert self._owner is not None
        self._owner.send_nowait([payload])
        return message.id

    async def send(
        self,
        to: str,
        channel: str,
        body: msgspec.Struct | msgspec.Raw,
        *,
        session: str | None = None,
        kind: MessageKind = "message",
        message_id: str | None = None,
        turn: str | None = None,
    ) -> Outcome:
        """Send one message and wait for its outcome."""
        await self.wait_for_room()
        done = trio.Event()
        result: list[Outcome] = []

        def finish(outcome: Outcome) -> None:
            result.append(outcome)
            done.set()

        self.post(
            to, channel, body, finish, session=session, kind=kind, message_id=message_id, turn=turn
        )
        await done.wait()
        return result[0]

    async def call(self, op: Operation[Req, Ans], body: Req, *, wait_secs: float = 30.0) -> Ans:
        """Call one operation of a daemon service and wait for its typed answer; CallRefused
        with the service's code (or the bus's: timeout, unknown_service, malformed)."""
        response = await self.request(op.service, op.name, body, wait_secs=wait_secs)
        if not response.ok:
            raise CallRefused(response.error or "unavailable", response.detail)
        try:
            return decode_body(response.body, op.answer)
        except BodyError as exc:
            raise CallRefused("malformed", f"the {op.service} service's answer: {exc}") from None

    async def request(
        self,
        service: str,
        op: str,
        body: msgspec.Struct | msgspec.Raw,
        *,
        wait_secs: float = 30.0,
    ) -> Response:
        """Send one request (a struct, or bytes already encoded) and wait for its Response."""
        request_id = self.new_id()
        send, receive = trio.open_memory_channel[Response](1)
        self._requests[request_id] = send
        raw = body if isinstance(body, msgspec.Raw) else encode_body(body)
        try:
            self.send_frame(Request(id=request_id, service=service, op=op, body=raw))
            with trio.move_on_after(wait_secs):
                return await receive.receive()
            return Response(
                id=request_id, ok=False, error="timeout", detail=f"no answer in {wait_secs:g}s"
            )
        finally:
            self._requests.pop(request_id, None)

    async def expect(self, response_id: str, *, wait_secs: float) -> Response | None:
        """A Response the daemon sends unasked (one it announced: a chat turn's context,
        ADR 0068), whether it arrived already or arrives within `wait_secs`; None if not."""
        early = self._early.pop(response_id, None)
        if early is not None:
            return early
        if response_id in self._dropped:  # it came, and newer ones pushed it out
            del self._dropped[response_id]
            return None
        send, receive = trio.open_memory_channel[Response](1)
        self._requests[response_id] = send
        try:
            with trio.move_on_after(wait_secs):
                return await receive.receive()
            return None
        finally:
            self._requests.pop(response_id, None)

    def send_raw(self, payload: bytes) -> None:
        """Put arbitrary bytes on the wire (for tests of the router's input handling)."""
        assert self._owner is not None
        self._owner.send_nowait([payload])

    def post_request(self, op: Operation[Req, Any], body: Req) -> None:
        """Post one request nobody answers (a turn's event)."""
        request = Request(id=self.new_id(), service=op.service, op=op.name, body=encode_body(body))
        self.send_frame(request)

    def send_frame(self, frame: Any) -> None:
        assert self._owner is not None
        self._owner.send_nowait([encode(frame)])

    # --- receiving -------------------------------------------------------------------------

    def _on_frames(self, frames: Frames, _user: bytes) -> bool:
        if len(frames) != 1:
            return True
        try:
            frame = decode_from_router(frames[0])
        except WireError as exc:
            log.warning("dropping a malformed frame from the router: %s", exc)
            return True
        if isinstance(frame, Deliver):
            self._acks.append(frame.rid)
            if frame.message is not None:
                try:
                    self.on_message(frame.message)
                except Exception:
                    log.exception("message handler failed")
        elif isinstance(frame, Ack):
            # One Ack covers a burst: resolve them all, then wake waiting senders once.
            for message_id in frame.ids:
                self._resolve(Outcome(message_id, True), wake=False)
            self._wake_senders()
        elif isinstance(frame, Refusal):
            if frame.id is not None:
                outcome = Outcome(frame.id, False, frame.code, frame.detail)
                if frame.id in self._waiting:
                    self._resolve(outcome)
                else:
                    self.on_late_refusal(outcome)
        elif isinstance(frame, Response):
            waiter = self._requests.pop(frame.id, None)
            if waiter is not None:
                waiter.send_nowait(frame)
            elif not frame.id.startswith(f"{self._prefix}-"):  # early: kept a while for `expect`
                self._keep_early(frame)
            # else late: an answer to this bus's own request whose caller gave up; nobody
            # will expect it, and it must not push out a context that is expected.
        return True

    def _keep_early(self, frame: Response) -> None:
        self._early[frame.id] = frame
        if len(self._early) > EARLY_RESPONSES:
            dropped, _ = self._early.popitem(last=False)
            self._dropped[dropped] = None
            if len(self._dropped) > DROPPED_RESPONSES:
                self._dropped.popitem(last=False)

    def _resolve(self, outcome: Outcome, *, wake: bool = True) -> None:
        handler = self._waiting.pop(outcome.id, None)
        if handler is None:
            return
        handler(outcome)
        if wake:
            self._wake_senders()

    def _wake_senders(self) -> None:
        if len(self._waiting) < self._window and self._room.statistics().tasks_waiting:
            self._room.set()  # only when a sender waits: a new Event per ack is not free
            self._room = trio.Event()

    def _flush_acks(self) -> None:
        if self._acks and self._owner is not None:
            self._owner.send_nowait([encode(Ack(rids=tuple(self._acks)))])
            self._acks = []

    # --- the task --------------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.ctx = ctx
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = 10_000
        sock.rcvhwm = 10_000
        # No routing id of our own: the router assigns one and knows us by our key alone.
        sock.curve_serverkey = self.creds.server_public
        sock.curve_publickey = self.creds.public
        sock.curve_secretkey = self.creds.secret
        sock.connect(self.creds.endpoint)
        owner = SocketOwner(
            sock, self._on_frames, name=f"bus:{self.alias}", after_drain=self._flush_acks
        )
        self._owner = owner
        summary, in_force = self.sandbox
        owner.send_nowait(
            [encode(Hello(pid=os.getpid(), sandbox=summary, sandbox_in_force=in_force))]
        )
        try:
            # No heartbeat of our own: the router only counted them, and 100 idle agents'
            # every 5 s (a CURVE frame and a wake-up on both sides) were half the idle CPU
            # of a 1,100-agent daemon (ADR 0069). Liveness is the runner's ping (`_runner`).
            async with trio.open_nursery() as nursery:
                nursery.start_soon(owner.run)
                task_status.started()
        finally:
            ctx.term()  # the owner closed the socket (linger 0), so this returns at once
            for message_id in list(self._waiting):
                self._resolve(Outcome(message_id, False, "unavailable", "agent bus closed"))
