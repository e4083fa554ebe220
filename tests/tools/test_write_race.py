"""Finding 7: a write raced against a directory <-> symlink swap created or truncated files
in another agent's workspace before the re-check refused it. Now the write walks from the
workspace without following symlinks, so nothing outside is ever touched: 200 writes
against a process that swaps the directory as fast as it can, without Landlock (the tool
alone) and with it (a process that applied the agent's Landlock plan)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from zeroclaw.policy import PathRules, abi_version, rules_for
from zeroclaw.tools import file_write

WRITES = 200
# Without Landlock, more: the old code's window was narrow, and a regression test should
# see it (it hit about 1 in 200 here; 1000 writes catch it with near certainty).
WRITES_TOOL_ONLY = 1000

# Swaps `d` (a directory) and `d_link` (a symlink to beta's workspace) atomically, forever.
SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
a, b = (os.fsencode(p) for p in sys.argv[1:3])
print("swapping", flush=True)
while True:
    libc.renameat2(-100, a, -100, b, RENAME_EXCHANGE)
"""

# The writer under the agent's Landlock plan, in its own process.
LANDLOCKED_WRITER = """
import json, sys
from collections import Counter
from zeroclaw.policy import apply_sandbox, plan_for, rules_for
from zeroclaw.tools import file_write
alpha, beta, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
apply_sandbox(plan_for(alpha))
rules = rules_for(alpha, workspace_only=True, may_write=True, other_workspaces=[beta])
codes = Counter()
for i in range(count):
    path = ("d/keep.txt", f"d/n{i}.txt", f"d/s{i}/f.txt")[i % 3]
    codes[str(file_write(rules, path, "x").error_code)] += 1
print(json.dumps(codes))
"""


@dataclass
class Race:
    alpha: Path
    beta: Path

    def rules(self) -> PathRules:
        return rules_for(
            str(self.alpha), workspace_only=True, may_write=True, other_workspaces=[str(self.beta)]
        )

    def beta_untouched(self) -> None:
        assert sorted(p.name for p in self.beta.iterdir()) == ["keep.txt"]
        assert (self.beta / "keep.txt").read_text() == "beta's, not to be truncated"


def target(i: int) -> str:
    """An existing name (truncation), a new name (creation), a new directory (mkdir)."""
    return ("d/keep.txt", f"d/n{i}.txt", f"d/s{i}/f.txt")[i % 3]


@pytest.fixture
def race(tmp_path: Path) -> Iterator[Race]:
    alpha = tmp_path / "ws" / "alpha"
    beta = tmp_path / "ws" / "beta"
    (alpha / "d").mkdir(parents=True)
    beta.mkdir(parents=True)
    (beta / "keep.txt").write_text("beta's, not to be truncated")
    (alpha / "d_link").symlink_to(beta)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(alpha / "d"), str(alpha / "d_link")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "swapping\n"
        yield Race(alpha, beta)
    finally:
        swapper.kill()
        swapper.wait()


@pytest.mark.parametrize("use_openat2", [True, False], ids=["openat2", "walk"])
def test_raced_writes_touch_nothing_outside_without_landlock(race: Race, use_openat2: bool) -> None:
    rules = race.rules()
    codes = Counter(
        str(file_write(rules, target(i), "x", use_openat2=use_openat2).error_code)
        for i in range(WRITES_TOOL_ONLY)
    )
    race.beta_untouched()
    # Every write either landed in alpha's workspace or was refused with a typed code.
    assert set(codes) <= {"None", "path_not_allowed", "not_found", "not_a_directory"}, codes


@pytest.mark.skipif(abi_version() < 1, reason="no Landlock on this kernel")
def test_raced_writes_touch_nothing_outside_with_landlock(race: Race) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            LANDLOCKED_WRITER,
            str(race.alpha),
            str(race.beta),
            str(WRITES),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    codes = json.loads(done.stdout)
    race.beta_untouched()
    assert sum(codes.values()) == WRITES
    assert set(codes) <= {"None", "path_not_allowed", "not_found", "not_a_directory"}, codes
