"""Running an agent in-process (the CLI with no daemon): memory straight from the store,
peers and sub-agents unavailable. Same engine, same policy."""

from __future__ import annotations

from typing import Any, Literal

from ..agent import render_memory
from ..memory import MemoryService, MemoryServiceError
from ..tools import ToolResult, as_tool_error
from ..turns import AdapterCall, AdapterInvoke, CatalogCall, DispatchCall


class LocalReach:
    def __init__(self, service: MemoryService, alias: str) -> None:
        self.service = service
        self.alias = alias

    async def memory(self, op: str, body: dict[str, Any]) -> ToolResult:
        try:
            data = await self.service.handle(self.service.scope_for(self.alias), op, body)
        except MemoryServiceError as exc:
            return ToolResult(False, "", as_tool_error(exc.code, "storage_error"), exc.detail)
        return ToolResult(True, render_memory(op, data), data=data)

    async def message_peer(
        self,
        to: str,
        text: str,
        *,
        delegate: bool,
        depth: int,
        session: str = "default",
        granted: tuple[str, ...] | None = None,
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
