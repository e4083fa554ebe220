"""An MCP server's tools as the agent's tools: which are offered (pure), how a result
reads (pure), and the `Tool` each becomes: `mcp__<server>__<tool>`, with the server's input
schema as its parameters. No MCP SDK here: the host hands over plain values."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field

import msgspec

from ..config import mcp_tool_name
from ..providers import ToolSpec
from ..tools import BadArguments, Tool, ToolContext, ToolResult
from ..turns import McpToolSeen, tool_digest

MAX_PINNED_TOOLS = 256  # tools of one server reported to the daemon (a server may list more)
# A tool's description and input schema (UTF-8 bytes, the schema as compact JSON): the model
# reads them at every turn, so an allowed tool over this is not offered (mcp_schema_too_large)
# and a server cannot put a megabyte of instructions before the model. The pin is over the
# whole tool all the same.
MAX_TOOL_SPEC_BYTES = 32 * 1024
DESCRIPTION_CHARS = 200  # of a tool's description, for the operator's listing
APPROVAL_ARGS_CHARS = 300  # of a call's arguments, in the approval question


@dataclass(frozen=True, slots=True)
class ListedTool:
    """One tool as a server listed it (`tools/list`), the SDK's model read out."""

    name: str
    description: str
    input_schema: dict[str, object]
    read_only: bool  # the server's readOnlyHint annotation

    def seen(self) -> McpToolSeen:
        digest = tool_digest(self.name, self.description, self.input_schema)
        return McpToolSeen(self.name, digest, self.read_only, self.description[:DESCRIPTION_CHARS])


def spec_bytes(tool: ListedTool) -> int:
    """What offering `tool` costs each turn: its description and input schema, in bytes."""
    return len(tool.description.encode()) + len(_canonical(tool.input_schema).encode())


def oversized(listed: Iterable[ListedTool], allowlist: Collection[str]) -> dict[str, int]:
    """The allowed tools too large to offer (`MAX_TOOL_SPEC_BYTES`), with their sizes."""
    sizes = {tool.name: spec_bytes(tool) for tool in listed if tool.name in allowlist}
    return {name: size for name, size in sizes.items() if size > MAX_TOOL_SPEC_BYTES}


def pin_order(listed: Iterable[ListedTool], allowlist: Collection[str]) -> tuple[ListedTool, ...]:
    """The tools reported to the daemon: the allowed ones first, then the others, at most
    `MAX_PINNED_TOOLS` (a server that lists thousands does not push its allowed tools out
    of the pin, where they would never be offered)."""
    tools = tuple(listed)
    allowed = [tool for tool in tools if tool.name in allowlist]
    others = [tool for tool in tools if tool.name not in allowlist]
    return tuple([*allowed, *others][:MAX_PINNED_TOOLS])


def offered_tools(
    listed: Iterable[ListedTool],
    *,
    allowlist: Collection[str],
    pinned: Collection[str] | None,
    readonly_agent: bool,
) -> tuple[ListedTool, ...]:
    """The tools the model is offered, in the server's order: in the config's allowlist,
    offered by the daemon's pin (None: the daemon has no pin service, nothing withheld),
    not over `MAX_TOOL_SPEC_BYTES`, and, for a readonly agent, annotated read-only."""
    return tuple(
        tool
        for tool in listed
        if tool.name in allowlist
        and (pinned is None or tool.name in pinned)
        and (tool.read_only or not readonly_agent)
        and spec_bytes(tool) <= MAX_TOOL_SPEC_BYTES
    )


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _restates(text: str, structured: str) -> bool:
    """Whether a text content is the structured content serialised again (servers send
    it so for clients that read only text), whatever its spacing or key order."""
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        return _canonical(json.loads(text)) == structured
    except ValueError:
        return False


def render_result(texts: Iterable[str], structured: object, max_bytes: int) -> tuple[str, bool]:
    """A call's result as the model reads it: its text contents joined by newlines, then
    its structured content as compact JSON, and whether that is over `max_bytes`. A text
    content that only restates the structured content as JSON is left out: the model
    reads it once."""
    parts = list(texts)
    if structured is not None:
        canonical = _canonical(structured)
        parts = [text for text in parts if not _restates(text, canonical)]
        parts.append(json.dumps(structured, separators=(",", ":"), ensure_ascii=False))
    out = "\n".join(parts)
    return out, len(out.encode()) > max_bytes


def approval_question(name: str, arguments: dict[str, object]) -> str:
    """What the operator is asked before a call: the arguments' start, ASCII-escaped (no
    bidi or control characters), and, when cut, their length and sha256, so padding cannot
    push what matters out of view unseen."""
    whole = json.dumps(arguments, ensure_ascii=True, sort_keys=True)
    if len(whole) <= APPROVAL_ARGS_CHARS:
        return f"call {name} {whole}"
    digest = hashlib.sha256(whole.encode()).hexdigest()
    return (
        f"call {name} {whole[:APPROVAL_ARGS_CHARS]}... (cut: {len(whole)} characters in all,"
        f" sha256 {digest})"
    )


class McpArgs(msgspec.Struct, frozen=True):
    """A call's arguments: the object the model sent, checked by the server."""

    arguments: dict[str, object]


# Calls one tool of one server: (server, tool, arguments) -> result (the host's call).
CallTool = Callable[[str, str, dict[str, object]], Awaitable[ToolResult]]


def _object_schema(schema: dict[str, object]) -> dict[str, object]:
    """Providers want an object schema: a server's that is not one is wrapped as one."""
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {}}


@dataclass(frozen=True)
class McpTool(Tool[McpArgs]):
    """A server's tool. `read_only`: the server's readOnlyHint; a supervised agent asks
    approval for any other before the call."""

    server: str = ""
    tool: str = ""
    parameters: dict[str, object] = field(default_factory=dict)
    read_only: bool = False

    @functools.cached_property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, _object_schema(self.parameters))

    def decode(self, raw: object) -> McpArgs:
        if not isinstance(raw, dict):
            raise BadArguments(f"{self.name}: arguments must be an object")
        return McpArgs(dict(raw))


def mcp_tool(server: str, listed: ListedTool, call: CallTool, *, readonly_agent: bool) -> McpTool:
    """The agent's tool for one offered tool of `server`."""
    name = mcp_tool_name(server, listed.name)

    async def run(ctx: ToolContext, args: McpArgs) -> ToolResult:
        if not listed.read_only:
            if readonly_agent:  # never offered so; the check stands on its own anyway
                return ToolResult.refused(
                    "mcp_tool_not_allowed", f"{name} is not read-only and this agent is"
                )
            if ctx.asks_approval and not await ctx.approved(
                approval_question(name, args.arguments)
            ):
                return ToolResult.refused("approval_denied", "the operator did not approve")
        return await call(server, listed.name, args.arguments)

    description = listed.description or f"{listed.name} of the MCP server {server}"
    return McpTool(
        name,
        f"[MCP {server}] {description}",
        McpArgs,
        run,
        server=server,
        tool=listed.name,
        parameters=listed.input_schema,
        read_only=listed.read_only,
    )
