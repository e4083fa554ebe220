"""A real router in the test process with the turn service on it, and agents on real buses.

An agent is either a real runtime (alpha's turn engine with the offline provider and a
real memory store, tests/agent/helpers.py) or a hand-built client holding an agent's keys,
which sends whatever a test wants the service to receive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
import zmq

from tests.agent.helpers import local_engine
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.agent._runtime import AgentRuntime, BusReach
from zeroclaw.bus import AgentBus, BusCredentials, Message, Router
from zeroclaw.config import validate_document
from zeroclaw.providers import OfflineProvider
from zeroclaw.turns import TURN_SERVICE, ServiceEvent, Turn, TurnService


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
        runtime = AgentRuntime(bus, engine, BusReach(bus))
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


@asynccontextmanager
async def bench(root: Path, **service_options: Any) -> AsyncIterator[Bench]:
    """alpha and beta (both on cli.local), a running router, the turn service registered
    on it as the daemon's composition root registers it."""
    doc = make_config(root, {"alpha": agent_entry(), "beta": agent_entry(), "gamma": agent_entry()})
    (root / "run").mkdir(parents=True, exist_ok=True)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        router = Router(validate_document(doc), root / "run", ctx)
        service = TurnService(router, **service_options)
        router.services[TURN_SERVICE] = service.on_request
        router.down_hooks.append(service.agent_down)
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            state = Bench(router, service, nursery)
            router.on_hello = lambda alias, pid: state.joined[alias].set()
            yield state
            nursery.cancel_scope.cancel()
    finally:
        ctx.term()


async def read_all(turn: Turn) -> list[ServiceEvent]:
    return [event async for event in turn.events()]
