"""Read every page of a memory store once, in a child process, before the daemon opens it.

LMDB has no page checksums: a damaged page is found when it is read, and some damage makes
LMDB abort() the reading process (seen: a random page of garbage aborts ~1 read in 20).
So the walk runs in a short-lived child; whatever it dies of, the parent reports a damaged
store with a hint, and the daemon never maps a store it could not read end to end.

The child: `python -m zeroclaw.memory._verify PATH`; exit 0 when every database reads,
1 with the problem on stderr, anything else (a signal) when LMDB crashed on a page.
"""

from __future__ import annotations

import sys
from pathlib import Path

VERIFY_TIMEOUT_SECS = 600.0
EXIT_DAMAGED = 1


def walk_store(path: Path) -> str | None:
    """Read every key and value of every database; the problem found, or None."""
    import lmdb

    from .._lmdb import Unusable, open_checked
    from ._store import MAX_DBS

    if not (path / "data.mdb").exists():
        return None
    try:
        env = open_checked(path, readonly=True, lock=False, max_dbs=MAX_DBS, subdir=True)
    except Unusable as exc:
        return str(exc)
    try:
        with env.begin() as txn:
            names = [name for name, _ in txn.cursor()]
            for name in names:
                if not name.startswith(b"m/"):
                    continue
                db = env.open_db(name, txn=txn, create=False)
                for _key, value in txn.cursor(db=db):
                    len(value)  # values may live on overflow pages: touch them
    except lmdb.Error as exc:
        return f"a page cannot be read ({exc})"
    finally:
        env.close()
    return None


def verify_in_child(path: Path, timeout: float = VERIFY_TIMEOUT_SECS) -> None:
    """Raise StoreCorrupt unless a child read the whole store without a problem."""
    from .._lmdb import walk_in_child
    from ._store import StoreCorrupt

    if not (path / "data.mdb").exists():
        return  # a new store: nothing to read
    problem = walk_in_child(["zeroclaw.memory._verify", str(path)], timeout)
    if problem is not None:
        raise StoreCorrupt(path, problem)


def main(argv: list[str]) -> int:
    problem = walk_store(Path(argv[1]))
    if problem is None:
        return 0
    print(problem, file=sys.stderr)
    return EXIT_DAMAGED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
