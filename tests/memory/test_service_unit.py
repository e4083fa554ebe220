"""MemoryService in-process with a real store: scoping, sessions, errors, group commit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.bodies import handled
from zeroclaw.memory import (
    MemoryGrants,
    MemoryService,
    MemoryServiceError,
    MemoryStore,
    OperatorScope,
)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[MemoryService]:
    store = MemoryStore(tmp_path / "m")
    svc = MemoryService(store, MemoryGrants({"alpha": frozenset(), "beta": frozenset({"alpha"})}))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(svc.run_committer)
        yield svc
        nursery.cancel_scope.cancel()
    store.close()


async def test_sessions_continue_across_requests(service: MemoryService) -> None:
    alpha = service.scope_for("alpha")
    for i, role in enumerate(["user", "assistant", "user"]):
        await handled(
            service, alpha, "append_turn", {"session": "s1", "role": role, "content": f"t{i}"}
        )
    turns = (await handled(service, alpha, "session", {"session": "s1"}))["turns"]
    assert [(t["role"], t["content"]) for t in turns] == [
        ("user", "t0"),
        ("assistant", "t1"),
        ("user", "t2"),
    ]
    assert (await handled(service, service.scope_for("beta"), "session", {"session": "s1"}))[
        "turns"
    ] == []


async def test_grants_and_typed_errors(service: MemoryService) -> None:
    await handled(
        service, service.scope_for("alpha"), "store", {"key": "k", "content": "shared fact"}
    )
    beta = service.scope_for("beta")
    hits = (await handled(service, beta, "recall", {"query": "fact", "agents": ["beta", "alpha"]}))[
        "hits"
    ]
    assert [h["agent"] for h in hits] == ["alpha"]
    cases = [
        (service.scope_for("alpha"), "recall", {"query": "x", "agents": ["beta"]}, "forbidden"),
        (beta, "list", {"limit": 0}, "bad_request"),
        (beta, "list", {"limit": True}, "bad_request"),
        (beta, "store", {"key": "", "content": "x"}, "bad_request"),
        (beta, "nope", {}, "bad_request"),
        (beta, "purge", {"agent": "alpha"}, "forbidden"),
        (OperatorScope(), "store", {"key": "k", "content": "x"}, "bad_request"),
    ]
    for scope, op, args, code in cases:
        with pytest.raises(MemoryServiceError) as info:
            await handled(service, scope, op, args)
        assert info.value.code == code, (op, args)


async def test_concurrent_writes_share_commits(service: MemoryService) -> None:
    alpha = service.scope_for("alpha")
    async with trio.open_nursery() as nursery:
        for i in range(200):
            nursery.start_soon(
                handled, service, alpha, "store", {"key": f"k{i}", "content": f"v {i}"}
            )
    assert service.committed_ops == 200
    assert service.commits < 200
    stats = await handled(service, OperatorScope(), "stats", {})
    assert stats["namespaces"]["alpha"]["records"] == 200


async def test_read_free_sections_never_overlap(service: MemoryService) -> None:
    """A purge and a map growth at once: the first to end must not reopen reads while the
    second still runs (LMDB cannot resize with a read transaction open)."""
    from trio.testing import wait_all_tasks_blocked

    order: list[str] = []

    async def section(name: str, release: trio.Event) -> None:
        async with service._without_reads():
            order.append(f"{name} in")
            await release.wait()
            order.append(f"{name} out")

    first, second = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(section, "a", first)
        await wait_all_tasks_blocked()
        nursery.start_soon(section, "b", second)
        await wait_all_tasks_blocked()
        assert order == ["a in"]
        first.set()
        await wait_all_tasks_blocked()
        assert order == ["a in", "a out", "b in"]
        assert service._held is not None  # reads stay held while "b" runs
        second.set()
    assert service._held is None


HOSTILE_WRITES = [
    ("store", {"key": 5, "content": "x"}),
    ("store", {"key": "k", "content": ["not", "text"]}),
    ("forget", {"key": {"a": 1}}),
    ("append_turn", {"session": 5, "role": "user", "content": "x"}),
    ("append_turn", {"session": "s", "role": None, "content": b"bytes"}),
    ("append_turns", {"session": "s", "turns": [{"role": "user", "content": 7}]}),
    ("append_turns", {"session": ["s"], "turns": [{"role": "user", "content": "x"}]}),
]


async def test_wrong_types_fail_alone_and_the_committer_lives_on(service: MemoryService) -> None:
    alpha = service.scope_for("alpha")
    outcomes: list[object] = [None] * len(HOSTILE_WRITES)

    async def one(i: int, op: str, body: dict[str, object]) -> None:
        try:
            await handled(service, alpha, op, body)
        except MemoryServiceError as exc:
            outcomes[i] = exc.code

    async with trio.open_nursery() as nursery:  # all in the same batches as a good write
        for i, (op, body) in enumerate(HOSTILE_WRITES):
            nursery.start_soon(one, i, op, body)
        nursery.start_soon(handled, service, alpha, "store", {"key": "good", "content": "kept"})
    assert outcomes == ["bad_request"] * len(HOSTILE_WRITES)
    assert (await handled(service, alpha, "get", {"key": "good"}))["record"]["content"] == "kept"


async def test_every_operator_reply_is_its_typed_struct(service: MemoryService) -> None:
    """The shapes the CLI decodes (control.MEMORY_REPLY_TYPES), strictly: a field renamed or
    added on one side fails here."""
    import msgspec

    from zeroclaw.control import MEMORY_REPLY_TYPES, MemoryHits, MemoryStored
    from zeroclaw.memory import operator_request

    agents = frozenset({"alpha", "beta"})
    calls = {
        "store": {"key": "k", "content": "the sky is blue"},
        "get": {"key": "k"},
        "list": {},
        "recall": {"query": "sky"},
        "stats": {},
        "export": {},
        "forget": {"key": "k"},
        "purge": {},
    }
    # every op the operator CLI runs (append_turn[s], session, context and compact are the
    # agents')
    agents_own = {"append_turn", "append_turns", "session", "context", "compact"}
    assert set(calls) == set(MEMORY_REPLY_TYPES) - agents_own
    replies = {}
    for op, args in calls.items():
        reply = await operator_request(service, agents, op, "alpha", args)
        assert type(reply) is MEMORY_REPLY_TYPES[op]
        wire = msgspec.msgpack.encode(reply)  # as the control socket carries it
        assert msgspec.msgpack.decode(wire, type=MEMORY_REPLY_TYPES[op]) == reply
        replies[op] = reply
    stored = replies["store"]
    assert isinstance(stored, MemoryStored) and stored.record.key == "k"
    hits = replies["recall"]
    assert isinstance(hits, MemoryHits) and hits.hits[0].score > 0


# --- issue 16 (ADR 0039): readonly writes, recall across namespaces, foreign forgets -------


async def test_a_readonly_agents_memory_writes_are_refused_by_the_service(tmp_path: Path) -> None:
    from zeroclaw.memory import operator_request

    store = MemoryStore(tmp_path / "m")
    svc = MemoryService(store, MemoryGrants({"ro": frozenset()}, readonly=frozenset({"ro"})))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(svc.run_committer)
            ro = svc.scope_for("ro")
            for op, body in (("store", {"key": "k", "content": "c"}), ("forget", {"key": "k"})):
                with pytest.raises(MemoryServiceError) as refused:
                    await handled(svc, ro, op, body)
                assert refused.value.code == "read_only_profile"
            # Its own transcript is still kept, and the operator still writes for it.
            turn = {"session": "s", "role": "user", "content": "hi"}
            await handled(svc, ro, "append_turn", turn)
            body = {"key": "k", "content": "by the operator"}
            await operator_request(svc, frozenset({"ro"}), "store", "ro", body)
            nursery.cancel_scope.cancel()
    finally:
        store.close()


async def test_recall_with_namespaces_searches_own_and_granted_ones_labelled(
    service: MemoryService,
) -> None:
    alpha, beta = service.scope_for("alpha"), service.scope_for("beta")
    await handled(service, alpha, "store", {"key": "a", "content": "the vault is blue"})
    await handled(service, beta, "store", {"key": "b", "content": "the vault is red"})
    hits = await handled(
        service, beta, "recall", {"query": "vault", "agents": ["alpha"], "with_own": True}
    )
    assert sorted(h["agent"] for h in hits["hits"]) == ["alpha", "beta"]
    with pytest.raises(MemoryServiceError) as refused:  # alpha has no grant on beta
        await handled(service, alpha, "recall", {"query": "vault", "agents": ["beta"]})
    assert refused.value.code == "forbidden"


async def test_forgetting_another_agents_record_by_id_is_forbidden(
    service: MemoryService,
) -> None:
    alpha, beta = service.scope_for("alpha"), service.scope_for("beta")
    stored = await handled(service, alpha, "store", {"key": "a", "content": "alpha's"})
    with pytest.raises(MemoryServiceError) as refused:
        await handled(service, beta, "forget", {"id": stored["record"]["id"]})
    assert refused.value.code == "forbidden"
    assert (await handled(service, alpha, "get", {"key": "a"}))["record"] is not None
    missing = await handled(service, beta, "forget", {"id": "01J0000000000000000000000Z"})
    assert missing == {"forgotten": False}  # unchanged: a missing id is not an error
