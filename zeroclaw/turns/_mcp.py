"""What an agent and the daemon say to each other about MCP servers (issue 26, ADR 0053).

An agent runs its stdio MCP servers itself, as its own children inside its sandbox, and
reaches its HTTP servers itself; the daemon keeps what must outlive the agent and be the
operator's to decide: the pinned schema of every tool an agent has seen, and whether a
changed one is trusted again. Agent -> daemon, requests to the `MCP_SERVICE` service (the
caller is the router's authenticated identity, never a field here):

  op "pin"     body `McpPinCall`    -> `McpPinAnswer`: the tools a server listed (each with
                                       the digest of its name, description and input
                                       schema); which of them the agent may offer. A tool
                                       seen the first time is recorded and offered; one
                                       whose digest changed is withheld (`mcp_schema_changed`)
                                       until the operator trusts it (`zeroclaw mcp trust`).
  op "state"   body `McpServerState` -> `Nothing`: how a server is doing (for `mcp list`).

The digest is `tool_digest(...)`: one function, so the agent, the daemon and the CLI agree.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal, get_args

import msgspec

from .._ops import Nothing, Operation

MCP_SERVICE = "mcp"

# A call to an MCP tool, or a server, that did not give an answer (tool errors, typed).
McpErrorCode = Literal[
    "mcp_unavailable",  # the server is not running (missing, not executable, died, garbage)
    "mcp_timeout",  # no answer within the server's timeout_secs
    "mcp_tool_error",  # the server answered the call with isError (its text is the detail)
    "mcp_result_too_large",  # the result is over the server's max_result_bytes
    "mcp_tool_not_allowed",  # not in the server's `tools`, or not read-only for a readonly agent
    "mcp_schema_changed",  # its pinned schema changed: withheld until the operator trusts it
    # its description and input schema are too large to offer the model at every turn
    "mcp_schema_too_large",
    # MCP_PIN refused whole: more tools per server, or servers per agent, than the daemon's
    # pin book holds (zeroclaw.pins; a hostile agent cannot grow it without bound)
    "mcp_pin_limit",
    # MCP_PIN: the daemon's pin store is unreadable; every tool is withheld until it is fixed
    "mcp_pins_corrupt",
]
MCP_ERROR_CODES: tuple[str, ...] = get_args(McpErrorCode)

McpServerStatus = Literal["starting", "ready", "failed", "restarting", "stopped"]


def tool_digest(name: str, description: str, input_schema: object) -> str:
    """The pinned identity of one tool: sha256 over its name, description and input schema
    as canonical JSON (sorted keys, no spaces), hex."""
    document = {"name": name, "description": description, "inputSchema": input_schema}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class McpToolSeen(msgspec.Struct, frozen=True, omit_defaults=True):
    """One tool as a server listed it. `read_only`: the server's readOnlyHint annotation."""

    name: str
    digest: str
    read_only: bool = False
    description: str = ""  # its first 200 characters, for the operator's listing


class McpPinCall(msgspec.Struct, frozen=True):
    server: str
    tools: tuple[McpToolSeen, ...]


class McpPinAnswer(msgspec.Struct, frozen=True, omit_defaults=True):
    """`offered`: the tools the agent may offer (of those it sent); `withheld`: those whose
    digest changed since the operator last trusted them."""

    offered: tuple[str, ...] = ()
    withheld: tuple[str, ...] = ()


class McpServerState(msgspec.Struct, frozen=True, omit_defaults=True):
    server: str
    status: McpServerStatus
    detail: str = ""  # why it failed, or what it is waiting for
    restarts: int = 0
    pid: int | None = None  # a stdio server's process
    # When it was told (CLOCK_MONOTONIC, one clock for every process of the machine): the
    # daemon answers each post in a task of its own, in no set order, so a state older
    # than the one it holds is stale (a 'failed' overtaken by the 'starting' before it).
    at_ns: int = 0


MCP_PIN = Operation(MCP_SERVICE, "pin", McpPinCall, McpPinAnswer, MCP_ERROR_CODES)
MCP_STATE = Operation(MCP_SERVICE, "state", McpServerState, Nothing, MCP_ERROR_CODES)
MCP_OPERATIONS = (MCP_PIN, MCP_STATE)
