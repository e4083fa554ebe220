"""The memory service's `context` and `compact` (ADR 0059) as an agent's request reaches
it: scoped by the caller (never by the body), recall within its token budget, compaction
refused to a readonly agent's facts but not its summary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.bodies import handled
from zeroclaw._tokens import estimate_tokens
from zeroclaw.memory import MemoryGrants, MemoryService, MemoryServiceError, MemoryStore
from zeroclaw.memory._context import MEMORY_FRAME_TOKENS, MIN_CUT_TOKENS


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[MemoryService]:
    store = MemoryStore(tmp_path / "m")
    grants = MemoryGrants(
        {"alpha": frozenset({"beta"}), "beta": frozenset(), "gamma": frozenset()},
        readonly=frozenset({"ro"}),
    )
    svc = MemoryService(store, grants)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(svc.run_committer)
        yield svc
        nursery.cancel_scope.cancel()
    store.close()


async def store(service: MemoryService, agent: str, key: str, content: str) -> None:
    await handled(service, service.scope_for(agent), "store", {"key": key, "content": content})


async def context(service: MemoryService, who: str, **body: object) -> dict[str, object]:
    body = {"session": "s", "recall_k": 10, "recall_tokens": 2000, **body}
    answer: dict[str, object] = await handled(service, service.scope_for(who), "context", body)
    return answer


async def test_recall_covers_own_and_granted_namespaces_whatever_the_body_names(
    service: MemoryService,
) -> None:
    await store(service, "alpha", "plan", "ship on friday")
    await store(service, "beta", "standup", "friday standup at ten")
    await store(service, "gamma", "secret", "friday is gamma's secret")
    # Fields a struct does not name are ignored: no body chooses a namespace.
    answer = await context(service, "alpha", query="friday", agents=["gamma"], agent="gamma")
    memories = answer["memories"]
    assert isinstance(memories, list)
    assert sorted((m["agent"], m["key"]) for m in memories) == [
        ("alpha", "plan"),
        ("beta", "standup"),
    ]
    beta = await context(service, "beta", query="friday")
    assert [m["key"] for m in beta["memories"]] == ["standup"]  # type: ignore[union-attr]


async def test_recalled_records_stay_within_the_budget_and_a_huge_one_is_cut(
    service: MemoryService,
) -> None:
    await store(service, "alpha", "huge", "friday " + "x" * 200_000)
    await store(service, "alpha", "small", "friday lunch")
    answer = await context(service, "alpha", query="friday", recall_tokens=300)
    memories = answer["memories"]
    assert isinstance(memories, list) and memories
    spent = sum(
        MEMORY_FRAME_TOKENS + estimate_tokens(m["key"]) + estimate_tokens(m["content"])
        for m in memories
    )
    assert spent <= 300
    cut = [m for m in memories if m["cut"]]
    assert cut and all(len(m["content"]) < 2000 for m in cut)
    nothing = await context(service, "alpha", query="friday", recall_tokens=MIN_CUT_TOKENS)
    assert nothing["memories"] == []


async def test_context_bodies_out_of_bounds_are_bad_requests(service: MemoryService) -> None:
    alpha = service.scope_for("alpha")
    for body in (
        {"session": "s", "recall_k": 51},
        {"session": "s", "history_tokens": -1},
        {"session": "s", "recall_tokens": 10**7},
        {"session": "s", "query": "q" * (16 * 1024 + 1)},
        {"session": ""},
        {"session": "s" * 129},
        {"recall_k": 1},
    ):
        with pytest.raises(MemoryServiceError) as refused:
            await handled(service, alpha, "context", body)
        assert refused.value.code == "bad_request", body
    for body in (
        {"session": "s", "from_seq": 3, "through_seq": 2, "summary": "x"},
        {"session": "s", "from_seq": 0, "through_seq": 0, "summary": ""},
        {"session": "s", "from_seq": 0, "through_seq": 0, "summary": "x", "facts": [""]},
        {"session": "s", "from_seq": 0, "through_seq": 0, "summary": "x", "facts": ["f"] * 17},
        {"session": "s", "from_seq": -1, "through_seq": 0, "summary": "x"},
        {"session": "s", "from_seq": 0, "through_seq": 0, "summary": "x" * (64 * 1024 + 1)},
    ):
        with pytest.raises(MemoryServiceError) as refused:
            await handled(service, alpha, "compact", body)
        assert refused.value.code == "bad_request", body


async def test_a_readonly_agent_compacts_its_session_but_keeps_no_facts(
    service: MemoryService,
) -> None:
    gamma = service.scope_for("ro")
    turns = [{"role": "user", "content": "note: x"}, {"role": "assistant", "content": "ok"}]
    await handled(service, gamma, "append_turns", {"session": "s", "turns": turns})
    body = {"session": "s", "from_seq": 0, "through_seq": 0, "summary": "said x"}
    with pytest.raises(MemoryServiceError) as refused:
        await handled(service, gamma, "compact", {**body, "facts": ["x"]})
    assert refused.value.code == "read_only_profile"
    done = await handled(service, gamma, "compact", body)
    assert done["dropped"] == 1 and done["facts"] == []
    answer = await context(service, "ro")
    assert answer["summary"]["summary"] == "said x"  # type: ignore[index]
    assert [t["seq"] for t in answer["turns"]] == [1]  # type: ignore[union-attr]
