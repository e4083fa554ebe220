"""The context cells (ADR 0059), driven through the product: a turn of each origin kind
runs in the real engine with the toolset the daemon's grant gives that origin
(`test_origin_cells.turn_toolset`: PeerPolicy.origin_grant over a real config, the peer
toolset, a runtime's), over a real memory service and store, with the offline provider,
whose `context` answer is exactly what a model would be sent. A record shows up there or
it does not; the reason is read from the engine's own request (no recall asked for: the
turn's grant) or the service's scope (asked, not given: outside the scope)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.helpers import local_engine
from tests.conformance._matrix import Cell, Observed, cells_on
from tests.conformance._table import record
from tests.conformance.test_origin_cells import turn_toolset
from zeroclaw.agent import MemorySpec
from zeroclaw.agent._context import context_request
from zeroclaw.memory import MemoryGrants
from zeroclaw.providers import OfflineProvider
from zeroclaw.tools import Toolset
from zeroclaw.turns import MEMORY_LIST, ListArgs, StoreArgs

CELLS = cells_on("context")
RECORDS = {  # case -> (the namespace that holds the record, its key)
    "own records": ("alpha", "alpha-plan"),
    "a granted namespace": ("beta", "beta-plan"),
    "an ungranted namespace": ("gamma", "gamma-plan"),
}
SMALL = MemorySpec(history_budget_tokens=64)


async def recalled(cell: Cell, toolset: Toolset, tmp_path: Path) -> Observed:
    namespace, key = RECORDS[cell.action]
    grants = MemoryGrants({"alpha": frozenset({"beta"})})
    async with local_engine(OfflineProvider(), tmp_path, grants=grants) as (engine, reach):
        service = reach.service
        await service.run(service.scope_for(namespace), StoreArgs(key=key, content="friday plan"))
        reply = (await engine.run_turn("context friday plan", toolset=toolset)).reply
    if f'agent="{namespace}" key="{key}"' in reply:
        return Observed("allowed")
    if context_request(engine.spec.memory, "default", "friday", toolset).recall_k == 0:
        return Observed("refused", "tool_not_granted", "the turn asked for no recall")
    return Observed("refused", "forbidden", "outside the caller's scope: not recalled")


async def kept_facts(toolset: Toolset, tmp_path: Path) -> Observed:
    async with local_engine(OfflineProvider(), tmp_path, memory=SMALL) as (engine, reach):
        for i in range(8):
            await engine.run_turn(f"note: fact {i}", session="s", toolset=toolset)
        facts = await reach.memory(MEMORY_LIST, ListArgs(category="compacted"))
    if facts.records:
        return Observed("allowed", detail=f"{len(facts.records)} facts")
    if "memory_store" not in toolset:
        return Observed("refused", "tool_not_granted", "the turn could store nothing")
    return Observed("refused", "kept_nothing")


@pytest.mark.parametrize("cell", CELLS, ids=[c.key for c in CELLS])
async def test_context(cell: Cell, tmp_path: Path) -> None:
    toolset = turn_toolset(tmp_path, cell.extra["kind"], cell.extra["grant"])
    if cell.action == "facts at compaction":
        observed = await kept_facts(toolset, tmp_path / "t")
    else:
        observed = await recalled(cell, toolset, tmp_path / "t")
    record(cell, observed)
