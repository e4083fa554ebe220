"""The validation-bounds and memory-quota cells (issue 24, Deliver 9; ADR 0046), each driven
on real parts: the validation worker pool (processes, killed at the bound) and then what
`admit` and `verdict` make of its outcome; the memory service over a real LMDB store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.bodies import handled
from tests.conformance._matrix import PROFILES, VALIDATION_CASES, Cell, Observed, cells_on
from tests.conformance._table import record
from zeroclaw.memory import (
    MemoryGrants,
    MemoryQuota,
    MemoryService,
    MemoryServiceError,
    MemoryStore,
    record_bytes,
)
from zeroclaw.subagents import (
    Admitted,
    Bundle,
    DispatchRequest,
    Refused,
    ValidatorPool,
    admit,
    load_bundle,
    verdict,
)
from zeroclaw.turns import TurnDone

EXAMPLES = Path(__file__).resolve().parents[2] / "etc" / "subagents"
BOUND_SECS = 2.0  # the out_of_bound case runs for minutes unstopped
ROOMY_SECS = 60.0  # the other cases: a cold worker under load, never their bound


def ids(cells: list[Cell]) -> list[str]:
    return [f"{c.profile}:{c.case}" for c in cells]


def _params(path: str) -> pytest.MarkDecorator:
    cells = cells_on(path)
    return pytest.mark.parametrize("cell", cells, ids=ids(cells))


def _analyst() -> Bundle:
    bundle = load_bundle(EXAMPLES / "content-analyst", providers=frozenset({"offline.default"}))
    assert isinstance(bundle, Bundle)
    return bundle


@_params("validator")
async def test_validation_bound(cell: Cell) -> None:
    schema, instance = VALIDATION_CASES[cell.action]
    pool = ValidatorPool(bound=BOUND_SECS if cell.action == "out_of_bound" else ROOMY_SECS)
    try:
        await pool.warm()  # a worker's start is not what the bound measures here
        outcome = await pool.check(schema, instance)
    finally:
        await pool.aclose()
    tag = type(outcome).__struct_config__.tag
    assert tag == cell.action, f"the pool answered {outcome!r} for the {cell.action} case"
    if cell.extra["side"] == "input":
        bundle = _analyst()
        request = DispatchRequest(bundle.manifest.id, "cli", instance)
        decided = admit(
            request,
            bundles={bundle.manifest.id: bundle},
            invocations_by_key={},
            running={},
            checked=outcome,
        )
        if isinstance(decided, Admitted):
            observed = Observed("allowed")
        else:
            assert isinstance(decided, Refused)
            observed = Observed("refused", decided.code, decided.detail)
    else:
        judged = verdict(TurnDone("", result=instance), schema, None, outcome)
        observed = (
            Observed("allowed")
            if judged.state == "succeeded"
            else Observed("refused", judged.error_code, judged.detail)
        )
    if cell.action == "out_of_bound":
        assert pool.killed == 1, "the check past its bound was not stopped"
    record(cell, observed)


QUOTA = MemoryQuota(
    max_records=3,
    max_bytes=300,
    max_session_turns=4,
    max_session_bytes=200,
    max_transcript_bytes=400,
    max_sender_bytes=150,
)


def _turn(session: str, size: int) -> tuple[str, dict[str, Any]]:
    return "append_turn", {"session": session, "role": "user", "content": "t" * size}


def _store(key: str, size: int) -> tuple[str, dict[str, Any]]:
    return "store", {"key": key, "content": "c" * size}


# kind -> (over, within): the writes of each attempt; the last one's outcome is observed.
ATTEMPTS: dict[str, tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]] = {
    "records": ([_store(f"k{i}", 1) for i in range(4)], [_store(f"k{i}", 1) for i in range(3)]),
    "bytes": ([_store("big", 200), _store("more", 20)], [_store("big", 200), _store("big", 10)]),
    "session_turns": (
        [
            (
                "append_turns",
                {"session": "s", "turns": [{"role": "user", "content": "t"}] * 5},
            )
        ],
        [_turn("s", 1) for _ in range(6)],
    ),
    "session_bytes": ([_turn("s", 201)], [_turn("s", 60), _turn("s", 60)]),
    "transcript_bytes": (
        [_turn("a", 100), _turn("b", 100), _turn("c", 100)],
        [_turn("a", 100), _turn("b", 100)],
    ),
    "sender_bytes": (
        [_turn("webhook:bob/a", 40), _turn("webhook:bob/b", 40)],
        # (the senders together within half of max_transcript_bytes, their part of it)
        [_turn("webhook:bob/a", 40), _turn("webhook:eve/a", 20)],
    ),
}


@_params("memory_store")
async def test_memory_quota(cell: Cell, tmp_path: Path) -> None:
    alias = PROFILES[cell.profile][0]
    store = MemoryStore(tmp_path / "memory", map_size=1 << 22)
    service = MemoryService(store, MemoryGrants({}, quotas={alias: QUOTA}))
    scope = service.scope_for(alias)
    over, within = ATTEMPTS[cell.action]
    writes = over if cell.extra["over"] else within
    observed = Observed("allowed")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.run_committer)
            for n, (op, body) in enumerate(writes):
                try:
                    await handled(service, scope, op, body)
                    observed = Observed("allowed")
                except MemoryServiceError as exc:
                    observed = Observed("refused", exc.code, exc.detail)
                    assert n == len(writes) - 1, f"write {n} of {cell.case} refused: {exc}"
            nursery.cancel_scope.cancel()
        usage = store.usage(alias)
        assert usage == store.recounted_usage(alias)
        if cell.action == "bytes" and not cell.extra["over"]:
            assert usage.record_bytes == record_bytes("big", "c" * 10)
    finally:
        store.close()
    if observed.code == "quota_exceeded":
        kinds = {kind for (who, kind) in service.quota_refusals if who == alias}
        assert kinds == {cell.action}, f"refused by {kinds}, not {cell.action}"
    record(cell, observed)
