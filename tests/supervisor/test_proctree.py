"""What a subreaper kills: pure decisions over a parent map, and the /proc reader."""

from __future__ import annotations

import os
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw._proctree import children_of, orphans, read_parents, subtrees
from zeroclaw.tools._orphans import strays

ME = 100
# 100 is the subreaper; 101 a running command (its child 111 is its own business);
# 102 an orphan with a subtree; 103 an orphan alone; 1 and 50 are unrelated.
TREE = {100: 1, 101: 100, 111: 101, 102: 100, 120: 102, 121: 120, 103: 100, 50: 1, 1: 0}


def test_orphans_are_the_children_that_are_not_kept_with_their_subtrees() -> None:
    assert children_of(TREE, ME) == {101, 102, 103}
    assert orphans(TREE, ME, keep={101}) == {102, 120, 121, 103}
    assert orphans(TREE, ME, keep={101, 102, 103}) == set()
    assert subtrees(TREE, [ME]) == {100, 101, 111, 102, 120, 121, 103}
    assert subtrees(TREE, [999]) == set()  # gone already


@st.composite
def forests(draw: st.DrawFn) -> dict[int, int]:
    size = draw(st.integers(1, 30))
    parents = {1: 0}
    for pid in range(2, size + 2):
        parents[pid] = draw(st.sampled_from(sorted(parents)))
    return parents


@settings(max_examples=50, deadline=None)
@given(parents=forests(), data=st.data())
def test_orphans_never_touch_the_kept_nor_anything_outside_me(
    parents: dict[int, int], data: st.DataObject
) -> None:
    me = data.draw(st.sampled_from(sorted(parents)))
    kids = sorted(children_of(parents, me))
    keep = set(data.draw(st.lists(st.sampled_from(kids), unique=True))) if kids else set()
    doomed = orphans(parents, me, keep)
    kept_trees = subtrees(parents, keep)
    assert me not in doomed and not doomed & kept_trees
    assert doomed <= subtrees(parents, [me])
    assert doomed | kept_trees == subtrees(parents, [me]) - {me}


def test_strays_are_children_not_running() -> None:
    mine = {5, 6, 7}
    assert strays([1, 5, 6, 7, 8], mine.__contains__, keep={6}) == {5, 7}


def test_read_parents_sees_a_real_child() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        parents = read_parents()
        assert parents[child.pid] == os.getpid()
        assert child.pid in children_of(parents, os.getpid())
    finally:
        child.kill()
        child.wait()
