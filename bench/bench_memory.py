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
from zeroclaw.turns import StoreArgs

from ._harness import Result, p50_p99, result
from .bench_router import _run_daemon_plan

WRITERS = 8
PER_WRITER = 250
RAW_RECORDS = 500
RECALL_RECORDS = 100_000
QUERIES = 300


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


def _recall_latency() -> tuple[float, float, float]:
    """p50/p99 of recall over 100k records, and the p50 of a brute-force scan baseline."""
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
        records = list(store.export(OperatorScope(), "bench"))
        scans = []
        for query in queries[:5]:
            words = set(query.split())
            t = time.perf_counter()
            hits = [r for r in records if words & set(r.content.split())]
            hits.sort(key=lambda r: -len(words & set(r.content.split())))
            scans.append((time.perf_counter() - t) * 1000)
        latency = p50_p99(samples)
        return latency["p50"], latency["p99"], statistics.median(scans)
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


def run() -> list[Result]:
    ours = statistics.median(_ours_store_rate() for _ in range(3))
    wide = statistics.median(_ours_store_rate(64) for _ in range(3))
    raw = statistics.median(_raw_store_rate() for _ in range(3))
    p50, p99, scan = _recall_latency()
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
            "durable stores via daemon, 64 writers",
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
            f"recall p99 over {RECALL_RECORDS} records",
            p99,
            "ms",
            "brute-force scan of the same records (in memory, no index)",
            scan,
        ),
    ]
