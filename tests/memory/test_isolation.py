"""Isolation as a property: random operations by random agents with random grants."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bodies import write_args
from zeroclaw.memory import MemoryStore, OperatorScope, Scope, ScopeError, WriteOp

AGENTS = ["a", "b", "c", "d"]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo"]

grants = st.fixed_dictionaries(
    {agent: st.frozensets(st.sampled_from([x for x in AGENTS if x != agent])) for agent in AGENTS}
)
ops = st.lists(
    st.tuples(
        st.sampled_from(["store", "forget", "recall", "list", "get", "export"]),
        st.sampled_from(AGENTS),  # who acts
        st.sampled_from(["k1", "k2", "k3"]),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
        st.lists(st.sampled_from(AGENTS), max_size=3),  # namespaces asked for in reads
    ),
    max_size=40,
)


def read(
    store: MemoryStore, kind: str, scope: Scope, text: str, key: str, asked: list[str]
) -> object:
    namespace = asked[0] if asked else None
    if kind == "recall":
        return store.recall(scope, text, namespaces=asked or None)
    if kind == "list":
        return store.list_records(scope, namespaces=asked or None)
    if kind == "get":
        return store.get(scope, key=key, namespace=namespace)
    return list(store.export(scope, namespace))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grants, ops)
def test_no_agent_sees_or_changes_what_it_was_not_granted(
    granted: dict[str, frozenset[str]], sequence: list[tuple[str, str, str, str, list[str]]]
) -> None:
    root = Path(tempfile.mkdtemp(prefix="zc-mem-"))
    store = MemoryStore(root / "m", map_size=1 << 24)
    model: dict[tuple[str, str], str] = {}  # (namespace, key) -> content
    try:
        for kind, actor, key, text, asked in sequence:
            scope = Scope(actor, granted[actor])
            allowed = {actor} | granted[actor]
            if kind in ("store", "forget"):
                args = {"key": key, "content": text} if kind == "store" else {"key": key}
                op = WriteOp(scope, write_args(kind, args))
                store.apply_writes([op])
                assert op.error is None
                if kind == "store":
                    model[(actor, key)] = text
                    assert op.result.agent == actor  # a write lands in the caller's namespace
                else:
                    assert op.result == ((actor, key) in model)
                    model.pop((actor, key), None)
                continue
            namespaces = asked or None
            if kind in ("get", "export"):  # these read one namespace: the first asked for
                wanted = {asked[0]} if asked else {actor}
            else:
                wanted = set(asked) if asked else {actor}
            if not wanted <= allowed:
                with pytest.raises(ScopeError):  # fails closed, never a silent empty answer
                    read(store, kind, scope, text, key, asked)
                continue
            if kind == "recall":
                seen = [
                    h.record for h in store.recall(scope, text, namespaces=namespaces, limit=100)
                ]
            elif kind == "list":
                seen = store.list_records(scope, namespaces=namespaces, limit=100)
            elif kind == "get":
                ns = asked[0] if asked else actor
                record = store.get(scope, key=key, namespace=ns)
                seen = [record] if record else []
                assert (record is not None) == ((ns, key) in model)
            else:
                ns = asked[0] if asked else actor
                seen = list(store.export(scope, ns))
                assert {(r.agent, r.key) for r in seen} == {k for k in model if k[0] == ns}
            for record in seen:
                assert record.agent in allowed, (actor, record.agent, granted)
                assert model[(record.agent, record.key)] == record.content
        # Finally the operator's view equals the model exactly.
        op_view = {
            (r.agent, r.key): r.content
            for ns in store.namespaces()
            for r in store.export(OperatorScope(), ns)
        }
        assert op_view == model
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
