"""Which tools a turn may use, and who answers its approvals, by its origin. Pure (ADR 0042).

The daemon decides this from the config alone when it opens a turn, and carries the tool
names to the agent in the turn message (`TurnInput.tools`); the agent's engine refuses
anything else as `tool_not_granted`, as it does for a peer's turn (ADR 0015).

    operator   every tool of the agent; approvals asked on its own channel (the CLI)
    subagent   a sub-agent invocation: the runtime's own tools, as before
    channel    an outside sender on a webhook/serial channel: the union of `tools` of the
               peer groups that admit it (default: none); approvals go to the operator's
               queue unless every admitting group says `sender`
    peer       another agent's ask or delegate: the callee's `peer_tools` (the agent
               decides that itself); injected as a turn it gets nothing
    schedule   a scheduled run: the `tools` of its schedule (default: none; an agent's own
               reminder: none); approvals go to the operator's queue (nobody is at a
               schedule to answer)
    api        a gateway token: as an outside sender on its channel `api.<token>`, but its
               approvals always go to the operator (the OpenAI API has no way to ask)

The kinds are the origin's own (`Origin.kind`, bus.ORIGIN_KINDS): one list for sessions,
tools and the conformance table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..config import ExternalPeerRule, normalize_peer_name
from ._origin import Origin, OriginKind

# Who answers a supervised approval: the channel that started the turn (the operator's
# CLI, or a sender its group trusts with it), or the daemon's operator queue.
ApprovalRoute = Literal["channel", "operator"]
GroupApprovals = Literal["operator", "sender"]


@dataclass(frozen=True, slots=True)
class GroupGrant:
    """What one peer group on a channel grants the outside senders it admits."""

    group: str
    external: ExternalPeerRule
    tools: frozenset[str]
    approvals: GroupApprovals


@dataclass(frozen=True, slots=True)
class OriginGrant:
    """`tools`: the tool names the turn may use; None: the agent's whole toolset (the
    operator's chat and a dispatch keep what they have). `groups`: the peer groups that
    admitted an outside sender (empty for other kinds)."""

    kind: OriginKind
    tools: frozenset[str] | None
    approvals: ApprovalRoute
    groups: tuple[str, ...] = ()

    def tool_names(self) -> tuple[str, ...] | None:
        """The tools as the turn message carries them (sorted, stable)."""
        return None if self.tools is None else tuple(sorted(self.tools))


NO_TOOLS: frozenset[str] = frozenset()


def sender_grant(groups: Iterable[GroupGrant], sender: str) -> OriginGrant:
    """An outside sender's grant from the groups of its channel and target: the groups
    whose `external_peers` admit it (an `ignore` in any of them refuses it everywhere, as
    admission does). Union of their tools: a group that names a sender grants it what
    that group lists, even when a wider `*` group grants nothing. Approvals go to the
    sender only when every admitting group says so: trusting a sender with its own
    approvals is the exception, one group's `operator` is enough to keep them."""
    candidates = tuple(groups)
    if any(_ignores(g, sender) for g in candidates):
        return OriginGrant("channel", NO_TOOLS, "operator")
    admitting = [g for g in candidates if g.external.accepts(sender)]
    if not admitting:
        return OriginGrant("channel", NO_TOOLS, "operator")
    tools = frozenset().union(*(g.tools for g in admitting))
    route: ApprovalRoute = (
        "channel" if all(g.approvals == "sender" for g in admitting) else "operator"
    )
    return OriginGrant("channel", tools, route, tuple(g.group for g in admitting))


def _ignores(group: GroupGrant, sender: str) -> bool:
    name = normalize_peer_name(sender)
    return not name or name in group.external.ignored


def origin_grant(
    origin: Origin,
    groups: Iterable[GroupGrant] = (),
    schedule_tools: frozenset[str] | None = None,
) -> OriginGrant:
    """The grant of a conversation the daemon injects with `origin`; `groups`: the peer
    groups on its channel that list its target (only read for an outside sender);
    `schedule_tools`: the tools the config gives the schedule of a schedule origin (None:
    it names none)."""
    kind = origin.kind
    if kind == "operator":
        return OriginGrant(kind, None, "channel")
    if kind == "subagent":
        # A sub-agent runtime has its own tools (no built-in ones) and never talks to a
        # user: nothing to narrow here.
        return OriginGrant(kind, None, "channel")
    if kind == "peer":  # a peer asks (the agent applies peer_tools); never a turn of ours
        return OriginGrant(kind, NO_TOOLS, "operator")
    if kind == "schedule":
        return OriginGrant(kind, schedule_tools or NO_TOOLS, "operator")
    assert origin.sender is not None  # a channel or api origin always names its sender
    grant = sender_grant(groups, origin.sender)
    if kind == "api":
        return OriginGrant(kind, grant.tools, "operator", grant.groups)
    return grant
