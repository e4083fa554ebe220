"""One agent flooding a service with calls it does not wait to finish gets `busy` beyond
its share, at once: the router neither queues a task and a body per call without bound
(the daemon's memory) nor lets one sender hold every slot of a service (another agent's
call still runs)."""

from __future__ import annotations

from pathlib import Path

import trio
import zmq

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import EMPTY_BODY, AgentBus, BusCredentials, Request, Response, Router
from zeroclaw.bus._router import MAX_CALLS_PER_SENDER, SERVICE_CONCURRENCY
from zeroclaw.config import validate_document

PATIENCE = 60.0  # generous: every wait below ends on an event long before


class Held:
    """A service of the test's own whose calls wait until released."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.beta_running = trio.Event()
        self.running: dict[str, int] = {}

    async def __call__(self, sender: str, request: Request) -> Response:
        self.running[sender] = self.running.get(sender, 0) + 1
        if sender == "beta":
            self.beta_running.set()
        await self.release.wait()
        return Response(id=request.id, ok=True)


def _bus(router: Router, alias: str) -> AgentBus:
    keys = router.mint_keys(alias)
    return AgentBus(
        BusCredentials(alias, keys.endpoint, keys.server_public, keys.public, keys.secret, 1 << 20)
    )


async def test_a_sender_beyond_its_share_of_a_service_is_busy_and_others_still_run(
    tmp_path: Path,
) -> None:
    assert MAX_CALLS_PER_SENDER < SERVICE_CONCURRENCY
    config = validate_document(
        make_config(tmp_path, {"alpha": agent_entry(), "beta": agent_entry()})
    )
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    held = Held()
    router = Router(config, tmp_path, ctx, services={"held": held})
    flood = SERVICE_CONCURRENCY + 50
    answers: list[Response] = []
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            alpha, beta = _bus(router, "alpha"), _bus(router, "beta")
            await nursery.start(alpha.run)
            await nursery.start(beta.run)

            refused_all = trio.Event()

            async def call(bus: AgentBus) -> None:
                answers.append(await bus.request("held", "op", EMPTY_BODY, wait_secs=PATIENCE))
                if sum(a.error == "busy" for a in answers) == flood - MAX_CALLS_PER_SENDER:
                    refused_all.set()

            with trio.fail_after(PATIENCE):
                async with trio.open_nursery() as calls:
                    for _ in range(flood):
                        calls.start_soon(call, alpha)
                    await refused_all.wait()  # the excess answered at once, the rest held
                    calls.start_soon(call, beta)
                    await held.beta_running.wait()  # alpha does not hold every slot
                    held.release.set()
            nursery.cancel_scope.cancel()
    finally:
        ctx.term()
    busy = [a for a in answers if a.error == "busy"]
    assert len(busy) == flood - MAX_CALLS_PER_SENDER
    assert held.running == {"alpha": MAX_CALLS_PER_SENDER, "beta": 1}
    assert all(a.ok for a in answers if a.error != "busy")
