"""Durable stores through the daemon (group commit) and recall latency over 100k records."""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import lmdb

from zeroclaw.memory import MemoryStore, OperatorScope, Scope, WriteOp
from zeroclaw.memory._context import fit_memories
from zeroclaw.turns import AppendTurnsArgs, StoreArgs, TurnArg

from ._harness import Result, p50_p99, result
from .bench_router import _run_daemon_plan

WRITERS = 8
# The wide figure: as many writers as one agent may have calls open to one service (the
# router's MAX_CALLS_PER_SENDER); 64 from one agent are answered `busy` beyond it.
WIDE_WRITERS = 32
PER_WRITER = 250
RAW_RECORDS = 500
RECALL_RECORDS = 100_000
QUERIES = 300
TURN_WORDS = 12  # a turn's text, as the context recalls for it


def _ours_store_rate(writers: int = WRITERS) -> float:
    data = _run_daemon_plan(
        {
            "writer": {
                "do": "memwrite",
                "count": PER_WRITER * WRITERS // writers,
                "writers": writers,
            }
        },
        wait_for="writer",
    )
    assert not data["errors"], data["errors"][:3]
    return float(data["stores"]) / float(data["seconds"])


def _raw_store_rate() -> float:
    """py-lmdb, one synced commit per record: what durability costs without batching."""
    root = Path(tempfile.mkdtemp(prefix="zcm-", dir="/tmp"))
    try:
        env = lmdb.open(str(root), map_size=1 << 28, sync=True, metasync=True)
        value = b"x" * 120
        started = time.perf_counter()
        for i in range(RAW_RECORDS):
            with env.begin(write=True) as txn:
                txn.put(f"k{i}".encode(), value)
        seconds = time.perf_counter() - started
        env.close()
        return RAW_RECORDS / seconds
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _recall_latency() -> tuple[float, float, float, float, float]:
    """p50/p99 of recall over 100k records, the p50 of a brute-force scan baseline, and,
    for a turn's text (12 words), the p50 of recall alone and of the turn's whole context
    read (ADR 0059: a 40-turn session by an 8000-token budget and the 5 best records within
    1000 tokens, in one read) over the same records."""
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(5000)]
    root = Path(tempfile.mkdtemp(prefix="zcm-", dir="/tmp"))
    store = MemoryStore(root / "m", map_size=1 << 31)
    scope = Scope("bench")
    try:
        for start in range(0, RECALL_RECORDS, 2000):
            ops = [
                WriteOp(scope, StoreArgs(key=f"k{i}", content=" ".join(rng.choices(vocab, k=20))))
                for i in range(start, start + 2000)
            ]
            store.apply_writes(ops)
        queries = [" ".join(rng.choices(vocab, k=2)) for _ in range(QUERIES)]
        samples = []
        for query in queries:
            t = time.perf_counter()
            store.recall(scope, query, limit=10)
            samples.append((time.perf_counter() - t) * 1000)
        turn = [TurnArg("user", " ".join(rng.choices(vocab, k=12))), TurnArg("assistant", "ok")]
        for _ in range(20):
            store.apply_writes([WriteOp(scope, AppendTurnsArgs(session="s", turns=turn))])
        texts = [" ".join(rng.choices(vocab, k=TURN_WORDS)) for _ in range(QUERIES)]
        alone, contexts = [], []
        for text in texts:  # interleaved, so that noise hits both alike
            t = time.perf_counter()
            store.recall(scope, text, limit=5)
            alone.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            _, hits = store.context(scope, "s", history_tokens=8000, query=text, limit=5)
            fit_memories([hit.record for hit in hits], 1000)
            contexts.append((time.perf_counter() - t) * 1000)
        records = list(store.export(OperatorScope(), "bench"))
        scans = []
        for query in queries[:5]:
            words = set(query.split())
            t = time.perf_counter()
            hits = [r for r in records if words & set(r.content.split())]
            hits.sort(key=lambda r: -len(words & set(r.content.split())))
            scans.append((time.perf_counter() - t) * 1000)
        latency = p50_p99(samples)
        return (
            latency["p50"],
            latency["p99"],
            statistics.median(scans),
            statistics.median(alone),
            statistics.median(contexts),
        )
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


def run() -> list[Result]:
    ours = statistics.median(_ours_store_rate() for _ in range(3))
    wide = statistics.median(_ours_store_rate(WIDE_WRITERS) for _ in range(3))
    raw = statistics.median(_raw_store_rate() for _ in range(3))
    p50, p99, scan, alone, context = _recall_latency()
    return [
        result(
            f"durable stores via daemon, {WRITERS} writers",
            ours,
            "stores/s",
            "raw py-lmdb, one synced commit per record",
            raw,
            ">= 3x raw",
        ),
        result(
            f"durable stores via daemon, {WIDE_WRITERS} writers",
            wide,
            "stores/s",
            "raw py-lmdb, one synced commit per record",
            raw,
        ),
        result(
            f"recall p50 over {RECALL_RECORDS} records",
            p50,
            "ms",
            "brute-force scan of the same records (in memory, no index)",
            scan,
            "p50 <= 2 ms",
        ),
        result(
            f"turn context p50 over {RECALL_RECORDS} records (history + recall k=5)",
            context,
            "ms",
            f"recall p50 alone, same {TURN_WORDS}-word texts and records",
            alone,
            "p50 <= 2 ms",
        ),
        result(
            f"recall p99 over {RECALL_RECORDS} records",
            p99,
            "ms",
            "brute-force scan of the same records (in memory, no index)",
            scan,
        ),
    ]
