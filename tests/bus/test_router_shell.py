"""The trio Router in one process: real sockets, real CURVE, real AgentBus clients; the
services and hooks it was built with, and the events it publishes."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing
import zmq

from tests.bodies import plain, raw
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import (
    EMPTY_BODY,
    AgentBus,
    BusCredentials,
    Message,
    Origin,
    PeerNote,
    Request,
    Response,
    Router,
)
from zeroclaw.config import validate_document
from zeroclaw.events import RouteRefused


class Recorder:
    """RouterHooks that remember what the router told them."""

    def __init__(self) -> None:
        self.hellos: list[str] = []
        self.downs: list[str] = []
        self.joined = trio.Event()

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        self.hellos.append(alias)
        self.joined.set()

    def request_start(self, alias: str) -> bool:
        return False

    def traffic(self, alias: str) -> None:
        return None

    def agent_down(self, alias: str) -> None:
        self.downs.append(alias)


async def echo(sender: str, request: Request) -> Response:
    await trio.lowlevel.checkpoint()
    return Response(id=request.id, ok=True, body=raw({"sender": sender, "op": request.op}))


@asynccontextmanager
async def running(tmp_path: Path) -> AsyncIterator[tuple[Router, AgentBus, Recorder]]:
    doc = make_config(
        tmp_path,
        {"alpha": agent_entry(), "beta": agent_entry()},
        groups={"g": {"channel": "cli", "agents": ["alpha", "beta"]}},
    )
    config = validate_document(doc)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    hooks = Recorder()
    router = Router(config, tmp_path, ctx, services={"echo": echo}, hooks=hooks)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            keys = router.mint_keys("alpha")
            bus = AgentBus(
                BusCredentials(
                    "alpha", keys.endpoint, keys.server_public, keys.public, keys.secret, 1 << 20
                )
            )
            await nursery.start(bus.run)
            await hooks.joined.wait()
            yield router, bus, hooks
            nursery.cancel_scope.cancel()
    finally:
        ctx.term()


async def test_a_service_given_at_construction_answers_the_authenticated_sender(
    tmp_path: Path,
) -> None:
    async with running(tmp_path) as (_router, bus, hooks):
        response = await bus.request("echo", "ping", EMPTY_BODY)
        assert response.ok and plain(response.body) == {"sender": "alpha", "op": "ping"}
        unknown = await bus.request("nope", "ping", EMPTY_BODY)
        assert unknown.error == "unknown_service"
        assert hooks.hellos == ["alpha"]


async def test_every_refusal_is_published_as_an_event(tmp_path: Path) -> None:
    async with running(tmp_path) as (router, bus, hooks):
        outcome = await bus.send("beta", "cli.local", PeerNote("hi"))  # beta is not running
        assert outcome.code == "unavailable"
        outcomes: list[str | None] = []
        router.inject(
            Message(
                id="c1", to="alpha", channel="webhook.x", body=EMPTY_BODY, sent_at=0.0, kind="chat"
            ),
            Origin("webhook.x"),
            lambda code, detail: outcomes.append(code),
        )
        assert outcomes == ["origin_not_allowed"]
        router.agent_down("alpha")
        assert hooks.downs == ["alpha"]
        refused = [p.event for p in router.events.recent() if isinstance(p.event, RouteRefused)]
        assert [(e.sender, e.to, e.code) for e in refused] == [
            ("alpha", "beta", "unavailable"),
            ("daemon", "alpha", "origin_not_allowed"),
        ]


async def test_an_idle_agent_sends_the_router_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """No heartbeat: the router only counted them, and 100 idle agents' every 5 s were half
    the idle CPU of a 1,100-agent daemon (ADR 0069). The runner's ping is the liveness."""
    async with running(tmp_path) as (router, bus, _hooks):
        sent: list[object] = []
        send_frame = bus.send_frame

        def recorded(frame: object) -> None:
            sent.append(frame)
            send_frame(frame)

        bus.send_frame = recorded  # type: ignore[method-assign]
        await trio.sleep(60)  # virtual: the clock jumps whenever every task waits
        assert sent == []
        assert router.core.counters["heartbeats"] == 0


class _TaskSteps(trio.abc.Instrument):
    """How often each task ran, by name."""

    def __init__(self) -> None:
        self.steps: Counter[str] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name] += 1


async def test_an_idle_router_does_not_wake_its_timeout_sweep(tmp_path: Path) -> None:
    """Nothing in flight, no refusal line held back: the sweep sleeps until something is
    (it used to wake four times a second). The delivery timeout itself is pinned through a
    real daemon (tests/bus/test_router.py::test_no_ack_ends_in_timeout)."""
    async with running(tmp_path) as (_router, bus, _hooks):
        response = await bus.request("echo", "ping", EMPTY_BODY)  # a round trip: then idle
        assert response.ok
        steps = _TaskSteps()
        trio.lowlevel.add_instrument(steps)
        try:
            await trio.sleep(1.0)  # idleness has no event: observed for a second
        finally:
            trio.lowlevel.remove_instrument(steps)
        assert not [name for name in steps.steps if name.endswith("_sweep_timeouts")], steps.steps
