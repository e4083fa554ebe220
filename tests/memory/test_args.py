"""Memory request bodies: one struct per operation, bad bodies as typed errors, never a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.bodies import handled
from zeroclaw.events import EventSink, MemoryOperation
from zeroclaw.memory import (
    MEMORY_ERROR_CODES,
    MEMORY_OPS,
    ListArgs,
    MemoryGrants,
    MemoryService,
    MemoryServiceError,
    MemoryStore,
    OperatorScope,
    Scope,
    decode_args,
    operator_request,
)
from zeroclaw.turns import MEMORY_OPERATIONS

edges = st.sampled_from(["", "\x00", "k" * 300, "k" * 600, "alpha", "beta", "user", "s1"])
scalars = st.one_of(
    edges,
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),  # what msgpack can carry
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=10),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=20),
        st.dictionaries(st.sampled_from(["role", "content", "x"]), inner, max_size=3),
    ),
    max_leaves=30,
)


def body_for(op: str) -> st.SearchStrategy[object]:
    """Mostly the operation's own fields (each present or not), so bodies get past the
    first check and reach the store; sometimes anything at all."""
    operation = MEMORY_OPERATIONS.get(op)
    fields = operation.request.__struct_fields__ if operation is not None else ("key", "agent")
    own = st.fixed_dictionaries({}, optional={f: st.one_of(edges, values) for f in fields})
    return st.one_of(own, own, st.dictionaries(st.text(max_size=5), values, max_size=4), values)


op_and_body = st.one_of(st.sampled_from(MEMORY_OPS), st.text(max_size=12)).flatmap(
    lambda op: st.tuples(st.just(op), body_for(op))
)
scopes = st.sampled_from([Scope("alpha"), Scope("beta", frozenset({"alpha"})), OperatorScope()])
# Bodies that once reached LMDB's key-size error (and in a write, failed its whole batch).
KNOWN_EDGES = [("forget", {"key": ""}), ("get", {"key": ""}), ("forget", {"id": ""})]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One store for every example: the property is about bodies, not about a fresh store."""
    opened = MemoryStore(tmp_path_factory.mktemp("fuzz") / "m")
    yield opened
    opened.close()


def run_one(store: MemoryStore, call: Any) -> object:
    async def main() -> object:
        service = MemoryService(store, MemoryGrants({"beta": frozenset({"alpha"})}))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.run_committer)
            try:
                return await call(service)
            except MemoryServiceError as exc:
                return exc
            finally:
                nursery.cancel_scope.cancel()

    return trio.run(main)


def assert_typed(outcome: object) -> None:
    if isinstance(outcome, MemoryServiceError):
        assert outcome.code in MEMORY_ERROR_CODES
        # A healthy store never blames itself for a body, however bad.
        assert outcome.code != "storage_error", outcome.detail
        assert outcome.detail


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=op_and_body, scope=scopes)
@example(request=KNOWN_EDGES[0], scope=Scope("alpha"))
@example(request=KNOWN_EDGES[1], scope=Scope("alpha"))
@example(request=KNOWN_EDGES[2], scope=Scope("alpha"))
def test_any_body_for_any_op_is_a_result_or_a_typed_error(
    store: MemoryStore, request: tuple[str, object], scope: Scope | OperatorScope
) -> None:
    op, body = request
    assert_typed(run_one(store, lambda service: handled(service, scope, op, body)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=op_and_body, agent=st.sampled_from(["alpha", "beta", "nobody"]))
def test_any_operator_request_is_a_result_or_a_typed_error(
    store: MemoryStore, request: tuple[str, object], agent: str
) -> None:
    op, body = request
    call = lambda service: operator_request(  # noqa: E731
        service, frozenset({"alpha", "beta"}), op, agent, body
    )
    assert_typed(run_one(store, call))


@pytest.mark.parametrize(
    ("op", "body", "words"),
    [
        ("list", {"limit": 0}, "limit"),
        ("list", {"limit": 2**70}, "limit"),
        ("list", {"since": float("nan")}, "finite"),
        ("store", {"content": "x"}, "key"),
        ("get", {"key": "k" * 300}, "'key' must be 1..256 bytes"),
        ("forget", {"key": ""}, "'key' must be 1..256 bytes"),
        ("append_turns", {"session": "s", "turns": []}, "turns"),
        ("recall", ["not", "an", "object"], "object"),
        ("nope", {}, "unknown memory operation"),
    ],
)
def test_a_bad_body_says_which_field(op: str, body: object, words: str) -> None:
    with pytest.raises(MemoryServiceError) as caught:
        decode_args(op, body)
    assert caught.value.code == "bad_request"
    assert words in caught.value.detail


def test_fields_an_operation_does_not_name_are_ignored() -> None:
    assert decode_args("list", {"limit": 5, "namespace": "beta"}) == ListArgs(limit=5)
    assert decode_args("stats", None) == decode_args("stats", {})


async def test_every_operation_publishes_one_event(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")
    sink = EventSink()
    service = MemoryService(store, MemoryGrants({}), events=sink)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.run_committer)
            alpha = service.scope_for("alpha")
            await handled(service, alpha, "store", {"key": "k", "content": "a fact"})
            await handled(service, alpha, "recall", {"query": "fact"})
            with pytest.raises(MemoryServiceError):
                await handled(service, alpha, "list", {"limit": 0})
            with pytest.raises(MemoryServiceError):
                await handled(service, alpha, "get", {"agent": "beta", "key": "k"})
            await operator_request(service, frozenset({"alpha"}), "stats", "alpha", {})
            with pytest.raises(MemoryServiceError):
                await operator_request(service, frozenset({"alpha"}), "get", "zed", {})
            await handled(service, OperatorScope(), "export", {"agent": "alpha"})
            with pytest.raises(MemoryServiceError):
                await handled(service, alpha, "x" * 10_000, {})
            nursery.cancel_scope.cancel()
    finally:
        store.close()
    assert [p.event for p in sink.recent()] == [
        MemoryOperation(agent="alpha", op="store"),
        MemoryOperation(agent="alpha", op="recall"),
        MemoryOperation(agent="alpha", op="list", ok=False, code="bad_request"),
        MemoryOperation(agent="alpha", op="get", ok=False, code="forbidden"),
        MemoryOperation(agent="alpha", op="stats"),
        MemoryOperation(agent="zed", op="get", ok=False, code="unknown_agent"),
        MemoryOperation(agent="operator", op="export"),
        MemoryOperation(agent="alpha", op="unknown", ok=False, code="bad_request"),
    ]
