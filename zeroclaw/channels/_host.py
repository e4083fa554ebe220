"""The daemon's side of every channel adapter: an inbound message in, its outcome out.

`converse` routes the message (`route_inbound`), opens a turn on the target with the
message's origin through the turn service (the router checks that origin again; the turn
service grants the turn only the tools the sender's peer groups list, ADR 0042), collects
the reply, and has each approval answered, bounded by the approval timeout (a timeout, or
nobody to ask, is a denial): by the operator's queue, unless every peer group admitting the
sender says `approvals = "sender"`, then by the adapter's `ask` callback. Refusals are
logged and counted by the rule that decided them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import trio

from ..bus import Origin, PeerPolicy
from ..conversations import (
    AgentDown,
    OperatorApprovals,
    Turn,
    TurnCancelled,
    TurnOverflow,
    TurnRefused,
    TurnService,
)
from ..turns import ApprovalAsked, Delta, TurnDone
from ._routing import Routed, route_inbound
from ._types import (
    AskApproval,
    ChannelAnswer,
    ChannelFailure,
    ChannelRefused,
    GatewayHook,
    HookClaim,
    Inbound,
    OnDelta,
    Outcome,
)

log = logging.getLogger("zeroclaw.channels")

APPROVAL_TIMEOUT_SECS = 120.0


class ChannelHost:
    def __init__(
        self,
        turns: TurnService,
        policy: Callable[[], PeerPolicy],
        *,
        approval_timeout: float = APPROVAL_TIMEOUT_SECS,
        approvals: OperatorApprovals | None = None,
    ) -> None:
        self.turns = turns
        # The operator's queue; None: nobody answers an outside origin's approvals, so
        # they are denied (never asked of the sender instead).
        self.approvals = approvals
        self._policy = policy  # the running config's (a reload replaces it)
        self.approval_timeout = approval_timeout
        self.refused: Counter[tuple[str, str]] = Counter()  # (channel, the rule that decided)
        self.delivered: Counter[str] = Counter()  # by channel
        # Channels served through the gateway, by key (`telegram.<alias>` in webhook mode):
        # set by the channel while it serves, so the gateway answers only a live one.
        self.hooks: dict[str, GatewayHook] = {}
        self._claims: dict[str, HookClaim] = {}

    def hook_claim(self, key: str) -> HookClaim:
        """The claim on `key`'s registration with the outside service, shared by every
        adapter that serves that key (the old and the new one of a reload)."""
        return self._claims.setdefault(key, HookClaim())

    def route(self, inbound: Inbound) -> Routed | ChannelRefused:
        routed = route_inbound(self._policy(), inbound)
        if isinstance(routed, ChannelRefused):
            self.refused[(inbound.channel, routed.code)] += 1
            log.info(
                "refused a message on %s from %r: %s (%s)",
                inbound.channel,
                inbound.sender,
                routed.code,
                routed.detail,
                extra={"channel": inbound.channel, "sender": inbound.sender, "rule": routed.code},
            )
        return routed

    def preview(self, inbound: Inbound) -> Routed | ChannelRefused:
        """What `route` would decide, neither counted nor logged (an adapter choosing how
        to name a sender before it routes the message)."""
        return route_inbound(self._policy(), inbound)

    async def converse(
        self,
        inbound: Inbound,
        *,
        ask: AskApproval | None = None,
        routed: Routed | None = None,
        on_delta: OnDelta | None = None,
    ) -> Outcome:
        """The whole conversation of one inbound message: its reply or why there is none.
        `routed`: the decision of an earlier `route` of this message (an adapter that must
        answer a refusal before the turn runs), so it is not decided and counted twice.
        `on_delta`: handed each piece of the reply as it comes (a streaming adapter)."""
        if routed is None:
            decided = self.route(inbound)
            if isinstance(decided, ChannelRefused):
                return decided
            routed = decided
        self.delivered[inbound.channel] += 1
        return await self.run_turn(
            routed.agent,
            routed.origin,
            inbound.text,
            session=inbound.session,
            ask=ask,
            on_delta=on_delta,
        )

    async def run_turn(
        self,
        agent: str,
        origin: Origin,
        text: str,
        *,
        session: str | None,
        ask: AskApproval | None = None,
        on_delta: OnDelta | None = None,
        budget_origin: Origin | None = None,
    ) -> Outcome:
        """One turn of `agent` from `origin`, already admitted (routed here, or the
        daemon's own origin: a schedule's run), with its reply collected. Its approvals go
        where its grant says: the operator's queue, or `ask`; `on_delta` as `converse`'s;
        `budget_origin`: whose budgets it spends from, when not its origin's (a sender's
        reminder: its maker's)."""
        grant = self._policy().origin_grant(agent, origin)
        # An outside origin's approvals go to the operator unless its groups say "sender":
        # the sender's own approval path (a signed webhook approval, a serial answer line)
        # then finds nothing to answer.
        to_operator = grant.approvals == "operator"
        async with (
            self.turns.open_turn(
                agent,
                text,
                session=session,
                origin=origin,
                interactive=(self.approvals if to_operator else ask) is not None,
                budget_origin=budget_origin,
            ) as turn,
            trio.open_nursery() as nursery,
        ):
            asker = None if to_operator else ask
            outcome = await self._collect(turn, asker, to_operator, nursery, on_delta)
            nursery.cancel_scope.cancel()
        return outcome

    async def _collect(
        self,
        turn: Turn,
        ask: AskApproval | None,
        to_operator: bool,
        nursery: trio.Nursery,
        on_delta: OnDelta | None,
    ) -> Outcome:
        async for event in turn.events():
            if isinstance(event, Delta):
                if on_delta is not None:
                    await on_delta(event.text)
            elif isinstance(event, ApprovalAsked):
                nursery.start_soon(self._approve, turn, event, ask, to_operator)
            elif isinstance(event, TurnDone):
                return ChannelAnswer(
                    turn.agent,
                    event.reply,
                    event.tool_calls,
                    event.error,
                    event.cancelled,
                    event.stopped,
                    event.usage,
                )
            elif isinstance(event, TurnRefused):
                if event.code == "budget_exceeded":  # before any provider call
                    return ChannelFailure("budget_exceeded", event.detail)
                return ChannelFailure("refused", f"{event.code}: {event.detail}")
            elif isinstance(event, AgentDown):
                return ChannelFailure("unavailable", f"agent {turn.agent} exited during the turn")
            elif isinstance(event, TurnOverflow):
                return ChannelFailure("too_large", f"over {event.limit} unread events")
            elif isinstance(event, TurnCancelled):
                return ChannelFailure("cancelled", "the turn was cancelled")
        raise AssertionError("a turn's events end with a terminal event")

    async def _approve(
        self, turn: Turn, asked: ApprovalAsked, ask: AskApproval | None, to_operator: bool
    ) -> None:
        approved = False
        timeout = min(self.approval_timeout, asked.timeout_secs or self.approval_timeout)
        if to_operator:
            if self.approvals is not None:  # its own deadline: a timeout is a denial there
                approved = await self.approvals.ask(
                    turn.agent, turn.origin, asked.what, wait_secs=timeout
                )
        elif ask is not None:
            with trio.move_on_after(timeout):
                approved = await ask(asked.rid, asked.what)
        turn.answer_approval(asked.rid, approved)  # a late yes finds nothing to answer

    def counts(self, keys: tuple[str, ...]) -> tuple[int, dict[str, int]]:
        """Messages of these channels delivered to an agent, and refused by rule."""
        refused: Counter[str] = Counter()
        for (channel, rule), n in self.refused.items():
            if channel in keys:
                refused[rule] += n
        return sum(self.delivered[k] for k in keys), dict(refused)
