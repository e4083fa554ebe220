"""`zeroclaw mcp list|show|tools|trust`: MCP servers, their state per agent, and their
pinned tool schemas (issue 26, ADR 0053).

The first time an agent reports a tool, the daemon pins its schema (a digest of its name,
description and input schema, and its read-only annotation); a tool whose schema changes
later is withheld from the model until the operator trusts it here.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

import click
import msgspec

from .._terminal import terminal_safe
from ..control import (
    McpList,
    McpServerInfo,
    McpShow,
    McpToolPin,
    McpTools,
    McpTrust,
    Reply,
)
from ._app import cli
from ._common import CliError, emit_json, json_option, plural, safe_echo, wants_json
from .daemon_cmd import call

SHORT = 12  # hex digits of a digest a listing shows; --json has them whole


@cli.group("mcp")
def mcp_group() -> None:
    """MCP servers, their state per agent, and their tools' pinned schemas."""


D = TypeVar("D")


def _data(reply: Reply[D], what: str) -> D:
    if not reply.ok or reply.data is None:
        raise CliError(f"{what} failed ({reply.error}): {reply.message}", code=reply.error)
    return reply.data


def _warn_store(problem: str) -> None:
    if problem:
        safe_echo(f"warning: {problem}", err=True)


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _server_lines(info: McpServerInfo) -> list[str]:
    lines = [
        f"{info.name}  {info.transport}  {info.target}",
        f"  allowed tools: {', '.join(info.tools) or 'none'}",
        f"  agents: {', '.join(info.agents) or 'none'}",
        f"  pinned: {plural(info.pinned, 'tool')}, {info.withheld} withheld",
    ]
    for live in info.live:
        text = f"  {live.agent}: {live.status}"
        if live.pid is not None:
            text += f" pid {live.pid}"
        if live.restarts:
            text += f", {plural(live.restarts, 'restart')}"
        if live.detail:
            text += f" ({live.detail})"
        lines.append(f"{text}, reported {_when(live.reported_at)}")
    return lines


def _tool_line(pin: McpToolPin) -> str:
    flags = ["read-only" if pin.read_only else "writes"]
    if not pin.allowed:
        flags.append("not allowed")
    text = f"{pin.agent}  {pin.server}  {pin.tool}  {pin.digest[:SHORT]}  {pin.state}"
    text += f"  {', '.join(flags)}"
    if pin.state == "withheld":
        text += f" (trusted {pin.trusted_digest[:SHORT]}, changed {_when(pin.changed_at)})"
    return text


@mcp_group.command("list")
@json_option
def mcp_list(as_json: bool) -> None:
    """Configured servers: how each is reached, its allowed tools, the agents using it and
    their live state, and how many of its tools are pinned and withheld."""
    data = _data(call(McpList()), "mcp list")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    _warn_store(data.store_problem)
    if not data.servers:
        click.echo("no MCP servers configured ([mcp_servers] in the config)")
    for info in data.servers:
        for line in _server_lines(info):
            safe_echo(line)


@mcp_group.command("show")
@click.argument("server")
@json_option
def mcp_show(server: str, as_json: bool) -> None:
    """One server, and every tool of it each agent has listed."""
    data = _data(call(McpShow(server)), "mcp show")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    _warn_store(data.store_problem)
    for line in _server_lines(data.server):
        safe_echo(line)
    for pin in data.tools:
        safe_echo("  " + _tool_line(pin))
        if pin.description:
            safe_echo(f"    {terminal_safe(pin.description, one_line=True)}")


@mcp_group.command("tools")
@click.option("--agent", "-a", "agent", metavar="ALIAS", help="Only this agent's tools.")
@click.option("--server", "server", metavar="NAME", help="Only this server's tools.")
@json_option
def mcp_tools(agent: str | None, server: str | None, as_json: bool) -> None:
    """Every pinned tool: agent, server, tool, digest (short), trusted or withheld, and
    whether the server annotates it read-only."""
    data = _data(call(McpTools(agent=agent, server=server)), "mcp tools")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    _warn_store(data.store_problem)
    if not data.tools:
        click.echo("no MCP tools pinned yet: an agent pins its servers' tools when it starts")
    for pin in data.tools:
        safe_echo(_tool_line(pin))


@mcp_group.command("trust")
@click.argument("server")
@click.option("--tool", "-t", "tool", metavar="TOOL", help="Only this tool (the server's name).")
@click.option("--agent", "-a", "agent", metavar="ALIAS", help="Only for this agent.")
@click.option(
    "--digest",
    "-d",
    "digest",
    metavar="HEX",
    help="Only if the latest schema is this one (12 to 64 hex digits of the digest 'mcp "
    "tools' or 'mcp show' showed): a server that changed it since is refused "
    "digest_changed, never trusted unread.",
)
@json_option
def mcp_trust(
    server: str, tool: str | None, agent: str | None, digest: str | None, as_json: bool
) -> None:
    """Accept the schema SERVER listed last (of --tool, for --agent; default every one):
    its withheld tools are offered again at the agent's next listing. Give --digest to
    accept only the schema you reviewed."""
    request = McpTrust(server, tool, agent, digest.lower() if digest else None)
    data = _data(call(request), "mcp trust")
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(data)})
        return
    for pin in data.trusted:
        safe_echo(f"trusted {pin.agent} {pin.server}/{pin.tool} at {pin.digest[:SHORT]}")
    for pin in data.stale:
        safe_echo(f"not trusted {pin.agent} {pin.server}/{pin.tool}: now {pin.digest[:SHORT]}")
    if not data.trusted:
        click.echo(f"nothing was withheld: {plural(len(data.already), 'tool')} trusted already")
