"""An authenticated agent's hostile memory requests through a real router: an op the
service does not have, another op's body, wrong types, a body nested past
the decode bound (its frame is dropped, counted), a namespace in the body. Each is
refused, nothing is written, and the agent's next honest call is served."""

from __future__ import annotations

from pathlib import Path

import msgspec
import trio
import zmq

from tests.conftest import PATIENCE
from tests.hostile import nested_msgpack
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw._ops import encode_body
from zeroclaw.bus import AgentBus, BusCredentials, Router
from zeroclaw.config import validate_document
from zeroclaw.memory import MemoryStore
from zeroclaw.memory._service import MemoryGrants, MemoryService
from zeroclaw.supervisor._compose import memory_service
from zeroclaw.turns import MEMORY_SERVICE, GetArgs, ListArgs, StoreArgs


async def test_hostile_memory_bodies_are_refused_and_the_service_carries_on(
    tmp_path: Path,
) -> None:
    config = validate_document(
        make_config(tmp_path, {"alpha": agent_entry(), "beta": agent_entry()})
    )
    store = MemoryStore(tmp_path / "memory", map_size=1 << 24)
    memory = MemoryService(store, MemoryGrants({"alpha": frozenset(), "beta": frozenset()}))
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = Router(config, tmp_path, ctx, services={MEMORY_SERVICE: memory_service(memory)})
    hostile = [
        ("drop_table", encode_body(StoreArgs(key="k", content="c")), "bad_request"),
        ("store", encode_body(ListArgs()), "bad_request"),  # another op's struct
        ("store", msgspec.Raw(msgspec.msgpack.encode({"key": 1, "content": []})), "bad_request"),
        ("list", msgspec.Raw(msgspec.msgpack.encode({"agents": ["beta"]})), "forbidden"),
        ("purge", msgspec.Raw(msgspec.msgpack.encode({"agent": "beta"})), "forbidden"),
    ]
    deep = msgspec.Raw(b"\x81\xa3key" + nested_msgpack(10_000))
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            nursery.start_soon(memory.run_committer)
            keys = router.mint_keys("alpha")
            alpha = AgentBus(
                BusCredentials(
                    "alpha", keys.endpoint, keys.server_public, keys.public, keys.secret, 1 << 20
                )
            )
            await nursery.start(alpha.run)
            for op, body, code in hostile:
                response = await alpha.request(MEMORY_SERVICE, op, body)
                assert (response.ok, response.error) == (False, code), (op, response)
            # Too deep to read: answered by its id at once, not left to the caller's timeout.
            refused = await alpha.request(MEMORY_SERVICE, "store", deep, wait_secs=PATIENCE)
            assert (refused.ok, refused.error) == (False, "malformed"), refused
            honest = await alpha.request(
                MEMORY_SERVICE, "store", StoreArgs(key="k", content="mine", category="core")
            )
            assert honest.ok, honest
            got = await alpha.request(MEMORY_SERVICE, "get", GetArgs(key="k"))
            assert got.ok
            nursery.cancel_scope.cancel()
    finally:
        ctx.term()
    assert router.stats().outcomes["malformed"] == 1  # the deep frame
    assert [r.agent for r in store.list_records(memory.scope_for("alpha"))] == ["alpha"]
    store.close()
