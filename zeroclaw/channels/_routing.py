"""Which agent an inbound message goes to, and whether its sender is admitted: decided from
the config alone (bindings, the owner fallback, `external_peers`/`ignore`), never from what
the sender says about itself. Pure: the router's policy in, a decision out."""

from __future__ import annotations

from dataclasses import dataclass

from ..bus import Origin, PeerPolicy
from ._types import ChannelRefused, Inbound


@dataclass(frozen=True)
class Routed:
    agent: str
    origin: Origin


def route_inbound(policy: PeerPolicy, inbound: Inbound) -> Routed | ChannelRefused:
    """The named agent if it binds the channel, else the channel's first owner (the owner
    fallback `config show` prints); then the owner's groups on the channel must accept the
    sender. Every refusal says which rule decided it."""
    channel = inbound.channel
    if channel not in policy.channels:
        return ChannelRefused("unknown_channel", f"no channel {channel!r} is configured")
    owners = policy.owners.get(channel, ())
    if inbound.agent is not None:
        if inbound.agent not in policy.enabled:
            return ChannelRefused("unknown_agent", f"no enabled agent {inbound.agent!r}")
        if inbound.agent not in owners:
            detail = f"agent {inbound.agent!r} does not own channel {channel!r}"
            return ChannelRefused("agent_not_bound", detail)
        target = inbound.agent
    elif owners:
        target = owners[0]
    else:
        return ChannelRefused("no_owner", f"no agent owns channel {channel!r}")
    origin = Origin.from_sender(channel, inbound.sender)  # the sender normalised, once
    refused = policy.origin_refusal(target, origin)
    if refused is not None:
        rule, detail = refused
        if rule in ("sender_ignored", "sender_not_accepted"):
            return ChannelRefused(rule, detail)
        return ChannelRefused("agent_not_bound", detail)  # not_owner: covered above
    return Routed(target, origin)
