"""Who may message whom: the peer-group policy the router and `route explain` share. Pure.

A → B on channel C is allowed only when some peer group on C (its bare type or its dotted
alias) lists both. External (non-agent) senders on C reach C's owners only when one of the
owners' groups on C accepts them (`external_peers`, `ignore`). Decisions are precomputed
into sets, so the router's check is a set lookup.

A conversation the daemon injects has an Origin (ADR 0018): the operator on a `cli` channel,
or an external sender on a channel the target owns and whose peer groups accept that sender.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..config import (
    HEARTBEAT_SCHEDULE,
    Config,
    channel_owners,
    channel_peers,
    normalize_peer_name,
    readonly_agents,
)
from ._grants import GroupGrant, OriginGrant, origin_grant
from ._origin import Origin

# Which rule refused an injected conversation's origin (counted per rule in the router's stats).
OriginRule = Literal[
    "operator_off_cli",  # the operator speaks only on a `cli` / `cli.*` channel
    "not_owner",  # the target neither binds the channel nor is its fallback owner
    "sender_ignored",  # the owner's groups on the channel `ignore` this sender
    "sender_not_accepted",  # no `external_peers` entry of the owner's groups accepts it
]


def is_cli_channel(channel: str) -> bool:
    return channel == "cli" or channel.startswith("cli.")


@dataclass(frozen=True, slots=True)
class RouteDecision:
    allowed: bool
    sender: str
    dest: str
    channel: str | None
    code: str | None  # refusal code when not allowed
    group: str | None  # the peer group that allows it
    reason: str

    def as_json(self) -> dict[str, object]:
        return {
            "allowed": self.allowed,
            "from": self.sender,
            "to": self.dest,
            "channel": self.channel,
            "code": self.code,
            "group": self.group,
            "reason": self.reason,
        }


class PeerPolicy:
    def __init__(self, config: Config) -> None:
        self.agents = frozenset(config.agents)
        self.enabled = frozenset(a for a, c in config.agents.items() if c.enabled)
        self.channels = tuple(config.channel_ids())
        self.bindings = {alias: tuple(c.channels) for alias, c in config.agents.items()}
        self.owners = channel_owners(config)
        # "<agent>.<schedule>" -> the tools its runs may use (issue 28; the heartbeat too)
        self.schedule_tools: dict[str, frozenset[str]] = {}
        for alias, agent in config.agents.items():
            for name, entry in agent.schedules.items():
                self.schedule_tools[f"{alias}.{name}"] = frozenset(entry.tools)
            if agent.heartbeat is not None:
                self.schedule_tools[f"{alias}.{HEARTBEAT_SCHEDULE}"] = frozenset(
                    agent.heartbeat.tools
                )
        self.delegates = {alias: frozenset(c.delegates) for alias, c in config.agents.items()}
        # Agents whose profile is readonly: they may ask, never delegate (ADR 0039).
        self.readonly = readonly_agents(config)
        # (sender, dest, channel) -> the first group (by name) that allows it
        self._allowed: dict[tuple[str, str, str], str] = {}
        self._peers = {}
        # (agent, channel) -> what each peer group on it that lists the agent grants the
        # outside senders it admits (ADR 0042)
        self._grants: dict[tuple[str, str], tuple[GroupGrant, ...]] = {}
        for alias in sorted(config.agents):
            for channel in self.channels:
                peers = channel_peers(config, alias, channel)
                self._peers[(alias, channel)] = peers
                self._grants[(alias, channel)] = tuple(
                    _group_grant(config, name, alias, channel) for name in peers.groups
                )
                for other in peers.agents:
                    group = next(g for g in peers.groups if other in config.peer_groups[g].agents)
                    self._allowed[(alias, other, channel)] = group

    def allowed(self, sender: str, dest: str, channel: str) -> bool:
        """The router's hot path."""
        return (sender, dest, channel) in self._allowed

    def decide(self, sender: str, dest: str, channel: str | None = None) -> RouteDecision:
        """The full decision with its reason. Without a channel: any channel that allows it."""
        for who in (sender, dest):
            if who not in self.agents:
                return RouteDecision(
                    False,
                    sender,
                    dest,
                    channel,
                    "unknown_agent",
                    None,
                    f"no agent {who!r} is configured",
                )
        if sender == dest:
            return RouteDecision(
                False, sender, dest, channel, "not_peers", None, "an agent does not message itself"
            )
        candidates = [channel] if channel is not None else list(self.channels)
        if channel is not None and channel not in self.channels:
            return RouteDecision(
                False,
                sender,
                dest,
                channel,
                "not_peers",
                None,
                f"channel {channel!r} is not configured",
            )
        for ch in candidates:
            group = self._allowed.get((sender, dest, ch))
            if group is not None:
                return RouteDecision(
                    True,
                    sender,
                    dest,
                    ch,
                    None,
                    group,
                    f"peer group {group!r} lists both on channel {ch!r}",
                )
        where = f"channel {channel!r}" if channel is not None else "any channel"
        mine = {g for ch in candidates for g in self._peers[(sender, ch)].groups}
        if not mine:
            reason = f"{sender!r} is in no peer group on {where}"
        else:
            reason = f"no peer group on {where} lists both {sender!r} and {dest!r}"
        return RouteDecision(False, sender, dest, channel, "not_peers", None, reason)

    def default_channel(self, sender: str, dest: str) -> str | None:
        """The channel a message from sender to dest travels on when none is named."""
        decision = self.decide(sender, dest)
        if decision.allowed:
            return decision.channel
        bound = self.bindings.get(sender, ())
        return bound[0] if bound else (self.channels[0] if self.channels else None)

    def external_accepted(self, channel: str, sender_name: str) -> tuple[str, ...]:
        """Owners of `channel` that accept input from the external sender `sender_name`."""
        return tuple(
            owner
            for owner in self.owners.get(channel, ())
            if self._peers[(owner, channel)].external.accepts(sender_name)
        )

    def origin_grant(self, dest: str, origin: Origin) -> OriginGrant:
        """Which tools a turn on `dest` from `origin` may use, and who answers its
        approvals (ADR 0042). An unknown channel or target grants an outside sender
        nothing."""
        if origin.kind == "schedule":
            assert origin.sender is not None
            return origin_grant(origin, schedule_tools=self.schedule_tools.get(origin.sender))
        return origin_grant(origin, self._grants.get((dest, origin.channel), ()))

    def origin_refusal(self, dest: str, origin: Origin) -> tuple[OriginRule, str] | None:
        """Why `dest` may not receive a conversation from `origin` (None: it may)."""
        channel = origin.channel
        if origin.kind == "schedule":
            # The daemon's own run: into the agent whose schedule it is, and no other.
            if origin.schedule_agent == dest:
                return None
            return "not_owner", f"schedule {origin.sender!r} is not agent {dest!r}'s"
        if origin.kind in ("peer", "subagent"):
            # Peers ask through the bus and invocations go to confined runtimes: neither
            # is injected into an agent's turn, so such an origin here is refused.
            return "not_owner", f"a {origin.kind} origin does not open an agent's turn"
        if origin.sender is None:
            if is_cli_channel(channel):
                return None
            return "operator_off_cli", f"the operator speaks on a cli channel, not {channel!r}"
        if dest not in self.owners.get(channel, ()):
            return "not_owner", f"agent {dest!r} does not own channel {channel!r}"
        external = self._peers[(dest, channel)].external
        if not external.accepts(origin.sender):
            name = normalize_peer_name(origin.sender)
            if not name or name in external.ignored:
                return "sender_ignored", f"{channel!r} ignores {origin.sender!r}"
            return (
                "sender_not_accepted",
                f"no peer group of {dest!r} on {channel!r} accepts {origin.sender!r}",
            )
        return None


def _group_grant(config: Config, name: str, alias: str, channel: str) -> GroupGrant:
    """One group's grant: its admission rule alone (its own `external_peers`/`ignore`),
    its tools and its approval route."""
    group = config.peer_groups[name]
    # channel_peers of a config holding only this group: the same admission rule,
    # spelled once (normalisation, '*', ignore).
    alone = config.model_copy(update={"peer_groups": {name: group}})
    external = channel_peers(alone, alias, channel).external
    return GroupGrant(name, external, frozenset(group.tools), group.approvals)
