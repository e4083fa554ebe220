"""MCP servers as agent tools (issue 26, ADR 0053), the agent's side.

An agent with `[agents] mcp` runs each stdio server as its own child inside a Landlock
domain nested in its own (`_launch`, `_client`), keeps it alive with a pure lifecycle
(`Lifecycle`), and offers the allowed tools as `mcp__<server>__<tool>` (`McpHost`). The
MCP SDK is imported by `_client` only, which `McpHost.run` imports when there are servers:
importing this package does not load it.
"""

from ._host import McpHost
from ._launch import Launch, installation_paths, server_environment
from ._lifecycle import Lifecycle, LifecycleError
from ._once import OneCall, OneCallResult, OneHttpCall, call_once, call_once_http
from ._tools import ListedTool, McpTool, offered_tools, render_result

__all__ = [
    "Launch",
    "Lifecycle",
    "LifecycleError",
    "ListedTool",
    "McpHost",
    "McpTool",
    "OneCall",
    "OneCallResult",
    "OneHttpCall",
    "call_once",
    "call_once_http",
    "installation_paths",
    "offered_tools",
    "render_result",
    "server_environment",
]
