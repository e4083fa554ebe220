"""One MCP tool call with a server started for it and stopped after: how the daemon runs a
registered MCP adapter for an agent (`invoke_adapter`, issue 26 §5). The server is started
exactly as an agent's own (`_client.connect`: the agent's path rules as a nested Landlock
ruleset, its workspace as cwd, the scrubbed environment plus the variables its manifest
names), so it reaches no more than that agent could. The SDK is imported on the first call
only."""

from __future__ import annotations

from dataclasses import dataclass

from ..turns import McpErrorCode
from ._launch import Launch


@dataclass(frozen=True)
class OneCall:
    """The server to start (as an agent's own: `launch`) and the one call to make of it."""

    launch: Launch
    tool: str
    arguments: dict[str, object]


@dataclass(frozen=True)
class OneCallResult:
    """`error`: None when the server answered without isError; else why not. `text`: the
    result (text and structured content), or the server's error text."""

    text: str
    error: McpErrorCode | None = None
    detail: str = ""


async def call_once(call: OneCall) -> OneCallResult:
    from ._client import McpFailure, connect

    try:
        async with connect(call.launch) as connection:
            is_error, text, too_large = await connection.call_tool(call.tool, call.arguments)
    except McpFailure as exc:
        return OneCallResult("", exc.code, exc.detail)
    if too_large:
        return OneCallResult(
            text, "mcp_result_too_large", f"result over {call.launch.max_result_bytes} bytes"
        )
    if is_error:
        return OneCallResult(text, "mcp_tool_error", text[:500])
    return OneCallResult(text)
