"""How a turn ends when the agent did not end it: the turn service's own terminal events.

An agent ends a turn with `TurnDone`; these end it otherwise. They never cross a process
boundary (a channel adapter maps each to its own reply), so they are not TurnEvents.
"""

from __future__ import annotations

import msgspec

from ..bus import RefusalCode
from ..turns import TurnDone, TurnEvent


class TurnRefused(msgspec.Struct, frozen=True):
    """The router refused the turn's message (or the agent is not an enabled one)."""

    code: RefusalCode
    detail: str


class AgentDown(msgspec.Struct, frozen=True):
    """The agent's process exited during the turn."""


class TurnOverflow(msgspec.Struct, frozen=True):
    """The agent sent more unread events than the service holds: the turn was cut off."""

    limit: int


class TurnCancelled(msgspec.Struct, frozen=True):
    """The turn was cancelled and the agent did not say it stopped within the grace."""


TurnOutcome = TurnRefused | AgentDown | TurnOverflow | TurnCancelled
ServiceEvent = TurnEvent | TurnOutcome  # what a turn's `events()` yields
TERMINAL = (TurnDone, TurnRefused, AgentDown, TurnOverflow, TurnCancelled)


def result_json(done: TurnDone) -> dict[str, object]:
    """A finished turn as `zeroclaw chat --json` prints it: reply and tool_calls always;
    error, cancelled, usage (each provider step: who answered, what it used) and stopped
    only when they say something (the control socket's ChatResult)."""
    data: dict[str, object] = {
        "reply": done.reply,
        "tool_calls": [msgspec.to_builtins(call) for call in done.tool_calls],
    }
    if done.error is not None:
        data["error"] = done.error
    if done.cancelled:
        data["cancelled"] = True
    if done.usage:
        data["usage"] = [msgspec.to_builtins(step) for step in done.usage]
    if done.stopped is not None:
        data["stopped"] = done.stopped
    return data
