"""Running an agent in-process (the CLI with no daemon): memory straight from the store,
peers and sub-agents unavailable. Same engine, same policy."""

from __future__ import annotations

from typing import Literal, TypeVar

import msgspec

from .._ops import CallRefused, Operation
from ..memory import MemoryService, MemoryServiceError
from ..tools import ToolResult
from ..turns import AdapterCall, AdapterInvoke, CatalogCall, DispatchCall

Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)


class LocalReach:
    def __init__(self, service: MemoryService, alias: str) -> None:
        self.service = service
        self.alias = alias

    async def memory(self, op: Operation[Req, Ans], request: Req) -> Ans:
        try:
            answer = await self.service.run(self.service.scope_for(self.alias), request)  # type: ignore[arg-type]
        except MemoryServiceError as exc:
            raise CallRefused(exc.code, exc.detail) from None
        assert isinstance(answer, op.answer)  # the service's table answers the op's struct
        return answer

    async def message_peer(
        self,
        to: str,
        text: str,
        *,
        delegate: bool,
        depth: int,
        session: str = "default",
        turn: str | None = None,
    ) -> ToolResult:
        return ToolResult.refused("unavailable", "running in-process without a daemon: no peers")

    async def subagent(
        self, op: Literal["catalog", "dispatch"], body: CatalogCall | DispatchCall
    ) -> ToolResult:
        return ToolResult.refused(
            "unavailable",
            "running in-process without a daemon: sub-agents run only through the daemon",
        )

    async def adapter(
        self, op: Literal["admit", "invoke"], body: AdapterCall | AdapterInvoke
    ) -> ToolResult:
        return ToolResult.refused(
            "unavailable",
            "running in-process without a daemon: adapters are admitted only by the daemon",
        )

    async def schedule(self, op: Operation[Req, Ans], body: Req) -> ToolResult:
        return ToolResult.refused(
            "unavailable",
            "running in-process without a daemon: reminders are kept only by the daemon",
        )
