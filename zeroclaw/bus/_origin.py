"""Where a conversation comes from: the router admits it by this, and the daemon names its
sessions inside it (`session_key`).

The daemon's own sender name is DAEMON_SENDER: every injected message is `from` it (no
agent can be called that: "daemon" is a reserved alias), and the origin says who is
behind it. Kinds (ORIGIN_KINDS; later issues add schedules and API tokens):

  operator  the local operator on a `cli` channel (control socket chat): no sender
  channel   an external sender on a webhook or serial channel: `<channel>:<sender>`,
            the sender normalised once (`normalize_sender`) for admission, rate and sessions
  peer      another agent asking this one (the router's authenticated alias)
  subagent  a sub-agent dispatch (channel "subagent"; the caller that dispatched it)
  schedule  a scheduled run (channel "schedule"; `<agent>.<name>`, the schedule's key):
            the daemon's own, into that agent only (issue 28)
  api       a gateway token (issue 29): channel `api.<token>`, its configured sender,
            admitted by peer groups like a channel sender; approvals always the operator's

`Origin(channel)` and `Origin(channel, sender)` still build the operator and a channel
sender; `channel`, `sender` and `is_operator` read as they always did.
"""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

from .._sender_names import normalize_sender

DAEMON_SENDER = "daemon"
PEER_CHANNEL = "peer"  # the channel key of a peer origin (no configured channel is named so)
SUBAGENT_ORIGIN_CHANNEL = "subagent"  # the channel a sub-agent invocation's turn travels on
SCHEDULE_CHANNEL = "schedule"  # the channel a scheduled run's turn travels on
RESERVED_CHANNELS = frozenset({PEER_CHANNEL, SUBAGENT_ORIGIN_CHANNEL, SCHEDULE_CHANNEL})
API_CHANNEL_PREFIX = "api."  # a gateway token's channel: `api.<token name>`

# Each kind has its rows in the conformance table (tests/conformance): a new kind without
# them fails test_completeness.
OriginKind = Literal["operator", "channel", "peer", "subagent", "schedule", "api"]
ORIGIN_KINDS: tuple[OriginKind, ...] = get_args(OriginKind)


class Origin(msgspec.Struct, frozen=True, omit_defaults=True):
    channel: str  # a channel key of the config: "cli", "cli.ops", "webhook.ops", "serial.bench"
    sender: str | None = None  # who on that channel (normalised); None: the operator
    # "operator" when left out: with a sender that means a channel sender (the two-argument
    # form), see __post_init__.
    kind: OriginKind = "operator"

    def __post_init__(self) -> None:
        kind = self.kind
        if kind == "operator" and self.sender is not None:
            kind = "channel"
            msgspec.structs.force_setattr(self, "kind", kind)
        if kind == "operator":
            return
        if self.sender is None:
            raise ValueError(f"a {kind} origin names who it is")
        # A token's channel is the token's alone: no other kind speaks on it.
        if (kind == "api") != self.channel.startswith(API_CHANNEL_PREFIX):
            raise ValueError(f"an {kind} origin is not on channel {self.channel!r}")
        if kind in ("channel", "api"):
            if self.channel in RESERVED_CHANNELS:
                raise ValueError(f"{self.channel!r} is not a channel a sender writes on")
            msgspec.structs.force_setattr(self, "sender", normalize_sender(self.sender))

    @classmethod
    def operator(cls, channel: str = "cli") -> Origin:
        return cls(channel)

    @classmethod
    def from_sender(cls, channel: str, sender: str) -> Origin:
        """An outside sender on `channel`: a gateway token's (`api.<token>`) or a channel's."""
        return cls(channel, sender, "api" if channel.startswith(API_CHANNEL_PREFIX) else "channel")

    @classmethod
    def peer(cls, alias: str) -> Origin:
        return cls(PEER_CHANNEL, alias, "peer")

    @classmethod
    def subagent(cls, caller: str) -> Origin:
        return cls(SUBAGENT_ORIGIN_CHANNEL, caller, "subagent")

    @classmethod
    def schedule(cls, agent: str, name: str) -> Origin:
        """A run of agent `agent`'s schedule `name`: who is `<agent>.<name>`."""
        return cls(SCHEDULE_CHANNEL, f"{agent}.{name}", "schedule")

    @property
    def schedule_agent(self) -> str | None:
        """The agent a schedule origin belongs to (None for any other kind)."""
        if self.kind != "schedule" or self.sender is None:
            return None
        return self.sender.partition(".")[0]

    @classmethod
    def api(cls, token: str, sender: str) -> Origin:
        """A gateway token's turn: channel `api.<token>`, the token's configured sender."""
        return cls(API_CHANNEL_PREFIX + token, sender, "api")

    @property
    def is_operator(self) -> bool:
        return self.kind == "operator"

    @property
    def is_outside(self) -> bool:
        """A sender from outside the host: a channel's or a gateway token's."""
        return self.kind in ("channel", "api")

    @property
    def who(self) -> str:
        """The origin in words: `operator`, `webhook.ops:ci-bot`, `peer:beta`, ..."""
        if self.sender is None:
            return "operator"
        return f"{self.channel}:{self.sender}"
