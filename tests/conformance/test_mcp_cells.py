"""The MCP cells (ADR 0053) against the conformance daemon: each MCP agent's turn calls a tool
of its real stdio server (the hostile one of tests/mcp), started by the agent inside its
sandbox. What the kernel let the server do is in the server's own reply ("refused: EACCES");
what the engine refused is the call's error code; the `env` tool's answer is the server's
whole environment, by name."""

from __future__ import annotations

import re

import pytest

from tests.conformance._matrix import MCP_AGENTS, MCP_NAMED, MCP_OTHER, Cell, Observed, cells_on
from tests.conformance._table import record
from tests.conformance._world import World, observed_from_turn

CELLS = cells_on("mcp_server")

# A server's environment: a shell command's (PATH, locale, TZ, its private HOME/TMPDIR/XDG
# dirs, git and pager settings) plus what its `env` names. Nothing of the daemon's.
_SHELL_VARIABLES = re.compile(r"^(PATH|HOME|TMPDIR|LANG|LC_ALL|TZ|PAGER|XDG_\w+|GIT_\w+)$")


def observed_environment(reply: str) -> Observed:
    names = set(reply.split(","))
    stray = sorted(n for n in names if n != MCP_NAMED and not _SHELL_VARIABLES.match(n))
    if MCP_NAMED not in names:
        return Observed("refused", "named_variable_missing", reply[:200])
    if stray or MCP_OTHER in names:
        return Observed("refused", "unnamed_variable", ",".join(stray)[:200])
    return Observed("allowed", None, reply[:200])


def observe(cell: Cell, data: dict[str, object]) -> Observed:
    calls = data.get("tool_calls")
    reply = str(data.get("reply", ""))
    if isinstance(calls, list) and calls and calls[0].get("ok"):
        refused = re.fullmatch(r"refused: ([A-Z]+)", reply.strip())
        if refused:  # the server tried, the kernel said no
            return Observed("kernel_denied", refused.group(1), reply[:200])
        if cell.tool == "mcp__h__env":
            return observed_environment(reply)
    return observed_from_turn(cell, data)


@pytest.mark.parametrize("cell", CELLS, ids=[c.key for c in CELLS])
def test_mcp(cell: Cell, world: World) -> None:
    from zeroclaw.policy import abi_version

    if cell.expect.kind == "kernel_denied" and abi_version() < 1:
        pytest.skip("this kernel has no Landlock")
    alias = MCP_AGENTS[cell.profile][0]
    data = world.chat(cell.profile, world.fill(cell.action, alias), agents=MCP_AGENTS)
    record(cell, observe(cell, data))
