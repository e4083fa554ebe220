"""The supervisor's control commands: status, agents, agent start/stop/restart, reload,
shutdown, recent events, metrics, and the table's entries for chat. One class per command, built
with what it needs; the daemon's composition root puts each in the command table
(`control.CommandTable`, ADR 0017)."""

from __future__ import annotations

import os
from collections.abc import Callable
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
    ChannelStatus,
    ChatApproval,
    ChatCancel,
    ChatOpen,
    ChatOpened,
    ControlStats,
    EventsRecent,
    EventsReply,
    Exchange,
    Metrics,
    MetricsReply,
    Reload,
    ReloadReply,
    Reply,
    Shutdown,
    ShutdownReply,
    Status,
    StatusReply,
    error_reply,
)
from ..events import EventSink

if TYPE_CHECKING:
    from .. import ops
    from ._chat import ChatService
    from ._supervisor import ReloadState, Supervisor

OPERATOR_WAIT_SECS = 30.0


class StatusCommand:
    def __init__(
        self,
        supervisor: Supervisor,
        control_stats: Callable[[], ControlStats | None],
        channels: Callable[[], list[ChannelStatus]] = list,
    ) -> None:
        self._supervisor = supervisor
        self._control_stats = control_stats
        self._channels = channels

    async def __call__(self, request: Status, exchange: Exchange) -> Reply[StatusReply]:
        status = self._supervisor.status()
        return Reply(
            ok=True,
            data=msgspec.structs.replace(
                status, control=self._control_stats(), channels=self._channels()
            ),
        )


class AgentsListCommand:
    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor

    async def __call__(self, request: AgentsList, exchange: Exchange) -> Reply[AgentsReply]:
        return Reply(ok=True, data=AgentsReply(self._supervisor.agents()))


class ShutdownCommand:
    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor

    async def __call__(self, request: Shutdown, exchange: Exchange) -> Reply[ShutdownReply]:
        self._supervisor.shutdown_requested.set()
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
    def __init__(self, supervisor: Supervisor, nursery: trio.Nursery) -> None:
        self._supervisor = supervisor
        self._nursery = nursery  # where the agents a reload adds run

    async def __call__(self, request: Reload, exchange: Exchange) -> Reply[ReloadReply]:
        return reload_reply(await self._supervisor.reload(self._nursery))


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
    def __init__(self, supervisor: Supervisor, wait_secs: float = OPERATOR_WAIT_SECS) -> None:
        self._supervisor = supervisor
        self._wait_secs = wait_secs

    async def _act(self, alias: str) -> bool:
        raise NotImplementedError

    async def _run(self, alias: str) -> Reply[AgentStatus]:
        supervisor = self._supervisor
        runner = supervisor.runner(alias)
        if runner is None:
            known = ", ".join(sorted(supervisor.runners)) or "none"
            return error_reply("unknown_agent", f"no enabled agent {alias!r}; known: {known}")
        settled = await self._act(alias)
        return agent_reply(alias, settled, runner.status())


class AgentStartCommand(_AgentCommand):
    async def _act(self, alias: str) -> bool:
        return await self._supervisor.start_agent(alias, self._wait_secs)

    async def __call__(self, request: AgentStart, exchange: Exchange) -> Reply[AgentStatus]:
        return await self._run(request.alias)


class AgentStopCommand(_AgentCommand):
    async def _act(self, alias: str) -> bool:
        return await self._supervisor.stop_agent(alias, self._wait_secs)

    async def __call__(self, request: AgentStop, exchange: Exchange) -> Reply[AgentStatus]:
        return await self._run(request.alias)


class AgentRestartCommand(_AgentCommand):
    async def _act(self, alias: str) -> bool:
        return await self._supervisor.restart_agent(alias, self._wait_secs)

    async def __call__(self, request: AgentRestart, exchange: Exchange) -> Reply[AgentStatus]:
        return await self._run(request.alias)


class EventsRecentCommand:
    """The newest events the daemon kept (its ring), oldest first."""

    def __init__(self, events: EventSink) -> None:
        self._events = events

    async def __call__(self, request: EventsRecent, exchange: Exchange) -> Reply[EventsReply]:
        return Reply(ok=True, data=EventsReply(self._events.recent(request.limit)))


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
