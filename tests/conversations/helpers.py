"""A real router in the test process with the turn service on it, and agents on real buses.

An agent is either a real runtime (alpha's turn engine with the offline provider and a
real memory store, tests/agent/helpers.py) or a hand-built client holding an agent's keys,
which sends whatever a test wants the service to receive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
import zmq

from tests.agent.helpers import local_engine
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.agent._runtime import AgentInbox, AgentRuntime, BusReach
from zeroclaw.bus import (
    AgentBus,
    BusCredentials,
    Message,
    NoHooks,
    Request,
    Router,
    ServiceHandler,
)
from zeroclaw.config import validate_document
from zeroclaw.conversations import ServiceEvent, Turn, TurnService
from zeroclaw.providers import OfflineProvider
from zeroclaw.turns import TURN_SERVICE


@dataclass
class Bench:
    router: Router
    service: TurnService
    nursery: trio.Nursery
    joined: dict[str, trio.Event] = field(default_factory=dict)

    async def client(self, alias: str) -> tuple[AgentBus, trio.MemoryReceiveChannel[Message]]:
        """A bus client with `alias`'s keys; what is delivered to it comes out of the channel."""
        keys = self.router.mint_keys(alias)
        bus = AgentBus(
            BusCredentials(
                alias, keys.endpoint, keys.server_public, keys.public, keys.secret, 1 << 20
            )
        )
        inbox, messages = trio.open_memory_channel[Message](100)
        bus.on_message = inbox.send_nowait
        self.joined[alias] = trio.Event()
        await self.nursery.start(bus.run)
        await self.joined[alias].wait()
        return bus, messages

    async def agent(self, tmp_path: Path) -> AgentRuntime:
        """alpha as a real agent runtime: the turn engine behind a bus client."""
        bus, _ = await self.client("alpha")
        engine, _ = await self.nursery_enter(local_engine(OfflineProvider(), tmp_path))
        inbox = AgentInbox()  # this bus is already up: it hands over from now on
        bus.on_message, bus.on_late_refusal = inbox.message, inbox.late_refusal
        runtime = AgentRuntime(bus, engine, BusReach(bus), inbox)
        self.nursery.start_soon(runtime.run)
        return runtime

    async def nursery_enter(self, manager: Any) -> Any:
        """Enter an async context manager for the rest of the bench's life."""
        entered = trio.Event()
        value: list[Any] = []

        async def hold() -> None:
            async with manager as v:
                value.append(v)
                entered.set()
                await trio.sleep_forever()

        self.nursery.start_soon(hold)
        await entered.wait()
        return value[0]


class _BenchHooks(NoHooks):
    """The router's hooks as the daemon's composition root wires them, for the bench."""

    state: Bench

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        self.state.joined[alias].set()

    def agent_down(self, alias: str) -> None:
        self.state.service.agent_down(alias)

    def turn_request(self, sender: str, request: Request) -> None:
        self.state.service.on_request(sender, request)


@asynccontextmanager
async def bench(
    root: Path,
    *,
    groups: dict[str, Any] | None = None,
    confined_services: frozenset[str] = frozenset(),
    services: dict[str, ServiceHandler] | None = None,
    configure: Callable[[dict[str, Any]], None] | None = None,
    **service_options: Any,
) -> AsyncIterator[Bench]:
    """alpha and beta (both on cli.local), a running router, the turn service registered
    on it as the daemon's composition root registers it. `confined_services`: what a
    confined identity (a sub-agent runtime) may reach; `services`: more daemon services;
    `configure`: changes the config document before it is validated (channels, bindings)."""
    agents = {"alpha": agent_entry(), "beta": agent_entry(), "gamma": agent_entry()}
    doc = make_config(root, agents, groups=groups)
    if configure is not None:
        configure(doc)
    (root / "run").mkdir(parents=True, exist_ok=True)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    hooks = _BenchHooks()
    try:
        router = Router(
            validate_document(doc),
            root / "run",
            ctx,
            services={TURN_SERVICE: hooks.turn_request, **(services or {})},
            hooks=hooks,
            confined_services=confined_services,
        )
        service = TurnService(router, **service_options)
        async with trio.open_nursery() as nursery:
            state = hooks.state = Bench(router, service, nursery)
            await nursery.start(router.run)
            try:
                yield state
            finally:  # a failing test must not wait for the router forever
                nursery.cancel_scope.cancel()
    finally:
        ctx.term()


async def read_all(turn: Turn) -> list[ServiceEvent]:
    return [event async for event in turn.events()]
