"""One MCP tool call with a server started for it and stopped after: how the daemon runs a
registered MCP adapter for an agent (`invoke_adapter`, issue 26 §5). The server is started
exactly as an agent's own (`_client.connect`: the agent's path rules as a nested Landlock
ruleset, its workspace as cwd, the scrubbed environment plus the variables its manifest
names), so it reaches no more than that agent could. The SDK is imported on the first call
only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..policy import PathRules
from ..turns import McpErrorCode


@dataclass(frozen=True)
class OneCall:
    """What to start and what to call. `agent_env`: the environment the agent's commands
    get, with the values of the variables `env_names` lists."""

    name: str
    command: str
    args: tuple[str, ...]
    env_names: tuple[str, ...]
    timeout_secs: float
    max_result_bytes: int
    rules: PathRules
    agent_env: Mapping[str, str]
    confine: bool
    home_root: str
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
    from ._client import Launch, McpFailure, connect

    launch = Launch(
        name=call.name,
        command=call.command,
        args=call.args,
        env_names=call.env_names,
        timeout_secs=call.timeout_secs,
        max_result_bytes=call.max_result_bytes,
        rules=call.rules,
        agent_env=call.agent_env,
        confine=call.confine,
        home_root=call.home_root,
    )
    try:
        async with connect(launch) as connection:
            is_error, text, too_large = await connection.call_tool(call.tool, call.arguments)
    except McpFailure as exc:
        return OneCallResult("", exc.code, exc.detail)
    if too_large:
        return OneCallResult(
            text, "mcp_result_too_large", f"result over {call.max_result_bytes} bytes"
        )
    if is_error:
        return OneCallResult(text, "mcp_tool_error", text[:500])
    return OneCallResult(text)
