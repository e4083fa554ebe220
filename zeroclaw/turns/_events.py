"""The events of one conversation turn, shared by the agent (which emits them), the daemon
(which relays them) and the CLI (which prints them): one tagged union on `event`.

The JSON shape is the one `zeroclaw chat --json` has always printed.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ._usage import StepUsage

# Why a turn ended before its model said its last word (the daemon's budgets, ADR 0057).
TurnStop = Literal["budget_exceeded"]


class ToolCallRecord(msgspec.Struct, frozen=True):
    """One tool call of a turn, as the turn's result lists it."""

    name: str
    args: dict[str, object]
    ok: bool
    error_code: str | None = None


class _TurnEvent(msgspec.Struct, frozen=True, tag_field="event", omit_defaults=True):
    pass


class Delta(_TurnEvent, tag="delta", frozen=True):
    """More of the reply's text."""

    text: str


class ToolUsed(_TurnEvent, tag="tool", frozen=True):
    """A tool call finished (refusals included)."""

    name: str
    args: dict[str, object]
    ok: bool
    error_code: str | None = None


class ApprovalAsked(_TurnEvent, tag="approval", frozen=True):
    """A supervised action waits for the originating channel's yes or no."""

    what: str
    rid: str = ""
    # The agent denies the action when this passes without an answer: a channel stops
    # asking then, and a later yes counts for nothing.
    timeout_secs: float | None = None


class TurnDone(_TurnEvent, tag="done", frozen=True):
    """The turn ended: its reply, every tool call, the provider error if one ended it, what
    each provider step used and who answered it, and why it was stopped early if it was."""

    reply: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    error: str | None = None
    cancelled: bool = False
    # A sub-agent runtime's result, as submitted through `subagent_submit_result` (the
    # daemon validates it against the output schema). Never set by an agent's chat turn.
    result: dict[str, object] | None = None
    usage: tuple[StepUsage, ...] = ()
    stopped: TurnStop | None = None


TurnEvent = Delta | ToolUsed | ApprovalAsked | TurnDone
