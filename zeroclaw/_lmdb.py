"""Checks an LMDB data file must pass before the daemon maps it, shared by its stores.

LMDB has no checksums and reads through a memory map: a file emptied or truncated under it
is found only when a read faults (SIGBUS), or is silently started over as an empty store.
These checks look at the file itself first. No lmdb import: `env` is an open Environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


def committed_size_problem(env: Any, data: Path) -> str | None:
    """The file must hold every page the last commit uses: a read past its end SIGBUSes."""
    psize = int(env.stat()["psize"])
    needed = (int(env.info()["last_pgno"]) + 1) * psize
    size = data.stat().st_size
    if size < needed:
        return f"data.mdb is {size} bytes but its last commit uses {needed} (it was truncated)"
    return None
