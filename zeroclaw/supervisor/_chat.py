"""CLI chat through the daemon: the control socket on one side, the agent on the other.

A turn enters the router as injected channel input (kind "chat", from "daemon") and the agent
answers with a stream of events, sent as `chat` service requests. The service accepts an
event only from the agent the turn was addressed to (the router says who sends it), so no
agent can speak into another agent's chat. Approval prompts travel the same way and wait
for the operator's answer; a cancel from the client becomes a "cancel" message.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import trio

from ..bus import DAEMON_SENDER, Message, Origin, Request, Response, Router
from ..control import Chat, ChatApproval, ChatCancel, ChatOpen, Reply, error_reply
from ._control_server import Exchange

log = logging.getLogger("zeroclaw.chat")

CANCEL_GRACE_SECS = 5.0  # how long a cancelled turn may take to say it stopped
EVENT_KINDS = frozenset({"delta", "tool", "done"})
MAX_BUFFERED_EVENTS = 10_000  # events of one turn waiting for the client before it is cut off


@dataclass
class _Turn:
    alias: str
    events: trio.MemorySendChannel[dict[str, Any]]
    approvals: list[str] = field(default_factory=list)  # pending approval request ids
    overflowed: bool = False


def cli_channel(channels: tuple[str, ...]) -> str:
    """The agent's CLI channel: the first `cli.*` it binds, else the bare type."""
    return next((c for c in channels if c == "cli" or c.startswith("cli.")), "cli")


class ChatService:
    def __init__(self, router: Router) -> None:
        self.router = router
        self.turns: dict[str, _Turn] = {}
        self.spoofed = 0  # events from an agent the turn was not addressed to
        self._ids = itertools.count(1)
        self._prefix = f"chat-{os.getpid():x}-{int(time.time()):x}"

    def agent_down(self, alias: str) -> None:
        for turn in self.turns.values():
            if turn.alias == alias:
                turn.events.send_nowait({"event": "down"})

    def on_request(self, sender: str, request: Request) -> None:
        body = request.body if isinstance(request.body, dict) else {}
        turn = self.turns.get(str(body.get("turn", "")))
        if turn is None or turn.alias != sender:
            if turn is not None:
                self.spoofed += 1
                log.warning("agent %s sent an event for another agent's chat", sender)
            if request.op == "approve":
                self.router.reply(sender, Response(id=request.id, ok=False, error="unknown_turn"))
            return
        if request.op == "approve":
            turn.approvals.append(request.id)
            turn.events.send_nowait(
                {"event": "approval", "what": str(body.get("what", ""))[:500], "rid": request.id}
            )
        elif request.op == "event" and not turn.overflowed:
            event = body.get("event")
            if not isinstance(event, dict) or event.get("event") not in EVENT_KINDS:
                return
            if turn.events.statistics().current_buffer_used >= MAX_BUFFERED_EVENTS:
                # The daemon does not hold an unbounded backlog for a client that does not
                # read (or an agent that does not stop): the turn ends here, visibly.
                turn.overflowed = True
                event = {"event": "overflow"}
            turn.events.send_nowait(event)

    def _unknown(self, agent: str) -> Reply | None:
        enabled = self.router.policy.enabled
        if agent in enabled:
            return None
        known = ", ".join(sorted(enabled)) or "none"
        return error_reply("unknown_agent", f"no enabled agent {agent!r}; known: {known}")

    def open_session(self, request: ChatOpen) -> Reply:
        """An interactive session begins (the control server stops timing it out)."""
        return self._unknown(request.agent) or Reply(ok=True, data={"agent": request.agent})

    async def run_turn(self, request: Chat, exchange: Exchange) -> Reply:
        policy = self.router.policy
        if (refusal := self._unknown(request.agent)) is not None:
            return refusal
        turn_id = f"{self._prefix}-{next(self._ids)}"
        events, incoming = trio.open_memory_channel[dict[str, Any]](math.inf)
        turn = self.turns[turn_id] = _Turn(request.agent, events)
        channel = cli_channel(policy.bindings.get(request.agent, ()))

        def delivered(code: str | None, detail: str) -> None:
            if code is not None:
                events.send_nowait({"event": "refused", "code": code, "detail": detail})

        try:
            self.router.inject(
                Message(
                    id=turn_id,
                    to=request.agent,
                    channel=channel,
                    body={"text": request.text, "interactive": request.interactive},
                    sent_at=time.time(),
                    from_=DAEMON_SENDER,
                    session=request.session,
                    kind="chat",
                ),
                Origin(channel),
                delivered,
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._from_client, exchange, turn, turn_id, events)
                reply = await self._to_client(exchange, turn, turn_id, incoming)
                nursery.cancel_scope.cancel()
            return reply
        finally:
            del self.turns[turn_id]
            for rid in turn.approvals:  # nobody will answer these now
                self.router.reply(turn.alias, Response(id=rid, ok=True, body={"approved": False}))

    async def _to_client(
        self,
        exchange: Exchange,
        turn: _Turn,
        turn_id: str,
        incoming: trio.MemoryReceiveChannel[dict[str, Any]],
    ) -> Reply:
        async for event in incoming:
            kind = event["event"]
            if kind == "done":
                data = {k: v for k, v in event.items() if k != "event"}
                return Reply(ok=True, data=data)
            if kind == "refused":
                return error_reply(event["code"], f"agent {turn.alias}: {event['detail']}")
            if kind == "down":
                return error_reply("unavailable", f"agent {turn.alias} exited during the turn")
            if kind == "gone":
                return error_reply("cancelled", "the client went away")
            if kind == "overflow":
                self._cancel(turn, turn_id)
                return error_reply(
                    "too_large", f"agent {turn.alias} sent over {MAX_BUFFERED_EVENTS} unread events"
                )
            await exchange.send(Reply(ok=True, more=True, data=event))
        raise AssertionError("the event channel never closes while a turn runs")

    async def _from_client(
        self,
        exchange: Exchange,
        turn: _Turn,
        turn_id: str,
        events: trio.MemorySendChannel[dict[str, Any]],
    ) -> None:
        cancelled = False
        async for message in exchange.inbox:
            if isinstance(message, ChatApproval) and turn.approvals:
                rid = turn.approvals.pop(0)
                self.router.reply(
                    turn.alias, Response(id=rid, ok=True, body={"approved": message.approved})
                )
            elif isinstance(message, ChatCancel) and not cancelled:
                cancelled = True
                self._cancel(turn, turn_id)
                await trio.sleep(CANCEL_GRACE_SECS)
                events.send_nowait({"event": "done", "reply": "", "cancelled": True})
                return
        # The client closed the connection: stop the agent's work and end the turn.
        self._cancel(turn, turn_id)
        events.send_nowait({"event": "gone"})

    def _cancel(self, turn: _Turn, turn_id: str) -> None:
        self.router.inject(
            Message(
                id=f"{turn_id}-cancel",
                to=turn.alias,
                channel="cli",
                body={"turn": turn_id},
                sent_at=time.time(),
                from_=DAEMON_SENDER,
                kind="cancel",
            ),
            Origin("cli"),
            lambda code, detail: None,
        )
