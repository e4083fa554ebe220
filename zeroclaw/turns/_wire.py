"""What the daemon and an agent say to each other about a turn, as typed bus bodies.

Daemon -> agent (message bodies): `TurnInput` (kind "chat"), `TurnCancel` (kind "cancel").
Agent -> daemon (requests to the `TURN_SERVICE` service): `TurnEventPost` (op "event", no
answer) and `ApprovalQuestion` (op "approve", answered with an `ApprovalAnswer` body).
Each side decodes with msgspec; a body that does not decode is dropped and counted.
"""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

from .._ops import Nothing, Operation
from ._events import Delta, ToolUsed, TurnDone

TURN_SERVICE = "chat"  # the daemon service name an agent posts its turn's events to
TurnOp = Literal["event", "approve"]
# How the turn service refuses an approval question.
TurnServiceErrorCode = Literal["bad_request", "unknown_turn"]
TURN_SERVICE_ERROR_CODES: tuple[str, ...] = get_args(TurnServiceErrorCode)

# What an agent may post as a turn's event: an approval is a question (it needs an
# answer), never a plain event, so it cannot be posted as one.
AgentTurnEvent = Delta | ToolUsed | TurnDone


class TurnInput(msgspec.Struct, frozen=True):
    """The body of a "chat" message: what the turn is about."""

    text: str
    interactive: bool = False  # someone on the originating channel answers approvals
    # A sub-agent invocation's structured input (JSON), validated by the daemon against the
    # sub-agent's input schema; untrusted data for the runtime. None for a chat turn.
    input: object = None  # a JSON value
    # The tools this turn may use, decided by the daemon from the turn's origin (ADR
    # 0042): None, the agent's whole toolset (the operator, a dispatch); otherwise only
    # these names, anything else refused as `tool_not_granted`.
    tools: tuple[str, ...] | None = None
    # The turn's context from memory follows this message (ADR 0068): the daemon reads it
    # once the message is on its way and sends it as a Response with the id
    # `context_id(<this message's id>)`, a `PrefetchedContext` (not ok: the agent asks
    # memory itself, as it does when this is False and for a peer's question).
    context_follows: bool = False
    # Whether a budget applies to this turn (ADR 0057): when none does, the agent posts
    # each step's usage instead of waiting for a verdict that can only say "go on"
    # (ADR 0068; a budget a reload adds mid-turn still ends it from the daemon's side).
    budgeted: bool = True


def context_id(turn: str) -> str:
    """The id of the Response that carries a chat turn's context (ADR 0068). Never an
    agent's own request id (those hold no "/")."""
    return f"{turn}/context"


class TurnCancel(msgspec.Struct, frozen=True):
    """The body of a "cancel" message: stop that turn's work."""

    turn: str


class TurnEventPost(msgspec.Struct, frozen=True):
    turn: str
    event: AgentTurnEvent


class ApprovalQuestion(msgspec.Struct, frozen=True):
    turn: str
    what: str
    timeout_secs: float | None = None  # the agent stops waiting then (and denies)


class ApprovalAnswer(msgspec.Struct, frozen=True):
    approved: bool


# The turn service's operations (op "event" is posted: nobody answers it).
TURN_EVENT = Operation(TURN_SERVICE, "event", TurnEventPost, Nothing)
TURN_APPROVE = Operation(
    TURN_SERVICE, "approve", ApprovalQuestion, ApprovalAnswer, TURN_SERVICE_ERROR_CODES
)
TURN_OPERATIONS = (TURN_EVENT, TURN_APPROVE)
