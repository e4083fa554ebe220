"""The MCP pin service through a real router, in-process, with real agent bus clients: an
honest agent's listings pinned, changed, trusted; a hostile agent's (another agent's
server, a flood of tools, bodies that are not listings) refused with a code, the book
untouched and the service serving on. The caller is the router's identity, never a body
field."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import zmq

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw._ops import CallRefused, Nothing
from zeroclaw.bus import AgentBus, BusCredentials, Router
from zeroclaw.config import Config, validate_document
from zeroclaw.events import EventSink, McpSchemaChanged, McpServerChanged, McpToolTrusted
from zeroclaw.pins import PinService, PinStore, PinsUnavailable, pins_path
from zeroclaw.turns import (
    MCP_PIN,
    MCP_SERVICE,
    MCP_STATE,
    McpPinAnswer,
    McpPinCall,
    McpServerState,
    McpToolSeen,
    tool_digest,
)


def tool(name: str, description: str = "", read_only: bool = False) -> McpToolSeen:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return McpToolSeen(name, tool_digest(name, description, schema), read_only, description)


def mcp_config(tmp_path: Path) -> Config:
    doc = make_config(
        tmp_path,
        {
            "alpha": agent_entry(mcp=["git"]),
            "mallory": agent_entry(mcp=["time"]),
        },
    )
    doc["mcp_servers"] = {
        "git": {"command": "mcp-server-git", "tools": ["status", "log"]},
        "time": {"command": "mcp-server-time", "tools": ["now"]},
    }
    return validate_document(doc)


class World:
    def __init__(self, router: Router, pins: PinService, events: EventSink) -> None:
        self.router = router
        self.pins = pins
        self.events = events
        self.buses: dict[str, AgentBus] = {}


@asynccontextmanager
async def world(tmp_path: Path, store: PinStore | None = None) -> AsyncIterator[World]:
    config = mcp_config(tmp_path)
    events = EventSink()
    pins = PinService(store or PinStore(pins_path(tmp_path / "state")), lambda: config, events)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = Router(config, tmp_path, ctx, services={MCP_SERVICE: pins.serve})
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            w = World(router, pins, events)
            for alias in ("alpha", "mallory"):
                keys = router.mint_keys(alias)
                bus = AgentBus(
                    BusCredentials(
                        alias, keys.endpoint, keys.server_public, keys.public, keys.secret, 1 << 22
                    )
                )
                await nursery.start(bus.run)
                w.buses[alias] = bus
            yield w
            nursery.cancel_scope.cancel()
    finally:
        ctx.term()


async def pin(bus: AgentBus, server: str, *tools: McpToolSeen) -> McpPinAnswer:
    return await bus.call(MCP_PIN, McpPinCall(server, tools))


def kinds(events: EventSink) -> list[Any]:
    return [p.event for p in events.recent()]


async def test_listings_are_pinned_changed_withheld_and_trusted(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        alpha = w.buses["alpha"]
        first = await pin(alpha, "git", tool("status"), tool("log"), tool("commit"))
        # `commit` is pinned but not in the allowlist: never offered.
        assert (first.offered, first.withheld) == (("status", "log"), ())
        assert {t.tool for t in w.pins.tools()} == {"status", "log", "commit"}
        changed = await pin(alpha, "git", tool("status", "now it also pushes"), tool("log"))
        assert (changed.offered, changed.withheld) == (("log",), ("status",))
        again = await pin(alpha, "git", tool("status", "now it also pushes"), tool("log"))
        assert again.withheld == ("status",)
        schema_events = [e for e in kinds(w.events) if isinstance(e, McpSchemaChanged)]
        assert [(e.agent, e.server, e.tool) for e in schema_events] == [("alpha", "git", "status")]
        trusted = await w.pins.trust("git", tool="status")
        assert [(t.agent, t.tool, t.state) for t in trusted.trusted] == [
            ("alpha", "status", "trusted")
        ]
        assert [e.tool for e in kinds(w.events) if isinstance(e, McpToolTrusted)] == ["status"]
        after = await pin(alpha, "git", tool("status", "now it also pushes"), tool("log"))
        assert (after.offered, after.withheld) == (("status", "log"), ())
    # On disk, as the service left it: a new service (a restarted daemon) agrees.
    reloaded = PinStore(pins_path(tmp_path / "state")).load()
    assert {k.tool: p.withheld for k, p in reloaded.items()} == {
        "commit": False,
        "log": False,
        "status": False,
    }


async def test_a_server_state_is_kept_for_mcp_list_and_its_changes_published(
    tmp_path: Path,
) -> None:
    async with world(tmp_path) as w:
        alpha = w.buses["alpha"]
        for status in ("starting", "ready", "ready"):
            assert await alpha.call(MCP_STATE, McpServerState("git", status, pid=42)) == Nothing()
        await alpha.call(MCP_STATE, McpServerState("git", "restarting", "x" * 5000, restarts=1))
        changes = [e for e in kinds(w.events) if isinstance(e, McpServerChanged)]
        assert [e.status for e in changes] == ["starting", "ready", "restarting"]
        git = next(s for s in w.pins.servers() if s.name == "git")
        assert git.agents == ("alpha",)
        assert [(s.agent, s.status, s.restarts, len(s.detail)) for s in git.live] == [
            ("alpha", "restarting", 1, 500)
        ]


async def test_a_state_told_after_a_later_one_is_stale(tmp_path: Path) -> None:
    # The daemon answers each post in a task of its own: a 'failed' and the 'starting'
    # before it, posted back to back, may be applied in either order; the stamp decides.
    async with world(tmp_path) as w:
        alpha = w.buses["alpha"]
        await alpha.call(MCP_STATE, McpServerState("git", "failed", "gave up", 4, at_ns=200))
        await alpha.call(MCP_STATE, McpServerState("git", "starting", restarts=4, at_ns=100))
        git = next(s for s in w.pins.servers() if s.name == "git")
        assert [(s.status, s.restarts) for s in git.live] == [("failed", 4)]
        changes = [e.status for e in kinds(w.events) if isinstance(e, McpServerChanged)]
        assert changes == ["failed"]
        # The agent gone, the daemon's own 'stopped' is later than anything it told.
        w.pins.agent_down("alpha")
        await alpha.call(MCP_STATE, McpServerState("git", "ready", at_ns=300))
        git = next(s for s in w.pins.servers() if s.name == "git")
        assert [s.status for s in git.live] == ["stopped"]


async def test_another_agents_server_is_refused(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        mallory = w.buses["mallory"]
        for op, body in (
            (MCP_PIN, McpPinCall("git", (tool("status"),))),
            (MCP_STATE, McpServerState("git", "failed", "spoofed")),
            (MCP_PIN, McpPinCall("nonexistent", (tool("status"),))),
        ):
            with pytest.raises(CallRefused) as refused:
                await mallory.call(op, body)  # type: ignore[arg-type]
            assert refused.value.code == "mcp_tool_not_allowed"
        assert w.pins.tools() == ()
        assert all(not s.live for s in w.pins.servers())
        # Its own server is served.
        assert (await pin(mallory, "time", tool("now"))).offered == ("now",)


async def test_a_flood_of_tools_is_refused_and_the_book_stays_bounded(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        mallory = w.buses["mallory"]
        # As many as a frame carries (a bigger frame never reaches the service: the bus
        # drops it), far more than the book pins.
        flood = tuple(tool(f"t{i}") for i in range(5000))
        with pytest.raises(CallRefused) as refused:
            await mallory.call(MCP_PIN, McpPinCall("time", flood))
        assert refused.value.code == "mcp_pin_limit"
        # In steps under the per-call bound, the book's own bound holds.
        for start in range(0, 1000, 400):
            step = tuple(tool(f"t{i}") for i in range(start, start + 400))
            try:
                await mallory.call(MCP_PIN, McpPinCall("time", step))
            except CallRefused as exc:
                assert exc.code == "mcp_pin_limit"
        assert len(w.pins.tools(agent="mallory")) <= 512
        assert (await pin(mallory, "time", tool("t0"))).offered == ()  # pinned, not allowed


def raw(value: object) -> msgspec.Raw:
    return msgspec.Raw(msgspec.msgpack.encode(value))


async def test_malformed_bodies_are_refused_and_the_service_carries_on(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        mallory = w.buses["mallory"]
        good = tool("now")
        hostile = [
            ("drop_book", raw({"server": "time", "tools": []}), "bad_request"),
            ("pin", raw({"server": "time"}), "bad_request"),
            ("pin", raw({"server": 1, "tools": "x"}), "bad_request"),
            ("pin", raw({"server": "time", "tools": [{"name": "now"}]}), "bad_request"),
            ("pin", raw({"server": "time", "tools": [[1, 2]]}), "bad_request"),
            ("state", raw({"server": "time", "status": "pwned"}), "bad_request"),
            ("pin", raw({"agent": "alpha", "server": "git", "tools": []}), "mcp_tool_not_allowed"),
            (
                "pin",
                raw({"server": "time", "tools": [{"name": "now", "digest": "nothex"}]}),
                "bad_request",
            ),
            (
                "pin",
                raw(
                    {
                        "server": "time",
                        "tools": [
                            {"name": "now", "digest": good.digest},
                            {"name": "now", "digest": tool("now", "other").digest},
                        ],
                    }
                ),
                "bad_request",
            ),
        ]
        for op, body, code in hostile:
            response = await mallory.request(MCP_SERVICE, op, body)
            assert (response.ok, response.error) == (False, code), (op, response)
        assert w.pins.tools() == ()
        assert (await pin(mallory, "time", good)).offered == ("now",)


async def test_an_unreadable_store_withholds_every_tool_until_it_is_fixed(tmp_path: Path) -> None:
    store = PinStore(pins_path(tmp_path / "state"))
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"version": 1, "pins": [')  # torn by hand
    async with world(tmp_path, store) as w:
        alpha = w.buses["alpha"]
        with pytest.raises(CallRefused) as refused:
            await pin(alpha, "git", tool("status"))
        assert refused.value.code == "mcp_pins_corrupt"
        assert "move it aside" in refused.value.detail
        assert "unreadable" in w.pins.problem
        with pytest.raises(PinsUnavailable):
            await w.pins.trust("git")  # nor does the operator's trust write over it
        assert store.path.read_text() == '{"version": 1, "pins": ['  # never overwritten
        # The operator's fix (moved aside), read at the next call without a restart.
        store.path.rename(store.path.with_name("pins.json.damaged"))
        assert (await pin(alpha, "git", tool("status"))).offered == ("status",)
        assert w.pins.problem == ""
        assert json.loads(store.path.read_text())["pins"][0]["tool"] == "status"


async def test_a_sub_agent_runtime_pins_only_servers_its_bundle_binds_under_its_sub_agent(
    tmp_path: Path,
) -> None:
    from zeroclaw._ops import decode_body, encode_body
    from zeroclaw.bus import Request

    config = mcp_config(tmp_path)
    bound = {"sub:clock@0123456789ab": frozenset({"time"})}
    pins = PinService(
        PinStore(pins_path(tmp_path / "state")),
        lambda: config,
        bound=lambda identity: bound.get(identity, frozenset()),
    )

    async def call(sender: str, server: str) -> Any:
        body = encode_body(McpPinCall(server, (tool("now"),)))
        return await pins.serve(
            sender, Request(id="1", service=MCP_SERVICE, op=MCP_PIN.name, body=body)
        )

    served = await call("sub:clock@0123456789ab", "time")
    assert served.ok and decode_body(served.body, McpPinAnswer).offered == ("now",)
    for sender, server in (("sub:clock@0123456789ab", "git"), ("sub:other@ffffffffffff", "time")):
        refused = await call(sender, server)
        assert (refused.ok, refused.error) == (False, "mcp_tool_not_allowed")
    # Pinned under the sub-agent, whatever its revision.
    assert [(t.agent, t.server, t.tool) for t in pins.tools()] == [("sub:clock", "time", "now")]
