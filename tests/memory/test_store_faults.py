"""A damaged store on disk is a clear error at open, never a crash (SIGBUS, abort) later.

Real LMDB files damaged the ways disks and people damage them: emptied, truncated,
pages overwritten with garbage. The daemon and the CLI open through `open_verified`,
which reads every page in a child first.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import trio

from tests.bodies import handled, write_args
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.memory import (
    MemoryGrants,
    MemoryService,
    MemoryServiceError,
    MemoryStore,
    OperatorScope,
    Scope,
    StoreCorrupt,
    WriteOp,
)

PAGE = os.sysconf("SC_PAGE_SIZE")


def filled_store(path: Path, records: int = 120) -> Path:
    store = MemoryStore(path, map_size=1 << 24)
    ops = [
        WriteOp(
            Scope(f"a{i % 3}"), write_args("store", {"key": f"k{i}", "content": f"note {i} " * 40})
        )
        for i in range(records)
    ]
    store.apply_writes(ops)
    assert all(op.error is None for op in ops)
    store.close()
    return path


def read_everything(store: MemoryStore) -> int:
    return sum(1 for ns in ("a0", "a1", "a2") for _ in store.export(OperatorScope(), ns))


def test_an_intact_store_opens_verified(tmp_path: Path) -> None:
    store = MemoryStore.open_verified(filled_store(tmp_path / "m"))
    try:
        assert read_everything(store) == 120
    finally:
        store.close()


def test_a_zero_length_data_file_is_refused_not_silently_empty(tmp_path: Path) -> None:
    path = filled_store(tmp_path / "m")
    (path / "data.mdb").write_bytes(b"")
    for opener in (MemoryStore, MemoryStore.open_verified):
        with pytest.raises(StoreCorrupt, match="empty"):
            opener(path)
    assert (path / "data.mdb").stat().st_size == 0  # nothing was written over it


def test_a_truncated_data_file_is_refused_before_anything_is_mapped(tmp_path: Path) -> None:
    path = filled_store(tmp_path / "m")
    data = path / "data.mdb"
    os.truncate(data, data.stat().st_size // 2)
    # Reading the missing half through the map would SIGBUS this test process.
    for opener in (MemoryStore, MemoryStore.open_verified):
        with pytest.raises(StoreCorrupt, match="truncated") as caught:
            opener(path)
        assert f"mv {path} {path}.damaged" in str(caught.value)


def test_every_damaged_page_is_found_at_open_or_reads_intact(tmp_path: Path) -> None:
    """Overwrite pages in turn with garbage: open_verified either refuses the store
    or everything in it still reads (the page was free). LMDB itself aborts on some of
    these pages, which is why the walk runs in a child."""
    good = filled_store(tmp_path / "good", records=30)
    pages = (good / "data.mdb").stat().st_size // PAGE
    rng = random.Random(7)
    refused = 0
    sample = rng.sample(range(2, pages), 12)  # 0 and 1 are the meta pages
    for page in sample:
        damaged = tmp_path / f"p{page}"
        damaged.mkdir()
        data = bytearray((good / "data.mdb").read_bytes())
        data[page * PAGE : (page + 1) * PAGE] = rng.randbytes(PAGE)
        (damaged / "data.mdb").write_bytes(bytes(data))
        try:
            store = MemoryStore.open_verified(damaged)
        except StoreCorrupt:
            refused += 1
            continue
        try:
            assert read_everything(store) == 30
        finally:
            store.close()
    assert refused > len(sample) // 2  # most pages are in use


def test_a_page_damaged_after_open_fails_the_request_not_the_service(tmp_path: Path) -> None:
    path = filled_store(tmp_path / "m")
    store = MemoryStore.open_verified(path)
    # Damage every page's type flags behind the open store's map (MAP_SHARED sees it).
    with open(path / "data.mdb", "r+b") as fh:
        size = os.fstat(fh.fileno()).st_size
        for page in range(2, size // PAGE):
            fh.seek(page * PAGE + 10)
            fh.write(b"\x00\x00")

    async def main() -> None:
        service = MemoryService(store, MemoryGrants({}))
        with pytest.raises(MemoryServiceError) as caught:
            await handled(service, OperatorScope(), "export", {"agent": "a0"})
        assert caught.value.code == "storage_error"
        with pytest.raises(MemoryServiceError) as caught:
            await handled(service, Scope("a1"), "recall", {"query": "note"})
        assert caught.value.code == "storage_error"

    try:
        trio.run(main)
    finally:
        store.close()


def test_daemon_with_a_truncated_store_exits_1_with_a_hint(root: Path) -> None:
    doc = make_config(root, {"alpha": agent_entry()})
    memory = filled_store(root / "state" / "memory")
    data = memory / "data.mdb"
    os.truncate(data, data.stat().st_size // 2)
    daemon = Daemon(root, doc)
    daemon.start(wait_ready=False)
    assert daemon.wait_exit(timeout=30) == 1
    log = daemon.log_text()
    assert "damaged" in log and "truncated" in log and f"mv {memory}" in log
    assert "Traceback" not in log


def test_cli_on_an_emptied_store_exits_1_with_a_hint(root: Path) -> None:
    doc = make_config(root, {"alpha": agent_entry()})
    memory = filled_store(root / "state" / "memory")
    (memory / "data.mdb").write_bytes(b"")
    daemon = Daemon(root, doc)  # not started: the CLI opens the store itself
    result = daemon.cli("memory", "list", "--agent", "alpha")
    assert result.returncode == 1, result.stderr
    assert "is empty" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (("--limit", str(2**70)), "--limit"),
        (("--limit", "0"), "--limit"),
        (("--since", "nan"), "--since"),
        (("--until", "inf"), "--until"),
    ],
)
def test_memory_list_refuses_unusable_numbers_as_usage_errors(
    root: Path, args: tuple[str, ...], word: str
) -> None:
    daemon = Daemon(root, make_config(root, {"alpha": agent_entry()}))
    result = daemon.cli("memory", "list", "--agent", "alpha", *args)
    assert result.returncode == 2 and word in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "internal" not in result.stderr


def test_service_refuses_non_finite_times(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")

    async def main() -> None:
        service = MemoryService(store, MemoryGrants({}))
        for bad in (float("nan"), float("inf")):
            with pytest.raises(MemoryServiceError, match="finite"):
                await handled(service, OperatorScope(), "list", {"agents": ["a"], "since": bad})

    try:
        trio.run(main)
    finally:
        store.close()
