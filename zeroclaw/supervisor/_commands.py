"""The supervisor's control commands: status, agents, agent start/stop/restart, reload,
shutdown, recent and followed events, metrics, and the table's entries for chat. One class
per command, built with what it needs; the daemon's composition root puts each in the command table
(`control.CommandTable`, ADR 0017)."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ..control import (
    AgentRestart,
    AgentsList,
    AgentsReply,
    AgentStart,
    AgentStatus,
    AgentStop,
    ApprovalApprove,
    ApprovalDecision,
    ApprovalDeny,
    ApprovalInfo,
    ApprovalsList,
    ApprovalsReply,
    BudgetStatus,
    ChannelStatus,
    ChatApproval,
    ChatCancel,
    ChatOpen,
    ChatOpened,
    ControlStats,
    DiscoveryStatus,
    EventsFollow,
    EventsRecent,
    EventsReply,
    Exchange,
    McpStatus,
    Metrics,
    MetricsReply,
    NextFire,
    ProviderStatus,
    Reload,
    ReloadReply,
    Reply,
    SessionReply,
    SessionShow,
    SessionsList,
    SessionsReply,
    Shutdown,
    ShutdownReply,
    Status,
    StatusReply,
    control_code,
    error_reply,
)
from ..events import EventSink, Published, Subscription
from ..memory import MemoryService, MemoryServiceError, list_sessions, show_session
from ..ops import KIND_NAMES, EventFilter, unknown_kinds

if TYPE_CHECKING:
    from .. import ops
    from ..conversations import OperatorApprovals
    from ._chat import ChatService
    from ._fleet import Fleet
    from ._reload import ReloadState
    from ._reloader import Reloader

OPERATOR_WAIT_SECS = 30.0

log = logging.getLogger("zeroclaw.control")


class StatusCommand:
    def __init__(
        self,
        status: Callable[[], StatusReply],
        control_stats: Callable[[], ControlStats | None],
        channels: Callable[[], list[ChannelStatus]] = list,
        discovery: Callable[[], DiscoveryStatus | None] = lambda: None,
        approvals: OperatorApprovals | None = None,
        mcp: Callable[[], McpStatus | None] = lambda: None,
        providers: Callable[[], list[ProviderStatus]] = list,
        budgets: Callable[[], list[BudgetStatus]] = list,
        schedules: Callable[[], list[NextFire]] = list,
    ) -> None:
        self._status = status
        self._schedules = schedules
        self._mcp = mcp
        self._providers = providers
        self._budgets = budgets
        self._control_stats = control_stats
        self._channels = channels
        self._discovery = discovery
        self._approvals = approvals

    async def __call__(self, request: Status, exchange: Exchange) -> Reply[StatusReply]:
        status = self._status()
        return Reply(
            ok=True,
            data=msgspec.structs.replace(
                status,
                control=self._control_stats(),
                channels=self._channels(),
                discovery=self._discovery(),
                approvals=[] if self._approvals is None else approval_infos(self._approvals),
                mcp=self._mcp(),
                schedules=self._schedules(),
                providers=self._providers(),
                budgets=self._budgets(),
            ),
        )


class AgentsListCommand:
    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet

    async def __call__(self, request: AgentsList, exchange: Exchange) -> Reply[AgentsReply]:
        return Reply(ok=True, data=AgentsReply(self._fleet.agents()))


class ShutdownCommand:
    def __init__(self, stop: trio.Event) -> None:
        self._stop = stop  # the daemon's: set, it stops

    async def __call__(self, request: Shutdown, exchange: Exchange) -> Reply[ShutdownReply]:
        self._stop.set()
        return Reply(ok=True, data=ShutdownReply(stopping=True, pid=os.getpid()))


def reload_reply(state: ReloadState) -> Reply[ReloadReply]:
    data = ReloadReply(reload=state.state, errors=state.errors, diff=state.diff)
    if state.state == "ok":
        return Reply(ok=True, data=data)
    if state.state == "incomplete":
        return Reply(
            ok=False,
            data=data,
            error="timeout",
            message="the new config is applied, but some agents did not stop in time",
        )
    return Reply(
        ok=False,
        data=data,
        error="reload_failed",
        message="the new config was refused; kept the running one",
    )


class ReloadCommand:
    def __init__(self, reloader: Reloader) -> None:
        self._reloader = reloader

    async def __call__(self, request: Reload, exchange: Exchange) -> Reply[ReloadReply]:
        return reload_reply(await self._reloader.reload())


def agent_reply(alias: str, settled: bool, status: AgentStatus) -> Reply[AgentStatus]:
    """What an operator's start, stop or restart of `alias` came to."""
    if not settled:
        return Reply(
            ok=False, data=status, error="timeout", message=f"agent {alias} did not settle in time"
        )
    if status.state == "fatal":
        return Reply(
            ok=False,
            data=status,
            error="fatal",
            message=f"agent {alias} is fatal: {status.last_exit}",
        )
    return Reply(ok=True, data=status)


class _AgentCommand:
    def __init__(self, fleet: Fleet, wait_secs: float = OPERATOR_WAIT_SECS) -> None:
        self._fleet = fleet
        self._wait_secs = wait_secs

    async def _act(self, alias: str) -> bool:
        raise NotImplementedError

    async def _run(self, alias: str) -> Reply[AgentStatus]:
        runner = self._fleet.runners.get(alias)
        if runner is None:
            known = ", ".join(sorted(self._fleet.runners)) or "none"
            return error_reply("unknown_agent", f"no enabled agent {alias!r}; known: {known}")
        settled = await self._act(alias)
        return agent_reply(alias, settled, runner.status())


class AgentStartCommand(_AgentCommand):
    async def _act(self, alias: str) -> bool:
        return await self._fleet.start_agent(alias, self._wait_secs)

    async def __call__(self, request: AgentStart, exchange: Exchange) -> Reply[AgentStatus]:
        return await self._run(request.alias)


class AgentStopCommand(_AgentCommand):
    async def _act(self, alias: str) -> bool:
        return await self._fleet.stop_agent(alias, self._wait_secs)

    async def __call__(self, request: AgentStop, exchange: Exchange) -> Reply[AgentStatus]:
        return await self._run(request.alias)


class AgentRestartCommand(_AgentCommand):
    async def _act(self, alias: str) -> bool:
        return await self._fleet.restart_agent(alias, self._wait_secs)

    async def __call__(self, request: AgentRestart, exchange: Exchange) -> Reply[AgentStatus]:
        return await self._run(request.alias)


class EventsRecentCommand:
    """The newest events the daemon kept (its ring), oldest first."""

    def __init__(self, events: EventSink) -> None:
        self._events = events

    async def __call__(self, request: EventsRecent, exchange: Exchange) -> Reply[EventsReply]:
        return Reply(ok=True, data=EventsReply(self._events.recent(request.limit)))


# Development and test hook: how long a follower's socket may stay full (EventsFollowCommand).
EVENTS_SEND_SECS_ENV = "ZEROCLAW_EVENTS_SEND_SECS"


def events_send_secs(env: Mapping[str, str]) -> float:
    """EventsFollowCommand.SEND_SECS, or a positive finite number of seconds from the env."""
    raw = env.get(EVENTS_SEND_SECS_ENV)
    try:
        value = float(raw) if raw is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        if raw is not None:
            log.warning(
                "%s=%r is not a positive number of seconds; ignored", EVENTS_SEND_SECS_ENV, raw
            )
        return EventsFollowCommand.SEND_SECS
    return value


class SlowReader(Exception):
    """A follower did not keep up: `why` says how, for its last message and the log.
    `last_word`: whether a last message may follow; not after a send cut short by its
    deadline, which may have left part of a frame on the socket."""

    def __init__(self, why: str, *, last_word: bool = True) -> None:
        super().__init__(why)
        self.why = why
        self.last_word = last_word


class EventsFollowCommand:
    """`events [--follow]`: the matching events the ring kept, then each new one as it is
    published, as `more` replies (the way a chat turn streams) until the client goes away.

    The daemon is never held up by a follower (ADR 0030): publishing only appends to the
    follower's bounded subscription. A subscription that overflowed cuts the follower off with
    a last `slow_reader` error; a send that cannot complete within `send_secs` closes its
    connection at once (its socket is full: nothing more would get through). At most
    `max_followers` follow at once (`busy` beyond)."""

    MAX_FOLLOWERS = 32
    SEND_SECS = 3.0  # how long a follower's socket may stay full
    LAST_WORD_SECS = 1.0  # for the `slow_reader` error itself
    BUFFER = 1024  # events a follower may lag behind the sink
    BATCH = 256  # backlog events per reply: frames stay far below the frame limit

    def __init__(
        self,
        events: EventSink,
        *,
        max_followers: int = MAX_FOLLOWERS,
        send_secs: float | None = None,
        buffer: int = BUFFER,
    ) -> None:
        self._events = events
        self._max_followers = max_followers
        self._send_secs = send_secs if send_secs is not None else events_send_secs(os.environ)
        self._buffer = buffer
        self.followers = 0
        self.cut_off = 0

    async def __call__(self, request: EventsFollow, exchange: Exchange) -> Reply[EventsReply]:
        unknown = unknown_kinds(request.kinds)
        if unknown:
            return error_reply(
                "bad_request",
                f"unknown event kind {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(KIND_NAMES)}",
            )
        if request.backlog is not None and request.backlog < 0:
            return error_reply("bad_request", "backlog must be 0 or more")
        wanted = EventFilter.of(request.agents, request.kinds)
        if not request.follow:
            backlog = wanted.select(self._events.recent(), request.backlog)
            return await self._unless_slow(exchange, self._send_backlog(exchange, backlog))
        if self.followers >= self._max_followers:
            return error_reply(
                "busy", f"{self._max_followers} clients already follow the events; stop one"
            )
        self.followers += 1
        try:
            # Subscribed before the ring is read, with no checkpoint in between: nothing
            # published falls between the backlog and the live events, nothing comes twice.
            with self._events.subscribe(self._buffer) as live:
                backlog = wanted.select(self._events.recent(), request.backlog)
                return await self._unless_slow(
                    exchange, self._follow(exchange, wanted, backlog, live)
                )
        finally:
            self.followers -= 1

    async def _unless_slow(
        self, exchange: Exchange, stream: Awaitable[Reply[EventsReply]]
    ) -> Reply[EventsReply]:
        """`stream`'s reply; or, when the reader did not keep up, a last `slow_reader` error
        (when it may be sent and the socket takes it within a second), then the connection
        closed."""
        try:
            return await stream
        except SlowReader as slow:
            why, last_word = slow.why, slow.last_word
        self.cut_off += 1
        log.warning("events reader cut off: %s", why)
        if last_word:
            with trio.move_on_after(self.LAST_WORD_SECS):
                await exchange.send(error_reply("slow_reader", why))
        # The control server closes a connection whose client it cannot stream to, and
        # sends it nothing more: no reply that could wait on a full socket.
        raise trio.BrokenResourceError(why)

    async def _follow(
        self,
        exchange: Exchange,
        wanted: EventFilter,
        backlog: list[Published],
        live: Subscription,
    ) -> Reply[EventsReply]:
        slow: SlowReader | None = None
        async with trio.open_nursery() as nursery:

            async def until_client_leaves() -> None:
                async for _ in exchange.inbox:
                    pass  # nothing to answer while following; its end is the client's
                nursery.cancel_scope.cancel()

            nursery.start_soon(until_client_leaves)
            try:
                await self._send_backlog(exchange, backlog, more=True)
                async for item in live:
                    if live.lost:
                        raise SlowReader(f"this reader fell over {self._buffer} events behind")
                    if wanted.matches(item.event):
                        await self._send(exchange, [item], more=True)
            except SlowReader as exc:
                slow = exc  # raised out of the nursery, not inside an exception group
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the client went away while we streamed to it
            nursery.cancel_scope.cancel()
        if slow is not None:
            raise slow
        return error_reply("cancelled", "the client went away")

    async def _send_backlog(
        self, exchange: Exchange, backlog: list[Published], *, more: bool = False
    ) -> Reply[EventsReply]:
        """The backlog in batches; the last batch is the reply unless `more` follows."""
        batches = [backlog[i : i + self.BATCH] for i in range(0, len(backlog), self.BATCH)]
        final = [] if more or not batches else batches.pop()
        for batch in batches:
            await self._send(exchange, batch, more=True)
        return Reply(ok=True, data=EventsReply(final))

    async def _send(self, exchange: Exchange, items: list[Published], *, more: bool) -> None:
        with trio.move_on_after(self._send_secs) as deadline:
            await exchange.send(Reply(ok=True, more=more, data=EventsReply(items)))
        if deadline.cancelled_caught:
            raise SlowReader(
                f"this reader's socket stayed full for {self._send_secs:g}s", last_word=False
            )


class ChatOpenCommand:
    def __init__(self, chat: ChatService) -> None:
        self._chat = chat

    async def __call__(self, request: ChatOpen, exchange: Exchange) -> Reply[ChatOpened]:
        return self._chat.open_session(request)


class NoChatTurnCommand:
    """A cancel or an approval reaches the table only when no turn runs on its connection
    (a running turn reads them from its exchange's inbox)."""

    async def __call__(self, request: ChatCancel | ChatApproval, exchange: Exchange) -> Reply[Any]:
        return error_reply("bad_request", "no chat turn is running on this connection")


class MetricsCommand:
    """The daemon's metrics in the Prometheus text format, as `/metrics` serves them."""

    def __init__(self, metrics: ops.Metrics) -> None:
        self._metrics = metrics

    async def __call__(self, request: Metrics, exchange: Exchange) -> Reply[MetricsReply]:
        return Reply(ok=True, data=MetricsReply(self._metrics.render().decode()))


class SessionsListCommand:
    """Every stored session of every origin (ADR 0041): the operator reads them all.
    `known_agents` is asked at each request: a reload changes which agents there are."""

    def __init__(
        self, memory_service: MemoryService, known_agents: Callable[[], frozenset[str]]
    ) -> None:
        self._memory = memory_service
        self._known_agents = known_agents

    async def __call__(self, request: SessionsList, exchange: Exchange) -> Reply[SessionsReply]:
        try:
            listed = await list_sessions(self._memory, self._known_agents(), request.agent)
        except MemoryServiceError as exc:
            return error_reply(control_code(exc.code), exc.detail)
        return Reply(ok=True, data=listed)


class SessionShowCommand:
    """One session's transcript, whichever origin it belongs to."""

    def __init__(
        self, memory_service: MemoryService, known_agents: Callable[[], frozenset[str]]
    ) -> None:
        self._memory = memory_service
        self._known_agents = known_agents

    async def __call__(self, request: SessionShow, exchange: Exchange) -> Reply[SessionReply]:
        try:
            shown = await show_session(
                self._memory, self._known_agents(), request.agent, request.session, request.limit
            )
        except MemoryServiceError as exc:
            return error_reply(control_code(exc.code), exc.detail)
        return Reply(ok=True, data=shown)


def approval_infos(approvals: OperatorApprovals) -> list[ApprovalInfo]:
    return [
        ApprovalInfo(a.id, a.agent, a.channel, a.sender, a.what, round(approvals.remaining(a), 3))
        for a in approvals.pending()
    ]


class ApprovalsListCommand:
    def __init__(self, approvals: OperatorApprovals) -> None:
        self._approvals = approvals

    async def __call__(self, request: ApprovalsList, exchange: Exchange) -> Reply[ApprovalsReply]:
        return Reply(ok=True, data=ApprovalsReply(approval_infos(self._approvals)))


class _ApprovalDecideCommand:
    approved: bool

    def __init__(self, approvals: OperatorApprovals) -> None:
        self._approvals = approvals

    def _decide(self, approval_id: str) -> Reply[ApprovalDecision]:
        from ..conversations import Decided

        decided = self._approvals.decide(approval_id, self.approved)
        if not isinstance(decided, Decided):
            return error_reply(
                "unknown_approval",
                f"no pending approval {approval_id!r} (answered, expired, or never asked); "
                "see zeroclaw approvals list",
            )
        if decided.outcome == "timed_out":
            return error_reply(
                "unknown_approval", f"approval {approval_id!r} had timed out: it was denied"
            )
        return Reply(ok=True, data=ApprovalDecision(approval_id, decided.approved))


class ApprovalApproveCommand(_ApprovalDecideCommand):
    approved = True

    async def __call__(
        self, request: ApprovalApprove, exchange: Exchange
    ) -> Reply[ApprovalDecision]:
        return self._decide(request.id)


class ApprovalDenyCommand(_ApprovalDecideCommand):
    approved = False

    async def __call__(self, request: ApprovalDeny, exchange: Exchange) -> Reply[ApprovalDecision]:
        return self._decide(request.id)
