"""The usage ledger on a real LMDB: sums across batches, scans by day and agent, saturation,
a reader beside no daemon, one writer, damage refused whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.usage import (
    LedgerCorrupt,
    LedgerKey,
    LedgerLocked,
    Tally,
    UsageLedger,
)
from zeroclaw.usage._prices import MAX_COST


def key(day: str = "2026-12-05", agent: str = "alpha", origin: str = "operator") -> LedgerKey:
    return LedgerKey(day, agent, origin, "default", "offline.default")


def test_tallies_add_up_across_batches_and_scan_from_a_day_by_agent(tmp_path: Path) -> None:
    with UsageLedger(tmp_path / "usage") as ledger:
        ledger.add({key(): Tally(turns=1, steps=1, input_tokens=10, cost=5)})
        ledger.add(
            {
                key(): Tally(steps=1, input_tokens=5, cost=7),
                key("2026-12-04"): Tally(turns=1),
                key("2026-12-06", "beta"): Tally(turns=2),
            }
        )
        rows = dict(ledger.rows("2026-12-05"))
        assert rows == {
            key(): Tally(turns=1, steps=2, input_tokens=15, cost=12),
            key("2026-12-06", "beta"): Tally(turns=2),
        }
        assert [k.agent for k, _ in ledger.rows("", agent="beta")] == ["beta"]
        assert [k.day for k, _ in ledger.rows("", until="2026-12-05")] == [
            "2026-12-04",
            "2026-12-05",
        ]


def test_sums_saturate_instead_of_wrapping_or_failing(tmp_path: Path) -> None:
    with UsageLedger(tmp_path / "usage") as ledger:
        for _ in range(3):
            ledger.add({key(): Tally(cost=MAX_COST - 1, output_tokens=MAX_COST)})
        [(_, tally)] = ledger.rows()
        assert tally.cost == MAX_COST and tally.output_tokens == MAX_COST


def test_a_reader_beside_no_daemon_reads_and_a_missing_ledger_is_empty(tmp_path: Path) -> None:
    with UsageLedger(tmp_path / "nothing", readonly=True) as empty:
        assert empty.rows() == []
    with UsageLedger(tmp_path / "usage") as ledger:
        ledger.add({key(): Tally(turns=1)})
    with UsageLedger(tmp_path / "usage", readonly=True) as reader:
        assert reader.rows() == [(key(), Tally(turns=1))]


def test_only_one_writer_opens_it(tmp_path: Path) -> None:
    with UsageLedger(tmp_path / "usage"), pytest.raises(LedgerLocked, match="only one daemon"):
        UsageLedger(tmp_path / "usage")


@pytest.mark.parametrize("damage", [b"", b"not an lmdb file" * 4])
def test_a_damaged_ledger_is_refused_whole_with_the_fix(tmp_path: Path, damage: bytes) -> None:
    path = tmp_path / "usage"
    path.mkdir()
    (path / "data.mdb").write_bytes(damage)
    with pytest.raises(LedgerCorrupt, match="move the directory aside"):
        UsageLedger.open_verified(path)


def test_a_truncated_ledger_is_found_before_it_is_mapped(tmp_path: Path) -> None:
    path = tmp_path / "usage"
    with UsageLedger(path) as ledger:
        ledger.add({key(origin=f"webhook.ops:s{n}"): Tally(turns=1) for n in range(2000)})
    data = path / "data.mdb"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(LedgerCorrupt):
        UsageLedger.open_verified(path)


@given(st.lists(st.text(max_size=8), min_size=5, max_size=5))
def test_a_key_reads_back_as_written_whatever_its_parts_hold(parts: list[str]) -> None:
    """An outside sender's name with NUL or '%' never shifts the other parts (it could
    otherwise hide its usage from every reader)."""
    written = LedgerKey(*parts)
    assert LedgerKey.decode(written.encode()) == written
