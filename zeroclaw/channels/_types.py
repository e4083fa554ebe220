"""What crosses between a channel adapter and the daemon: an inbound message, and how its
conversation ended. Typed values; the adapters map them to their wire (HTTP, a line)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import msgspec
import trio

from ..turns import StepUsage, ToolCallRecord, TurnStop

# What a chat channel (Telegram, Matrix) answers a message whose turn a restart cut short
# (of the daemon, or of the channel: a reload, a lost homeserver): the message was taken,
# its reply is lost, and running the turn again could repeat what it had done (a write, a
# peer's question), so the sender decides.
RESTARTED = "The bot restarted before it finished answering this message; please send it again."

# The Retry-After of a turn a budget refused (webhook 429, gateway 429): budgets are per
# hour and per day, so a minute is the shortest wait that may find room again.
BUDGET_RETRY_SECS = 60


class Inbound(msgspec.Struct, frozen=True):
    """A message a channel received. `sender` is the external sender's id on that channel
    (the adapter's word for who sent it: a signed webhook field, `serial:<alias>`); the
    daemon decides the target and admits the sender from the config alone."""

    channel: str  # the channel key, "webhook.ops"
    sender: str
    text: str
    session: str | None = None
    agent: str | None = None  # a target the sender asks for; honoured only if it binds


# Why an inbound message reached no agent (stable: the README's error table lists them).
ChannelRefusalCode = Literal[
    "unknown_channel",  # no such channel in the config
    "unknown_agent",  # the named agent is not an enabled agent
    "agent_not_bound",  # the named agent does not bind this channel
    "no_owner",  # nobody owns the channel (bindings exist, none for it)
    "sender_ignored",  # the owner's groups on the channel `ignore` this sender
    "sender_not_accepted",  # no `external_peers` entry of the owner's groups accepts it
]


class ChannelRefused(msgspec.Struct, frozen=True):
    """The daemon refused the message before any agent saw it."""

    code: ChannelRefusalCode
    detail: str


class ChannelAnswer(msgspec.Struct, frozen=True):
    """The agent's reply to an inbound message."""

    agent: str
    reply: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    error: str | None = None  # the provider failed; `reply` says so
    cancelled: bool = False
    stopped: TurnStop | None = None  # a budget ended the turn after a step (ADR 0057)
    usage: tuple[StepUsage, ...] = ()  # what each provider step used (the gateway's usage)


ChannelFailureCode = Literal[
    "unavailable",
    "timeout",
    "too_large",
    "cancelled",
    "refused",
    "budget_exceeded",  # a budget of the agent or of the sender refused the turn (ADR 0057)
]


class ChannelFailure(msgspec.Struct, frozen=True):
    """The message was admitted but its turn did not end with a reply."""

    code: ChannelFailureCode
    detail: str


Outcome = ChannelAnswer | ChannelRefused | ChannelFailure


class Scheduled(msgspec.Struct, frozen=True):
    """A scheduled run's outcome going out on a channel the agent binds (issue 28): the
    schedule (`<agent>.<name>`) and the run (the same id after a restart, so a receiver
    may drop a repeat)."""

    schedule: str
    run_id: str
    outcome: Outcome


# How an adapter asks its sender to approve a supervised action: (approval id, what) ->
# yes or no. The daemon bounds it by the approval timeout (a timeout is a no); None: this
# channel cannot ask, so the action is denied.
AskApproval = Callable[[str, str], Awaitable[bool]]

# What an adapter that streams (the gateway) is handed for each piece of the reply as the
# agent produces it; awaited before the next event is read.
OnDelta = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class GatewayHook:
    """A channel whose updates arrive on the gateway (`POST /telegram/<alias>`): the
    secret each request must carry, and where a request's body goes once it does. The
    channel sets it on the host while it serves; `deliver` answers the HTTP status."""

    secret: bytes = field(repr=False)
    deliver: Callable[[bytes], Awaitable[int]]


class HookClaim:
    """Who registered a gateway hook's key with the outside service last (Telegram's
    setWebhook), and the lock its register and unregister calls take. A reload starts the
    new adapter while the old one stops: without it, the old one's unregister could land
    after the new one's register and leave the new one deaf (attack pass, ADR 0065)."""

    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.owner: object | None = None
