"""Read every page of a memory store once, in a child process, before the daemon opens it.

LMDB has no page checksums: a damaged page is found when it is read, and some damage makes
LMDB abort() the reading process (seen: a random page of garbage aborts ~1 read in 20).
So the walk runs in a short-lived child; whatever it dies of, the parent reports a damaged
store with a hint, and the daemon never maps a store it could not read end to end.

The child is the stores' common walk, `python -m zeroclaw._lmdb PATH m/*`: every namespace
database (`m/<namespace>`). It imports lmdb and nothing of this package.
"""

from __future__ import annotations

from pathlib import Path

VERIFY_TIMEOUT_SECS = 600.0
# The namespace databases, as `_lmdb.walk` names a family of them.
NAMESPACE_DBS = "m/*"


def verify_in_child(path: Path, timeout: float = VERIFY_TIMEOUT_SECS) -> None:
    """Raise StoreCorrupt unless a child read the whole store without a problem."""
    from .._lmdb import walk_in_child
    from ._store import StoreCorrupt

    if not (path / "data.mdb").exists():
        return  # a new store: nothing to read
    problem = walk_in_child(["zeroclaw._lmdb", str(path), NAMESPACE_DBS], timeout)
    if problem is not None:
        raise StoreCorrupt(path, problem)
