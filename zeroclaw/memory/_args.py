"""One argument struct per memory operation, decoded from a request body with msgspec.

A body comes from an agent (through the router) or from the operator (control socket, or
the CLI without a daemon); whatever it holds, `decode_args` returns the operation's struct
or raises MemoryServiceError("bad_request") saying which field is wrong. Fields a struct
does not name are ignored, so nothing in a body can name the namespace a write lands in:
writes have no such field, and the service takes the namespace from the scope.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal, get_args

import msgspec

from ._errors import MemoryServiceError
from ._records import MAX_KEY_BYTES, MAX_SESSION_BYTES

MAX_LIMIT = 1000  # records or hits one list/recall returns
MAX_TURNS = 16  # turns in one append_turns (a user message and its answer, with tool turns)
# Ids are 26 characters and aliases at most 32: anything longer names nothing. Lookups are
# bounded here because LMDB refuses an empty key or one over 511 bytes with an error that
# would read as a storage fault (and, in a write, fail every other write of its batch).
MAX_NAME_BYTES = 64

Bounds = dict[str, tuple[int, int]]  # field -> (fewest, most) UTF-8 bytes, when given

Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)]

MemoryOp = Literal[
    "store",
    "forget",
    "append_turn",
    "append_turns",
    "get",
    "list",
    "recall",
    "session",
    "stats",
    "export",
    "purge",
]
MEMORY_OPS: tuple[str, ...] = get_args(MemoryOp)
WRITE_OPS = frozenset({"store", "forget", "append_turn", "append_turns"})
READ_OPS = frozenset({"get", "list", "recall", "session", "stats", "export"})


class _Args(msgspec.Struct, frozen=True, kw_only=True):
    # A list field's bounds apply to each of its items.
    _BOUNDS: ClassVar[Bounds] = {}

    def __post_init__(self) -> None:
        for name, (low, high) in self._BOUNDS.items():
            value = getattr(self, name)
            for item in value if isinstance(value, list) else [value]:
                size = len(item.encode("utf-8", "replace")) if isinstance(item, str) else low
                if not low <= size <= high:
                    raise ValueError(f"{name!r} must be {low}..{high} bytes")


class StoreArgs(_Args, frozen=True):
    # key, content and category are checked by the store, the one place that writes them
    key: str
    content: str
    category: str = "core"
    session: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"session": (0, MAX_SESSION_BYTES)}


class ForgetArgs(_Args, frozen=True):
    key: str | None = None
    id: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"key": (1, MAX_KEY_BYTES), "id": (1, MAX_NAME_BYTES)}


class AppendTurnArgs(_Args, frozen=True):
    session: str
    role: str  # checked against the store's TURN_ROLES, in the one place that writes turns
    content: str


class TurnArg(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    role: str
    content: str


class AppendTurnsArgs(_Args, frozen=True):
    session: str
    turns: Annotated[list[TurnArg], msgspec.Meta(min_length=1, max_length=MAX_TURNS)]


class GetArgs(_Args, frozen=True):
    key: str | None = None
    id: str | None = None
    agent: str | None = None  # a readable namespace; the caller's own when None
    _BOUNDS: ClassVar[Bounds] = {
        "key": (1, MAX_KEY_BYTES),
        "id": (1, MAX_NAME_BYTES),
        "agent": (0, MAX_NAME_BYTES),
    }


class ListArgs(_Args, frozen=True):
    agents: list[str] | None = None
    category: str | None = None
    since: float | None = None
    until: float | None = None
    limit: Limit = 50
    before: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"agents": (0, MAX_NAME_BYTES)}

    def __post_init__(self) -> None:
        super().__post_init__()
        # msgspec has no finiteness constraint; NaN would compare false everywhere.
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name!r} must be a finite number")


class RecallArgs(_Args, frozen=True):
    query: str = ""
    agents: list[str] | None = None
    limit: Limit = 10
    # An agent's recall tool naming other namespaces searches its own too (ADR 0039).
    with_own: bool = False
    _BOUNDS: ClassVar[Bounds] = {"agents": (0, MAX_NAME_BYTES)}


class SessionArgs(_Args, frozen=True):
    session: str = ""
    limit: Limit = 200
    _BOUNDS: ClassVar[Bounds] = {"session": (0, MAX_SESSION_BYTES)}


class StatsArgs(_Args, frozen=True):
    pass


class ExportArgs(_Args, frozen=True):
    agent: str | None = None
    _BOUNDS: ClassVar[Bounds] = {"agent": (0, MAX_NAME_BYTES)}


class PurgeArgs(_Args, frozen=True):
    agent: str = ""
    _BOUNDS: ClassVar[Bounds] = {"agent": (0, MAX_NAME_BYTES)}


MemoryArgs = (
    StoreArgs
    | ForgetArgs
    | AppendTurnArgs
    | AppendTurnsArgs
    | GetArgs
    | ListArgs
    | RecallArgs
    | SessionArgs
    | StatsArgs
    | ExportArgs
    | PurgeArgs
)

ARGS: dict[str, type[MemoryArgs]] = {
    "store": StoreArgs,
    "forget": ForgetArgs,
    "append_turn": AppendTurnArgs,
    "append_turns": AppendTurnsArgs,
    "get": GetArgs,
    "list": ListArgs,
    "recall": RecallArgs,
    "session": SessionArgs,
    "stats": StatsArgs,
    "export": ExportArgs,
    "purge": PurgeArgs,
}


def decode_args(op: str, body: object) -> MemoryArgs:
    """The operation's argument struct from a body (None is an empty body)."""
    kind = ARGS.get(op)
    if kind is None:
        raise MemoryServiceError("bad_request", f"unknown memory operation {op!r}")
    try:
        return msgspec.convert({} if body is None else body, kind)
    except msgspec.ValidationError as exc:
        raise MemoryServiceError("bad_request", f"bad {op} arguments: {exc}") from None
