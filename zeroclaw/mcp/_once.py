"""One MCP tool call with a server started for it and stopped after: how the daemon runs a
registered MCP adapter for an agent (`invoke_adapter`, issue 26 §5). The server is started
exactly as an agent's own (`_client.connect`: the agent's path rules as a nested Landlock
ruleset, its workspace as cwd, the scrubbed environment plus the variables its manifest
names), so it reaches no more than that agent could. A server over streamable HTTP is
reached the same way for one call (`call_once_http`: connect, call the tool, end the
session), at an endpoint the discovery service checked against the calling agent's
`allowed_endpoints` (ADR 0054). The SDK is imported on the first call only."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..turns import McpErrorCode
from ._launch import Launch

if TYPE_CHECKING:
    from ._client import Connection


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


def lifetime(timeout_secs: float) -> float:
    """How long a server started for one call may live: its initialize and the call, each
    bounded by `timeout_secs`, and its stop."""
    return 2 * timeout_secs + STOP_ALLOWANCE_SECS


STOP_ALLOWANCE_SECS = 10.0


async def call_once(call: OneCall) -> OneCallResult:
    """The call, the server started under the intermediate (`Launch.lifetime_secs`): the
    daemon is no subreaper, so what the server leaves behind (a double fork, a `setsid()`)
    would outlive the call."""
    from ._client import connect

    launch = dataclasses.replace(call.launch, lifetime_secs=lifetime(call.launch.timeout_secs))
    return await _one_call(
        lambda: connect(launch), call.tool, call.arguments, launch.max_result_bytes
    )


@dataclass(frozen=True)
class OneHttpCall:
    """The streamable-HTTP server to reach (named `name` in messages; no header is sent),
    its bounds, and the one call to make of it."""

    name: str
    url: str
    timeout_secs: float
    max_result_bytes: int
    tool: str
    arguments: dict[str, object]


async def call_once_http(call: OneHttpCall) -> OneCallResult:
    from ._client import HttpLaunch, connect_http

    launch = HttpLaunch(call.name, call.url, {}, call.timeout_secs, call.max_result_bytes)
    return await _one_call(
        lambda: connect_http(launch), call.tool, call.arguments, call.max_result_bytes
    )


async def _one_call(
    connect: Callable[[], AbstractAsyncContextManager[Connection]],
    tool: str,
    arguments: dict[str, object],
    max_result_bytes: int,
) -> OneCallResult:
    from ._client import McpFailure

    try:
        async with connect() as connection:
            is_error, text, too_large = await connection.call_tool(tool, arguments)
    except McpFailure as exc:
        return OneCallResult("", exc.code, exc.detail)
    if too_large:
        return OneCallResult(text, "mcp_result_too_large", f"result over {max_result_bytes} bytes")
    if is_error:
        return OneCallResult(text, "mcp_tool_error", text[:500])
    return OneCallResult(text)
