"""The control commands of `zeroclaw mcp list|show|tools|trust`: one handler class per
request, each built with the daemon's `PinService` and calling only it.
`register_pin_commands` puts them all in the daemon's command table in one line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..control import (
    CommandTable,
    Exchange,
    HandlerEntry,
    McpList,
    McpListReply,
    McpServerDetail,
    McpShow,
    McpTools,
    McpToolsReply,
    McpTrust,
    McpTrustReply,
    Reply,
    error_reply,
)
from ._service import PinService, PinsUnavailable, UnknownServer

DIGEST_PREFIX = re.compile(r"[0-9a-f]{12,64}")  # of a tool's pinned digest, as shown


def _unknown(server: str) -> Reply[Any]:
    return error_reply("unknown_mcp_server", f"no MCP server {server[:64]!r} in the config")


class McpListCommand:
    def __init__(self, pins: PinService) -> None:
        self._pins = pins

    async def __call__(self, request: McpList, exchange: Exchange) -> Reply[McpListReply]:
        return Reply(ok=True, data=McpListReply(self._pins.servers(), self._pins.problem))


class McpShowCommand:
    def __init__(self, pins: PinService) -> None:
        self._pins = pins

    async def __call__(self, request: McpShow, exchange: Exchange) -> Reply[McpServerDetail]:
        try:
            info = self._pins.server(request.server)
        except UnknownServer:
            return _unknown(request.server)
        tools = self._pins.tools(server=request.server)
        return Reply(ok=True, data=McpServerDetail(info, tools, self._pins.problem))


class McpToolsCommand:
    def __init__(self, pins: PinService) -> None:
        self._pins = pins

    async def __call__(self, request: McpTools, exchange: Exchange) -> Reply[McpToolsReply]:
        tools = self._pins.tools(agent=request.agent, server=request.server)
        return Reply(ok=True, data=McpToolsReply(tools, self._pins.problem))


class McpTrustCommand:
    def __init__(self, pins: PinService) -> None:
        self._pins = pins

    async def __call__(self, request: McpTrust, exchange: Exchange) -> Reply[McpTrustReply]:
        digest = request.digest
        if digest is not None and not DIGEST_PREFIX.fullmatch(digest):
            return error_reply(
                "bad_request", "--digest takes 12 to 64 hex digits of a digest 'mcp tools' shows"
            )
        try:
            done = await self._pins.trust(request.server, request.tool, request.agent, digest)
        except UnknownServer:
            return _unknown(request.server)
        except PinsUnavailable as exc:
            return error_reply("mcp_pins_corrupt", str(exc))
        if done.stale and not done.trusted and not done.already:
            now = ", ".join(f"{p.agent} {p.tool} {p.digest[:12]}" for p in done.stale)
            return error_reply(
                "digest_changed",
                f"MCP server {request.server!r} listed another schema since {digest}: now "
                f"{now[:300]}; review it again ('zeroclaw mcp show {request.server}') and "
                "trust its digest",
            )
        if not done.trusted and not done.already:
            what = f"tool {request.tool!r} of " if request.tool else ""
            whose = f" for agent {request.agent!r}" if request.agent else ""
            return error_reply(
                "nothing_to_trust",
                f"no pinned {what}MCP server {request.server!r}{whose}: no agent has listed it "
                "yet (see 'zeroclaw mcp tools')",
            )
        return Reply(ok=True, data=McpTrustReply(done.trusted, done.already, done.stale))


def pin_handlers(pins: PinService) -> Iterator[HandlerEntry]:
    yield McpList, McpListCommand(pins)
    yield McpShow, McpShowCommand(pins)
    yield McpTools, McpToolsCommand(pins)
    yield McpTrust, McpTrustCommand(pins)


def register_pin_commands(table: CommandTable, pins: PinService) -> CommandTable:
    """Put every `zeroclaw mcp` control command in `table` (the daemon's one line)."""
    for request_type, handler in pin_handlers(pins):
        table.register(request_type, handler)
    return table
