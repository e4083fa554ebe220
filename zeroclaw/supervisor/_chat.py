"""CLI chat: the control socket's adapter over the turn service.

The CLI is one origin among the channels: its turns enter through the same `TurnService`
as a webhook's or a serial line's, with `Origin.operator(<the agent's cli channel>)` (the
local operator: no sender); a session name that is not the operator's (it holds ':') is
refused before the turn opens. This module only maps between control requests and replies
and a turn: events stream to the client as `more` replies, its ChatApproval answers the
oldest pending approval, its ChatCancel cancels the turn, and its going away ends the turn.
"""

from __future__ import annotations

import msgspec
import trio

from ..bus import Origin, SessionNameRefused, session_key
from ..control import Chat, ChatApproval, ChatCancel, ChatOpen, Reply, error_reply
from ..conversations import (
    AgentDown,
    Turn,
    TurnCancelled,
    TurnOverflow,
    TurnRefused,
    TurnService,
    result_json,
)
from ..turns import ApprovalAsked, TurnDone
from ._control_server import Exchange

# How long the final reply waits for the client's answers to approvals it was shown and has
# not answered yet (the agent timed them out first): the client always answers each one, and
# an answer arriving after the turn would be taken for a request of its own.
LATE_ANSWER_GRACE_SECS = 5.0


class _Answers:
    """Approvals the client was shown, and its answers to them."""

    def __init__(self) -> None:
        self.asked = 0
        self.answered = 0
        self.caught_up = trio.Event()

    def shown(self) -> None:
        self.asked += 1

    def answer(self) -> None:
        self.answered += 1
        if self.answered >= self.asked:
            self.caught_up.set()

    async def wait(self) -> None:
        if self.answered < self.asked:
            self.caught_up = trio.Event()
            with trio.move_on_after(LATE_ANSWER_GRACE_SECS):
                await self.caught_up.wait()


def cli_channel(channels: tuple[str, ...]) -> str:
    """The agent's CLI channel: the first `cli.*` it binds, else the bare type."""
    return next((c for c in channels if c == "cli" or c.startswith("cli.")), "cli")


class ChatService:
    def __init__(self, turns: TurnService) -> None:
        self.turns = turns

    def _unknown(self, agent: str) -> Reply | None:
        refusal = self.turns.check_agent(agent)
        return None if refusal is None else error_reply(refusal.code, refusal.detail)

    def open_session(self, request: ChatOpen) -> Reply:
        """An interactive session begins (the control server stops timing it out)."""
        return self._unknown(request.agent) or Reply(ok=True, data={"agent": request.agent})

    async def run_turn(self, request: Chat, exchange: Exchange) -> Reply:
        if (refusal := self._unknown(request.agent)) is not None:
            return refusal
        origin = Origin.operator(cli_channel(self.turns.channels_of(request.agent)))
        try:
            session_key(origin, request.session)
        except SessionNameRefused as exc:
            return error_reply("bad_request", str(exc))
        reply: Reply | None = None
        async with (
            self.turns.open_turn(
                request.agent,
                request.text,
                session=request.session,
                origin=origin,
                interactive=request.interactive,
            ) as turn,
            trio.open_nursery() as nursery,
        ):
            answers = _Answers()

            async def from_client() -> None:
                await _from_client(exchange, turn, answers)
                nursery.cancel_scope.cancel()  # the client went away

            nursery.start_soon(from_client)
            reply = await _to_client(exchange, turn, answers)
            await answers.wait()
            nursery.cancel_scope.cancel()
        # Leaving the turn without its end cancelled the agent's work.
        return reply or error_reply("cancelled", "the client went away")


async def _to_client(exchange: Exchange, turn: Turn, answers: _Answers) -> Reply:
    alias = turn.agent
    async for event in turn.events():
        if isinstance(event, TurnDone):
            return Reply(ok=True, data=result_json(event))
        if isinstance(event, TurnCancelled):
            return Reply(ok=True, data=result_json(TurnDone("", cancelled=True)))
        if isinstance(event, TurnRefused):
            return error_reply(event.code, f"agent {alias}: {event.detail}")
        if isinstance(event, AgentDown):
            return error_reply("unavailable", f"agent {alias} exited during the turn")
        if isinstance(event, TurnOverflow):
            return error_reply("too_large", f"agent {alias} sent over {event.limit} unread events")
        await exchange.send(Reply(ok=True, more=True, data=msgspec.to_builtins(event)))
        if isinstance(event, ApprovalAsked):
            answers.shown()
    raise AssertionError("a turn's events end with a terminal event")


async def _from_client(exchange: Exchange, turn: Turn, answers: _Answers) -> None:
    """The client's approvals and cancel, until it closes the connection."""
    async for message in exchange.inbox:
        if isinstance(message, ChatApproval):
            answers.answer()
            if turn.pending_approvals:
                turn.answer_approval(turn.pending_approvals[0], message.approved)
        elif isinstance(message, ChatCancel):
            turn.cancel()
