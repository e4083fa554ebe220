"""The pin store on disk: what it writes reads back the same, a write killed half-way leaves
the old book or the new one, and a damaged file is reported, never read as an empty book
(which would trust every next schema as first seen)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PATIENCE, REPO
from zeroclaw.pins import PinBook, PinKey, PinStore, PinStoreCorrupt, ToolSeen, pins_path


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def book_of(tools: int, variant: str = "a") -> PinBook:
    book = PinBook()
    listing = [
        ToolSeen(f"t{i}", digest(f"{variant}{i}"), i % 2 == 0, "d" * 50) for i in range(tools)
    ]
    book.observe("alpha", "git", listing, now=1.0)
    return book


def test_a_saved_book_loads_the_same(tmp_path: Path) -> None:
    store = PinStore(pins_path(tmp_path))
    book = book_of(5)
    book.observe("alpha", "git", [ToolSeen("t0", digest("changed"), True)], now=2.0)
    book.trust("git", tool="t0", now=3.0)
    book.observe("beta", "time", [ToolSeen("now", digest("n"))], now=4.0)
    store.save(book)
    assert store.load().items() == book.items()
    mode = stat.S_IMODE(os.stat(store.path).st_mode)
    assert mode == 0o600 and stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700


def test_no_file_is_an_empty_book(tmp_path: Path) -> None:
    assert len(PinStore(pins_path(tmp_path)).load()) == 0


def test_leftovers_of_a_cut_write_are_removed_at_load(tmp_path: Path) -> None:
    store = PinStore(pins_path(tmp_path))
    store.save(book_of(2))
    leftover = store.path.with_name(".pins.json.zc-0123456789ab")
    leftover.write_text('{"version": 1, "pins": [')
    assert len(store.load()) == 2
    assert not leftover.exists()


def entry(**overrides: object) -> dict[str, object]:
    d = digest("x")
    return {
        "agent": "alpha",
        "server": "git",
        "tool": "status",
        "first_digest": d,
        "trusted_digest": d,
        "trusted_read_only": False,
        "latest_digest": d,
        "read_only": False,
        "first_seen": 1.0,
        **overrides,
    }


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "not a pin book"),
        (b"\x00\xff garbage", "not a pin book"),
        (b'{"version": 1, "pins": [', "not a pin book"),  # a torn write
        (json.dumps({"version": 2, "pins": []}).encode(), "format 2"),
        (json.dumps({"version": 1, "pins": [entry(trusted_digest="0" * 63)]}).encode(), "digest"),
        (json.dumps({"version": 1, "pins": [entry(), entry()]}).encode(), "pinned twice"),
        (json.dumps({"version": 1, "pins": [entry(read_only="yes")]}).encode(), "not a pin book"),
        (json.dumps({"pins": []}).encode(), "not a pin book"),
    ],
)
def test_a_damaged_file_is_reported_with_the_fix(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    store = PinStore(pins_path(tmp_path))
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(content)
    with pytest.raises(PinStoreCorrupt) as damaged:
        store.load()
    message = str(damaged.value)
    assert problem in message
    assert str(store.path) in message and "move it aside" in message
    assert store.path.read_bytes() == content  # left for the operator, never replaced


def test_a_file_with_more_pins_than_the_bounds_is_damaged(tmp_path: Path) -> None:
    store = PinStore(pins_path(tmp_path))
    store.path.parent.mkdir(parents=True)
    pins = [entry(tool=f"t{i}") for i in range(600)]
    store.path.write_text(json.dumps({"version": 1, "pins": pins}))
    with pytest.raises(PinStoreCorrupt, match="more pins than the book holds"):
        store.load()


WRITER = """
import hashlib, sys
from pathlib import Path
from zeroclaw.pins import PinBook, PinStore, ToolSeen

store = PinStore(Path(sys.argv[1]))
for generation in range(1_000_000):
    book = PinBook()
    digest = hashlib.sha256(str(generation).encode()).hexdigest()
    book.observe("alpha", "git", [ToolSeen(f"t{i}", digest) for i in range(400)], now=generation)
    store.save(book)
    print(generation, flush=True)
"""


def test_a_write_killed_at_any_moment_leaves_a_whole_book(tmp_path: Path) -> None:
    """kill -9 of a process that rewrites the book as fast as it can: each time, the file
    loads, as one generation's book whole (every tool of one digest)."""
    path = pins_path(tmp_path)
    for round_ in range(4):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert writer.stdout is not None
        # Killed after a few writes it reported, so mid-way through one of the next.
        for _ in range(3 + round_ * 2):
            assert writer.stdout.readline(), "the writer ended early"
        writer.send_signal(signal.SIGKILL)
        writer.wait(PATIENCE)
        writer.stdout.close()
        book = PinStore(path).load()
        digests = {pin.latest_digest for _, pin in book.items()}
        assert len(book) == 400 and len(digests) == 1
        assert book.get(PinKey("alpha", "git", "t0")) is not None
    assert not list(path.parent.glob(".pins.json.zc-*"))  # the last load cleared any leftover


# --- doctor's look at the store ----------------------------------------------------------


def test_doctor_reports_the_pin_store_without_touching_it(tmp_path: Path) -> None:
    from dataclasses import replace

    from tests.ops.test_doctor import facts
    from zeroclaw.ops._doctor import McpPinFacts, _mcp_pin_facts, check_mcp_pins

    state = tmp_path / "state"
    assert _mcp_pin_facts(state) == McpPinFacts(pins_path(state), False)
    book = book_of(3)
    book.observe("alpha", "git", [ToolSeen("t1", digest("changed"), False)], now=2.0)
    store = PinStore(pins_path(state))
    store.save(book)
    leftover = store.path.with_name(".pins.json.zc-0123456789ab")
    leftover.write_text("cut")
    seen = _mcp_pin_facts(state)
    assert (seen.pinned, seen.withheld, seen.problem) == (3, 1, "")
    assert leftover.exists()  # doctor changes nothing it looks at
    [warned] = check_mcp_pins(replace(facts(), mcp_pins=seen))
    assert (warned.status, "1 withheld" in warned.message) == ("warn", True)
    assert "zeroclaw mcp trust" in warned.fix
    store.path.write_text("{")
    [failed] = check_mcp_pins(replace(facts(), mcp_pins=_mcp_pin_facts(state)))
    assert failed.status == "fail" and "unreadable" in failed.message and failed.fix
    assert check_mcp_pins(facts()) == []  # no agent uses MCP: nothing to say
