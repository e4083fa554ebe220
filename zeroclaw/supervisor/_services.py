"""The daemon's services as one table (ADR 0050): each registered once, started in the
order of registration, each waited for until it says it has started, and stopped in the
reverse order, each waited for until it has ended, on any exit, error or not.

A service is anything with a `name` and `async def run(self, *, task_status)` that calls
`task_status.started()` once it serves and then runs until cancelled. `Started` and
`Background` make one of a coroutine function that already is, or that has nothing to get
ready. A new capability (schedules, MCP servers, a gateway) is one more `register`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import trio

log = logging.getLogger("zeroclaw.daemon")


class DaemonService(Protocol):
    @property
    def name(self) -> str: ...

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Call `task_status.started()` once serving; then run until cancelled."""


@dataclass(frozen=True)
class Started:
    """A service of a function that takes trio's `task_status` itself (`Router.run`)."""

    name: str
    start: Callable[..., Awaitable[None]]

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        await self.start(task_status=task_status)


@dataclass(frozen=True)
class Background:
    """A service with nothing to get ready: started as soon as it runs."""

    name: str
    body: Callable[[], Awaitable[None]]

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        await self.body()


class DuplicateService(ValueError):
    pass


class Services:
    def __init__(self) -> None:
        self._services: list[DaemonService] = []

    def register(self, service: DaemonService) -> None:
        if service.name in self.names():
            raise DuplicateService(f"a service named {service.name!r} is registered already")
        self._services.append(service)

    def names(self) -> list[str]:
        return [service.name for service in self._services]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Every service started, in order, for the body of the `async with`; then stopped
        in reverse. One that fails to start stops those started before it, and its error
        leaves the `async with` (as does one's that fails later, after the others stopped)."""
        async with AsyncExitStack() as stack:
            for service in self._services:
                await stack.enter_async_context(_serving(service))
            yield


@asynccontextmanager
async def _serving(service: DaemonService) -> AsyncIterator[None]:
    # Each in a nursery of its own, nested in the ones before it: cancelling it stops this
    # service alone, and the stack's exit does so in reverse.
    started = False
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run, name=service.name)
            started = True
            log.debug("service %s started", service.name, extra={"service": service.name})
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    except Exception as exc:
        if not started:  # the one line that says why the daemon did not come up
            log.error(
                "service %s could not start: %s",
                service.name,
                _why(exc),
                extra={"service": service.name},
            )
        raise
    finally:
        what = "stopped" if started else "did not start"
        log.debug("service %s %s", service.name, what, extra={"service": service.name})


def _why(exc: BaseException) -> str:
    """The errors inside `exc` (a nursery's group holds the service's own), one line."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_why(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"[:500]
