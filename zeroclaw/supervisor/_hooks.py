"""The daemon's one port (ADR 0018, 0050): the router's hooks and its service entries.

The router needs them when it is built; the fleet, the runtimes and the turn service behind
them need the router when they are built. So this port is built first, handed to the router,
and told once, right after, whom it speaks for: before the router runs, so no hook fires
unbound. It is the only late binding in the composition root.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass

from ..bus import Request as BusRequest
from ..bus import Response
from ..conversations import TurnService
from ..discovery import DiscoveryService
from ..pins import PinService
from ..subagents import DispatchService
from ..usage import UsageService
from ._fleet import Fleet
from ._lifecycle import State
from ._runner import AgentRunner, Command, ProcessReady, SandboxReport
from ._runtimes import Runtimes
from ._schedules import Schedules

log = logging.getLogger("zeroclaw.supervisor")


@dataclass(frozen=True)
class Behind:
    """Whom the port speaks for."""

    fleet: Fleet
    runtimes: Runtimes
    turns: TurnService
    dispatch: DispatchService
    discovery: DiscoveryService
    pins: PinService | None = None
    schedules: Schedules | None = None  # and the agents' reminders
    usage: UsageService | None = None


class DaemonHooks:
    """`bus.RouterHooks`, and the entries of the turn, sub-agent and adapter services."""

    def __init__(self) -> None:
        self._behind: Behind | None = None

    def bind(self, behind: Behind) -> None:
        assert self._behind is None, "the daemon's hooks are bound once"
        self._behind = behind

    @property
    def _to(self) -> Behind:
        assert self._behind is not None, "the daemon's hooks are bound before the router runs"
        return self._behind

    def _runner(self, alias: str) -> AgentRunner | None:
        to = self._to
        return to.fleet.runners.get(alias) or to.runtimes.runners.get(alias)

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        """An agent said hello on the bus: it is reachable, so it is running. With it comes
        its own account of its sandbox (what the agent claims: for the operator's eyes)."""
        runner = self._runner(alias)
        if runner is not None:
            if not sandbox_in_force:
                log.info(
                    "agent %s runs without an OS sandbox: %s",
                    alias,
                    sandbox or "it did not say why",
                    extra={"alias": alias, "pid": pid, "sandbox": sandbox},
                )
            runner.post(ProcessReady(pid, SandboxReport(sandbox, sandbox_in_force)))

    def request_start(self, alias: str) -> bool:
        """A message arrived for an on-demand agent that is not on the bus yet."""
        runner = self._runner(alias)
        if runner is None or runner.lifecycle.state == State.FATAL:
            return False
        if runner.lifecycle.state == State.STOPPED:
            runner.post(Command("start"))
        return True

    def traffic(self, alias: str) -> None:
        runner = self._runner(alias)
        if runner is not None:
            runner.note_traffic()

    def agent_down(self, alias: str) -> None:
        self._to.turns.agent_down(alias)
        if self._to.pins is not None:
            self._to.pins.agent_down(alias)  # its MCP servers were its children
        if self._to.usage is not None:
            self._to.usage.agent_down(alias)  # its breakers went with its process

    def turn_request(self, sender: str, request: BusRequest) -> None:
        self._to.turns.on_request(sender, request)

    def subagent_request(self, sender: str, request: BusRequest) -> Awaitable[Response]:
        return self._to.dispatch.serve(sender, request)

    def adapter_request(self, sender: str, request: BusRequest) -> Awaitable[Response]:
        return self._to.discovery.serve(sender, request)

    async def schedule_request(self, sender: str, request: BusRequest) -> Response:
        schedules = self._to.schedules
        if schedules is None:
            return Response(id=request.id, ok=False, error="unknown_service")
        return await schedules.serve(sender, request)
