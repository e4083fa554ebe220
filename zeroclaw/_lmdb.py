"""Checks an LMDB data file must pass before the daemon maps it, shared by its stores.

LMDB has no checksums and reads through a memory map: a file emptied or truncated under it
is found only when a read faults (SIGBUS), or is silently started over as an empty store.
These checks look at the file itself first; `walk` reads every page once, meant for a
short-lived child (`python -m zeroclaw._lmdb PATH DB...`), since LMDB abort()s on some
damaged pages. lmdb is imported only by the walk, and the child imports nothing else of
ours (a store's own package would cost it a second of imports under load).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

if TYPE_CHECKING:
    import lmdb

_FULL_MESSAGES = tuple(os.strerror(code) for code in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT))


def disk_full(exc: Exception) -> bool:
    """An LMDB error that says the disk (or the quota) is full. The C binding gives only
    "what: strerror(errno)", so the errno is read from the text."""
    import lmdb

    text = str(exc)
    return isinstance(exc, lmdb.DiskError) or any(text.endswith(m) for m in _FULL_MESSAGES)


def data_file_problem(data: Path, page_size: int) -> str | None:
    """What is wrong with data.mdb before LMDB maps it (pure but for one stat)."""
    try:
        size = data.stat().st_size
    except FileNotFoundError:
        return None  # a new store: LMDB creates it
    if size == 0:
        # LMDB would silently start an empty store over it: everything gone without a word.
        return "data.mdb is empty (zero bytes)"
    if size < 2 * page_size:
        return f"data.mdb is {size} bytes, shorter than its two header pages"
    return None


def committed_size_problem(env: lmdb.Environment, data: Path) -> str | None:
    """The file must hold every page the last commit uses: a read past its end SIGBUSes."""
    psize = int(env.stat()["psize"])
    needed = (int(env.info()["last_pgno"]) + 1) * psize
    size = data.stat().st_size
    if size < needed:
        return f"data.mdb is {size} bytes but its last commit uses {needed} (it was truncated)"
    return None


class OpenOptions(TypedDict, total=False):
    """The `lmdb.open` options our stores pass."""

    map_size: int
    max_dbs: int
    readonly: bool
    lock: bool
    subdir: bool
    sync: bool
    metasync: bool


class Unusable(Exception):
    """The store's data file is not one LMDB can map safely; the message says why (each
    store raises it again as its own `...Corrupt`)."""


def open_checked(path: Path, **options: Unpack[OpenOptions]) -> lmdb.Environment:
    """`lmdb.open(path, **options)` between the checks every store makes: the data file's
    size before it is mapped, the pages its last commit uses after. Unusable otherwise."""
    import lmdb

    data = path / "data.mdb"
    problem = data_file_problem(data, os.sysconf("SC_PAGE_SIZE"))
    if problem is not None:
        raise Unusable(problem)
    try:
        env = lmdb.open(str(path), **options)
    except lmdb.Error as exc:  # not an LMDB file, a bad header, a version mismatch
        raise Unusable(f"LMDB cannot open it ({exc})") from None
    try:
        problem = committed_size_problem(env, data)
    except lmdb.Error as exc:
        problem = f"a page cannot be read ({exc})"
    if problem is not None:
        env.close()
        raise Unusable(problem)
    return env


# Enough for a store whose databases are named by namespace (memory: one per agent).
WALK_MAX_DBS = 8192


def walk(path: Path, names: Sequence[str]) -> str | None:
    """Read every key and value of the named databases once; the problem found, or None.
    A name ending in `*` stands for every database whose name starts with the rest."""
    import lmdb

    prefixes = tuple(name[:-1].encode() for name in names if name.endswith("*"))
    exact = {name.encode() for name in names if not name.endswith("*")}
    try:
        env = open_checked(path, readonly=True, lock=False, max_dbs=WALK_MAX_DBS)
    except Unusable as exc:
        return str(exc)
    try:
        with env.begin() as txn:
            present = [name for name, _ in txn.cursor()]
            for name in present:
                if name not in exact and not (prefixes and name.startswith(prefixes)):
                    continue
                db = env.open_db(name, txn=txn, create=False)
                for _key, value in txn.cursor(db=db):
                    len(value)  # values may live on overflow pages: touch them
    except lmdb.Error as exc:
        return f"a page cannot be read ({exc})"
    finally:
        env.close()
    return None


def walk_in_child(module_argv: Sequence[str], timeout: float) -> str | None:
    """Run a walk (`python -m MODULE ARGS`, exit 0 or 1 with the problem on stderr) in a
    short-lived child: its problem, or None. Whatever the child dies of is a damaged store,
    never a crashed daemon (LMDB abort()s on some damaged pages)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", *module_argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"reading it end to end took more than {timeout:g}s (a page cycle?)"
    if done.returncode == 0:
        return None
    if done.returncode == 1:
        lines = done.stderr.strip().splitlines()
        return lines[-1] if lines else "unreadable"
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return f"LMDB crashed ({name}) reading a damaged page"
    return f"the check failed (exit {done.returncode}): {done.stderr[-300:]}"


def main(argv: Sequence[str]) -> int:
    """Exit 0 when every page reads, 1 with the problem on stderr."""
    problem = walk(Path(argv[1]), argv[2:])
    if problem is None:
        return 0
    print(problem, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
