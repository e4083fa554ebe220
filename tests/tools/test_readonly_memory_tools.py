"""The tool layer of issue 16 (ADR 0039), on a real memory service in this process:
a readonly profile's memory writes and delegation are refused before anything is sent;
recall names granted namespaces; forget takes a key or an id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from zeroclaw.cli._local_reach import LocalReach
from zeroclaw.memory import MemoryGrants, MemoryService, MemoryStore
from zeroclaw.policy import rules_for
from zeroclaw.tools import DEFAULT_TOOLSET, BadArguments, ShellSettings, ToolContext


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[MemoryService]:
    store = MemoryStore(tmp_path / "m")
    grants = MemoryGrants({"alpha": frozenset({"beta"}), "beta": frozenset(), "gamma": frozenset()})
    svc = MemoryService(store, grants)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(svc.run_committer)
        yield svc
        nursery.cancel_scope.cancel()
    store.close()


def context(tmp_path: Path, service: MemoryService, alias: str, *, may_write: bool) -> ToolContext:
    return ToolContext(
        rules=rules_for(str(tmp_path), workspace_only=True, may_write=may_write),
        shell=ShellSettings(frozenset(), may_write, True, 1.0, {}),
        reach=LocalReach(service, alias),
        asks_approval=False,
        delegates=frozenset({"beta"}),
    )


async def call(ctx: ToolContext, name: str, args: dict[str, object]):  # type: ignore[no-untyped-def]
    tool = DEFAULT_TOOLSET.get(name)
    assert tool is not None
    return await tool.run(ctx, tool.decode(args))


async def test_readonly_refuses_memory_writes_and_delegation_before_sending(
    tmp_path: Path, service: MemoryService
) -> None:
    ro = context(tmp_path, service, "gamma", may_write=False)
    for name, args in (
        ("memory_store", {"key": "k", "content": "c"}),
        ("memory_forget", {"key": "k"}),
        ("memory_forget", {"id": "01J0000000000000000000000Z"}),
        ("delegate", {"to": "beta", "text": "work"}),
    ):
        result = await call(ro, name, args)
        assert (result.ok, result.error_code) == (False, "read_only_profile"), name
    assert service.committed_ops == 0  # nothing reached the store
    recalled = await call(ro, "memory_recall", {"query": "anything"})  # a read stays allowed
    assert recalled.ok


async def test_recall_names_granted_namespaces_and_labels_hits(
    tmp_path: Path, service: MemoryService
) -> None:
    beta = context(tmp_path, service, "beta", may_write=True)
    alpha = context(tmp_path, service, "alpha", may_write=True)
    assert (await call(beta, "memory_store", {"key": "vault", "content": "vault is blue"})).ok
    assert (await call(alpha, "memory_store", {"key": "mine", "content": "vault is mine"})).ok
    own = await call(alpha, "memory_recall", {"query": "vault"})
    assert own.output == "[alpha] mine: vault is mine"  # absent: own namespace only
    both = await call(alpha, "memory_recall", {"query": "vault", "namespaces": ["beta"]})
    assert sorted(both.output.splitlines()) == [
        "[alpha] mine: vault is mine",
        "[beta] vault: vault is blue",
    ]
    refused = await call(alpha, "memory_recall", {"query": "vault", "namespaces": ["gamma"]})
    assert (refused.ok, refused.error_code) == (False, "forbidden")


async def test_forget_by_id_reaches_only_the_callers_own_records(
    tmp_path: Path, service: MemoryService
) -> None:
    beta = context(tmp_path, service, "beta", may_write=True)
    alpha = context(tmp_path, service, "alpha", may_write=True)
    stored = await call(beta, "memory_store", {"key": "vault", "content": "vault is blue"})
    record_id = stored.data["record"]["id"]
    foreign = await call(alpha, "memory_forget", {"id": record_id})
    assert (foreign.ok, foreign.error_code) == (False, "forbidden")
    assert (await call(beta, "memory_recall", {"query": "vault"})).output
    own = await call(beta, "memory_forget", {"id": record_id})
    assert own.ok and own.data == {"forgotten": True}
    with pytest.raises(BadArguments):  # a key or an id, not both, not neither
        DEFAULT_TOOLSET.get("memory_forget").decode({"key": "k", "id": record_id})  # type: ignore[union-attr]
