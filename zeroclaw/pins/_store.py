"""The pin book on disk: `<state_dir>/mcp/pins.json`, replaced whole on every change.

A JSON file and not an LMDB database: the book is small and bounded (the agents' servers'
tools), changes rarely (a first sight, a change, a trust), has one writer (the daemon) and
is read whole by `config validate` without a daemon; an operator can read and back it up
as text. Written as a fresh file beside it, fsynced, renamed over it, and the directory
fsynced: a crash or `kill -9` leaves the old book or the new one, never a torn one.

A file that does not decode, or breaks the book's rules, is `PinStoreCorrupt` with what is
wrong and the fix. It is never read as an empty book: that would trust every tool's next
schema on first sight, which is exactly the rug pull pins exist to catch.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

from .._atomic import atomic_write
from ._book import (
    DIGEST,
    MAX_SERVERS_PER_AGENT,
    MAX_TOOLS_PER_SERVER,
    BadListing,
    Pin,
    PinBook,
    PinKey,
    PinLimit,
)

PINS_DIR = "mcp"
PINS_FILE = "pins.json"
FORMAT_VERSION = 1
# A file larger than any book within the bounds could be: not read into memory.
MAX_FILE_BYTES = 64 * 1024 * 1024


class PinEntry(Pin, frozen=True, kw_only=True):
    agent: str
    server: str
    tool: str


class PinFile(msgspec.Struct, frozen=True):
    version: int
    pins: tuple[PinEntry, ...] = ()


class PinStoreCorrupt(Exception):
    """The pin file is damaged or is not a pin book; the message says what to do."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"MCP pin store {path} is unreadable: {problem}. MCP tools are withheld until it "
            f"is fixed: put back a copy from your backups, or move it aside (mv {path} "
            f"{path}.damaged) to pin every tool anew at its next sight (its schema then is "
            "trusted as first seen)"
        )


def pins_path(state_dir: Path) -> Path:
    return state_dir / PINS_DIR / PINS_FILE


def encode_book(book: PinBook) -> bytes:
    entries = tuple(
        PinEntry(agent=key.agent, server=key.server, tool=key.tool, **msgspec.structs.asdict(pin))
        for key, pin in book.items()
    )
    return msgspec.json.format(msgspec.json.encode(PinFile(FORMAT_VERSION, entries)), indent=1)


def decode_book(path: Path, data: bytes) -> PinBook:
    """The book in `data` (the content of `path`); PinStoreCorrupt saying why not."""
    try:
        document = msgspec.json.decode(data, type=PinFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PinStoreCorrupt(path, f"not a pin book ({exc})") from None
    if document.version != FORMAT_VERSION:
        raise PinStoreCorrupt(path, f"format {document.version}, this zeroclaw reads only 1")
    for entry in document.pins:
        for digest in (entry.first_digest, entry.trusted_digest, entry.latest_digest):
            if not DIGEST.match(digest):
                raise PinStoreCorrupt(
                    path, f"{entry.agent}/{entry.server}/{entry.tool}: a bad digest"
                )
    try:
        return PinBook(
            (
                (
                    PinKey(e.agent, e.server, e.tool),
                    Pin(**{f: getattr(e, f) for f in Pin.__struct_fields__}),
                )
                for e in document.pins
            ),
            max_tools=MAX_TOOLS_PER_SERVER,
            max_servers=MAX_SERVERS_PER_AGENT,
        )
    except (BadListing, PinLimit) as exc:
        raise PinStoreCorrupt(path, str(exc)) from None


class PinStore:
    """The file of one daemon's pin book. Blocking I/O: the service calls it on a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.exists()

    def signature(self) -> tuple[int, int, int] | None:
        """What changes when the file is replaced (None: there is none)."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def load(self) -> PinBook:
        """The book on disk; an empty one if there is no file yet. PinStoreCorrupt if it
        cannot be read. Leftovers of a write a crash interrupted are removed."""
        self._remove_leftovers()
        book = self.read()
        return PinBook() if book is None else book

    def read(self) -> PinBook | None:
        """The book on disk, None if there is no file; changes nothing (doctor's and
        validate's look). PermissionError as it is: not ours to read is not damage."""
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except PermissionError:
            raise
        except OSError as exc:
            raise PinStoreCorrupt(self.path, f"cannot be read ({exc.strerror})") from None
        if len(data) > MAX_FILE_BYTES:
            raise PinStoreCorrupt(self.path, f"larger than {MAX_FILE_BYTES} bytes")
        return decode_book(self.path, data)

    def save(self, book: PinBook) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self.path, encode_book(book), mode=0o600)
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)  # the rename itself, durable
        finally:
            os.close(fd)

    def _remove_leftovers(self) -> None:
        # `atomic_write`'s fresh files are `.<name>.zc-<hex>`: one left is a write a crash cut.
        with contextlib.suppress(FileNotFoundError):
            for leftover in self.path.parent.glob(f".{self.path.name}.zc-*"):
                with contextlib.suppress(OSError):
                    leftover.unlink()
