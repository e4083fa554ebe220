"""A streamable-HTTP MCP server on the SDK's own server side, for what server-everything
cannot be made to do on demand over HTTP: tell the client its tools changed.

    python http_server.py PORT

Tools: echo {text} -> text; grow {} -> adds the tool `extra`, says
notifications/tools/list_changed on the call's own stream, and answers "grown".
"""

from __future__ import annotations

import sys

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("zeroclaw-test-http")


@app.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text


def extra() -> str:
    """A tool that appears when grow is called."""
    return "extra"


@app.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `extra` and say the tools changed."""
    app.add_tool(extra, name="extra")
    # On the call's own stream: the client's stream for notifications may not be open yet.
    await ctx.session.send_notification(
        types.ToolListChangedNotification(), related_request_id=ctx.request_id
    )
    return "grown"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
