"""The daemon's control commands as one table: request type -> the handler that owns it.

A handler is an object built with what it needs (the supervisor, the memory service, the
chat service) in the daemon's composition root; the control server dispatches every
request through the table. Adding a command is a request class, its handler, and one
line where the table is built (ADR 0017).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ._protocol import AnyRequest, Reply, Request, error_reply

if TYPE_CHECKING:
    import trio


@dataclass(frozen=True)
class Exchange:
    """A request's way back to its client: `send` streams replies before the last one,
    `inbox` holds what the client sends while the request runs (a chat's cancel)."""

    send: Callable[[Reply[Any]], Awaitable[None]]
    inbox: trio.MemoryReceiveChannel[AnyRequest]


Req_contra = TypeVar("Req_contra", bound=Request[Any], contravariant=True)
Req = TypeVar("Req", bound=Request[Any])


class CommandHandler(Protocol[Req_contra]):
    async def __call__(self, request: Req_contra, exchange: Exchange, /) -> Reply[Any]: ...


# A service's commands as it hands them to the daemon's table: each request type with its
# handler (the types differ per entry, so the pair is typed loosely here only).
HandlerEntry = tuple[type[Request[Any]], CommandHandler[Any]]


class IncompleteCommandTable(Exception):
    """Some request type has no handler: a daemon built so would answer it `unsupported`."""


class CommandTable:
    def __init__(self) -> None:
        self._handlers: dict[type[Request[Any]], CommandHandler[Any]] = {}

    def register(self, request_type: type[Req], handler: CommandHandler[Req]) -> None:
        if request_type in self._handlers:
            raise ValueError(f"{request_type.__name__} already has a handler")
        self._handlers[request_type] = handler

    def handler(self, request_type: type[Request[Any]]) -> CommandHandler[Any] | None:
        return self._handlers.get(request_type)

    def missing(self, request_types: Iterable[type[Request[Any]]]) -> list[str]:
        return [t.__name__ for t in request_types if t not in self._handlers]

    def require(self, request_types: Iterable[type[Request[Any]]]) -> CommandTable:
        """This table, once it has a handler for every one of `request_types`."""
        missing = self.missing(request_types)
        if missing:
            raise IncompleteCommandTable(f"no handler for {', '.join(missing)}")
        return self

    async def dispatch(self, request: AnyRequest, exchange: Exchange) -> Reply[Any]:
        handler = self._handlers.get(type(request))
        if handler is None:
            return error_reply("unsupported", f"unsupported request {type(request).__name__}")
        return await handler(request, exchange)
