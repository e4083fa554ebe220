"""MCP (issue 26 #7), each beside its baseline in the same run: a turn that calls an MCP
tool of the registry's `mcp-server-time` against the same turn calling a built-in tool
(`file_list`); a stdio server's start (spawn under the agent's Landlock ruleset,
initialize, tools/list) through our transport against the SDK's own stdio client with no
sandbox; and the PSS an idle agent's two stdio servers add, against the same agent without
them."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from zeroclaw.control import Chat, ControlSession

from ._daemon import ReadyDaemon, process_tree, pss_kb
from ._harness import Result, p50_p99, result

TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
TURNS = int(os.environ.get("ZEROCLAW_BENCH_MCP_TURNS", "300"))
BLOCK = 25  # the two sides alternate in blocks, so noise hits both alike
STARTS = 9
MCP_TURN = 'mcp time get_current_time {"timezone": "UTC"}'
BUILTIN_TURN = "list"


def _with_servers(names: tuple[str, ...]):  # type: ignore[no-untyped-def]
    def edit(doc: dict[str, Any]) -> None:
        doc["mcp_servers"] = {
            name: {"command": TIME_SERVER, "tools": ["get_current_time"]} for name in names
        }
        doc["risk_profiles"]["r"]["require_approval_for_medium_risk"] = False
        doc["runtime_profiles"]["d"]["max_actions_per_hour"] = 1_000_000
        doc["agents"]["alpha"]["mcp"] = list(names)

    return edit


def _turn_latency() -> dict[str, dict[str, float]]:
    daemon = ReadyDaemon(["alpha"], edit=_with_servers(("time",)))
    samples: dict[str, list[float]] = {"mcp": [], "builtin": []}
    try:
        with ControlSession(daemon.runtime_dir, timeout=60) as session:
            count = 0

            def turn(text: str) -> float:
                nonlocal count
                count += 1  # a session per turn: no wait for the previous transcript commit
                started = time.perf_counter()
                session.send(Chat(agent="alpha", text=text, session=f"b-{count}"))
                for reply in session.replies():
                    assert reply.ok, reply
                return (time.perf_counter() - started) * 1000

            for block in range(TURNS // BLOCK + 1):  # the first block is the warm-up
                for name, text in (("mcp", MCP_TURN), ("builtin", BUILTIN_TURN)):
                    for _ in range(BLOCK):
                        took = turn(text)
                        if block:
                            samples[name].append(took)
    finally:
        daemon.close()
    return {name: p50_p99(values) for name, values in samples.items()}


async def _start_ours(root: str) -> None:
    from zeroclaw.mcp import Launch
    from zeroclaw.mcp._client import connect
    from zeroclaw.policy import abi_version, rules_for

    assert TIME_SERVER is not None
    launch = Launch(
        name="time",
        command=TIME_SERVER,
        args=(),
        env_names=(),
        timeout_secs=30.0,
        max_result_bytes=65536,
        rules=rules_for(root, workspace_only=True, may_write=True),
        agent_env={},
        confine=abi_version() >= 1,
        home_root=root,
    )
    async with connect(launch) as connection:
        await connection.list_tools()


async def _start_sdk() -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    assert TIME_SERVER is not None
    async with (
        stdio_client(StdioServerParameters(command=TIME_SERVER)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()


async def _sdk_calls(samples: list[float]) -> None:
    """The bare SDK's call_tool round trips to the same server, no turn, no sandbox."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    assert TIME_SERVER is not None
    async with (
        stdio_client(StdioServerParameters(command=TIME_SERVER)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()  # as the agent does: the SDK then checks outputSchema
        for i in range(TURNS + BLOCK):
            started = time.perf_counter()
            await session.call_tool("get_current_time", {"timezone": "UTC"})
            if i >= BLOCK:
                samples.append((time.perf_counter() - started) * 1000)


def _sdk_call_p50() -> float:
    samples: list[float] = []
    trio.run(_sdk_calls, samples)
    return statistics.median(samples)


def _start_times() -> tuple[float, float]:
    """Median seconds of a server's start to its listed tools: ours, the SDK's."""
    root = tempfile.mkdtemp(prefix="zcb-mcp-", dir="/tmp")
    ours: list[float] = []
    sdk: list[float] = []
    try:
        for i in range(STARTS + 1):
            started = time.perf_counter()
            trio.run(_start_ours, root)
            took = time.perf_counter() - started
            started = time.perf_counter()
            trio.run(_start_sdk)
            took_sdk = time.perf_counter() - started
            if i:  # the first is the warm-up (the page cache)
                ours.append(took)
                sdk.append(took_sdk)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return statistics.median(ours), statistics.median(sdk)


def _agent_pss_kb(daemon: ReadyDaemon) -> int:
    """PSS of the agent process alpha and its children (its MCP servers)."""
    with ControlSession(daemon.runtime_dir, timeout=60) as session:
        session.send(Chat(agent="alpha", text="hello", session="pss"))  # servers settle first
        for reply in session.replies():
            assert reply.ok, reply
    tree = process_tree(daemon.proc.pid)
    agent = [pid for pid in tree if _cmdline(pid) == "zeroclaw agent alpha"]
    return sum(pss_kb(pid) for pid in process_tree(agent[0]))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _idle_pss() -> tuple[float, float]:
    """MB of PSS of an idle agent with two stdio servers and of one with none."""
    figures = []
    for edit in (_with_servers(("time", "clock")), _with_servers(())):
        daemon = ReadyDaemon(["alpha"], edit=edit)
        try:
            figures.append(_agent_pss_kb(daemon) / 1024)
        finally:
            daemon.close()
    return figures[0], figures[1]


def run() -> list[Result]:
    if TIME_SERVER is None:
        raise RuntimeError("mcp-server-time is not installed (make install)")
    turns = _turn_latency()
    bare_call = _sdk_call_p50()
    ours, sdk = _start_times()
    with_servers, without = _idle_pss()
    added = turns["mcp"]["p50"] - turns["builtin"]["p50"]
    ours_added = added - bare_call  # what is left once the server's own round trip is out
    return [
        result(
            "turn p50 with one MCP tool call (mcp-server-time)",
            turns["mcp"]["p50"],
            "ms",
            "turn p50 with one built-in tool call (file_list)",
            turns["builtin"]["p50"],
            f"<= +2 ms (now {added:+.2f} ms)",
        ),
        result(
            "MCP call's cost in a turn beyond the server's round trip",
            ours_added,
            "ms",
            "the SDK's bare call_tool round trip p50, same server",
            bare_call,
        ),
        result(
            "turn p99 with one MCP tool call",
            turns["mcp"]["p99"],
            "ms",
            "turn p99 with one built-in tool call",
            turns["builtin"]["p99"],
        ),
        result(
            "stdio MCP server start to tools listed (Landlock)",
            ours,
            "s",
            "the SDK's stdio_client, no sandbox",
            sdk,
        ),
        result(
            "idle agent PSS with two stdio MCP servers",
            with_servers,
            "MB",
            "the same agent with none",
            without,
            f"the servers add {with_servers - without:.1f} MB",
        ),
    ]
