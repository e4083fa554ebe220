"""HEARTBEAT.md: which lines are open items, and how the daemon reads a file the agent
controls (a symlink, a FIFO, a second hard link, a huge file: none is read)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import PATIENCE, REPO
from zeroclaw.schedules import HEARTBEAT_FILE, open_items
from zeroclaw.schedules._heartbeat import (
    MAX_BYTES,
    Unreadable,
    heartbeat_text,
    read_heartbeat,
    without_comments,
)


def test_open_items_are_unchecked_list_items() -> None:
    text = """# Heartbeat

Some prose that is not an item.
- [ ] water the plants
- [x] pay the rent
* [X] done too
+ call Bob
1. renew the certificate
  - [ ]   indented and spaced
<!-- - [ ] a commented item
  - [ ] still commented -->
-not an item
"""
    assert open_items(text) == [
        "water the plants",
        "call Bob",
        "renew the certificate",
        "indented and spaced",
    ]
    assert open_items("") == [] and open_items("# only a heading\n- [x] all done\n") == []


def test_the_turns_text_lists_them_bounded() -> None:
    text = heartbeat_text([f"item {i}" for i in range(150)])
    assert "150 open item(s)" in text and "- [ ] item 99" in text and "item 100" not in text
    assert "(and 50 more" in text


def test_a_plain_file_is_read(tmp_path: Path) -> None:
    (tmp_path / HEARTBEAT_FILE).write_text("- [ ] a")
    assert read_heartbeat(tmp_path) == "- [ ] a"
    assert read_heartbeat(tmp_path / "missing-workspace") is None


def test_no_file_is_nothing_to_do(tmp_path: Path) -> None:
    assert read_heartbeat(tmp_path) is None


def test_a_symlink_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("- [ ] the daemon's secret")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / HEARTBEAT_FILE).symlink_to(secret)
    found = read_heartbeat(workspace)
    assert isinstance(found, Unreadable) and "symlink" in found.detail


def test_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / HEARTBEAT_FILE)
    found = read_heartbeat(tmp_path)  # would block forever if it opened for reading blocking
    assert isinstance(found, Unreadable) and "not a regular file" in found.detail


def test_a_second_hard_link_is_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "daemon-file"
    elsewhere.write_text("- [ ] x")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.link(elsewhere, workspace / HEARTBEAT_FILE)
    found = read_heartbeat(workspace)
    assert isinstance(found, Unreadable) and "hard link" in found.detail


@pytest.mark.parametrize("size", [MAX_BYTES + 1, 8 << 30])
def test_a_huge_file_is_not_read(tmp_path: Path, size: int) -> None:
    with open(tmp_path / HEARTBEAT_FILE, "wb") as f:
        f.truncate(size)  # sparse: no disk is used
    found = read_heartbeat(tmp_path)
    assert isinstance(found, Unreadable) and "larger than" in found.detail


@given(st.text(alphabet="<!->x\n", max_size=60))
def test_comments_are_removed_as_html_reads_them(text: str) -> None:
    """The shortest `<!-- ... -->` from each opening, an unclosed one left as it is (the
    lazy regex's reading, the oracle here)."""
    assert without_comments(text) == re.sub(r"<!--.*?-->", "", text, flags=re.S)


def test_a_file_of_unclosed_comments_is_read_in_one_pass() -> None:
    """An agent's HEARTBEAT.md of nothing but '<!--' (64 KiB of it held the daemon's loop
    for seconds: each opening was tried to the end of the file). A megabyte of it, in a
    child process: quadratic, it would not end within PATIENCE."""
    code = (
        "from zeroclaw.schedules import open_items\n"
        "assert open_items('<!--' * 250_000 + '\\n- [ ] after') == ['after']"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, timeout=PATIENCE, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
