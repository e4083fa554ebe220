"""The agent's MCP servers, run in its nursery: the thin trio shell around `Lifecycle`.

At the agent's start every server of its spec is started (`_client.connect`), its tools
listed, their digests sent to the daemon (`MCP_PIN`, through `pin`), and the allowed ones
handed to the agent (`on_tools`) as `mcp__<server>__<tool>`; `tools/list_changed` lists and
pins again. Each change of a server's state is posted to the daemon (`post_state`, post
and forget). A daemon without the pin service refuses the call with unknown_service:
then nothing is withheld and the allowed tools are offered. Any other refusal (a damaged
store, a listing the book refuses, a lost call) withholds every tool of that server until
a later pin is answered: a hostile server must not list its way to "no pins".

A streamable-HTTP server (`url`) is reached with the headers its `headers_env` names, their
values from the agent's environment; it has the same lifecycle, backoff, timeouts and typed
errors as a stdio one.

The MCP SDK is imported only by `_client`, which the host imports when a server starts:
the daemon and every agent without `mcp` never load it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

import msgspec
import trio

from .._ops import CallRefused
from .._process import SpawnTracker
from ..config import mcp_tool_name
from ..policy import PathRules
from ..tools import ToolResult
from ..turns import McpErrorCode, McpPinAnswer, McpPinCall, McpServerState
from ._launch import Launch, http_headers
from ._lifecycle import Action, Exited, Lifecycle, Ready, Report, Sleep, Spawn, Start, Stop, Woke
from ._tools import (
    MAX_TOOL_SPEC_BYTES,
    ListedTool,
    McpTool,
    mcp_tool,
    offered_tools,
    oversized,
    pin_order,
)

if TYPE_CHECKING:
    from ._client import Connection

log = logging.getLogger("zeroclaw.mcp")

LIST_CHANGED_SPACING_SECS = 1.0

Pin = Callable[[McpPinCall], Awaitable[McpPinAnswer]]
PostState = Callable[[McpServerState], None]
OnTools = Callable[[tuple[McpTool, ...]], None]


class McpServerSpec(Protocol):
    """One server as the agent's spec gives it (`zeroclaw.agent.McpServerSpec`), by the
    fields the host reads: this package does not import the agent's."""

    @property
    def name(self) -> str: ...
    @property
    def transport(self) -> str: ...
    @property
    def command(self) -> str: ...
    @property
    def args(self) -> tuple[str, ...]: ...
    @property
    def env(self) -> tuple[str, ...]: ...
    @property
    def url(self) -> str: ...
    @property
    def headers_env(self) -> Mapping[str, str]: ...
    @property
    def timeout_secs(self) -> float: ...
    @property
    def startup_timeout_secs(self) -> float: ...
    @property
    def max_result_bytes(self) -> int: ...
    @property
    def tools(self) -> tuple[str, ...]: ...


class McpHost:
    """`run()` serves the servers until cancelled (the agent stops); `call` is what the
    offered tools run; `settled` is set once every server's first start ended (ready or
    not), and `wait_settled()` waits for it, bounded: a turn waits for it so the first
    message after the agent's start sees the servers' tools."""

    def __init__(
        self,
        servers: Sequence[McpServerSpec],
        *,
        rules: Callable[[], PathRules],
        agent_env: Mapping[str, str],
        confine: bool,
        home_root: str | None,
        readonly: bool,
        pin: Pin,
        post_state: PostState,
        on_tools: OnTools,
        tracker: SpawnTracker | None = None,
        commands: Sequence[str] = (),
        backoff: tuple[float, float] = (0.5, 30.0),
        max_attempts: int = 5,
    ) -> None:
        self.servers = {s.name: s for s in servers}
        self._rules = rules
        self._agent_env = agent_env
        self._confine = confine
        self._home_root = home_root
        self.readonly = readonly
        self._pin = pin
        self._post_state = post_state
        self._on_tools = on_tools
        self._tracker = tracker
        self._commands = tuple(commands)
        self._backoff = backoff
        self._max_attempts = max_attempts
        self.settled = trio.Event()
        self._pending = set(self.servers)
        self.connections: dict[str, Connection] = {}
        self.status: dict[str, str] = dict.fromkeys(self.servers, "idle")
        self._tools: dict[str, tuple[McpTool, ...]] = {}
        self._no_pin_service_logged = False
        self._listed: dict[str, tuple[ListedTool, ...]] = {}
        self._withheld: dict[str, tuple[str, ...]] = {}
        # Why the daemon withheld a server's tools, for the model: the tools whose schema
        # changed (`mcp_schema_changed`), or the code it refused the whole pin with.
        self._changed: dict[str, frozenset[str]] = {}
        self._pin_refused: dict[str, tuple[str, str]] = {}

    @property
    def settle_secs(self) -> float:
        """How long a turn waits for the first start: initialize (its startup bound), then
        tools/list and the pin (each bounded by the server's timeout)."""
        bounds = (s.startup_timeout_secs + 2 * s.timeout_secs for s in self.servers.values())
        return max(bounds, default=0.0) + 1.0

    async def wait_settled(self) -> None:
        """Before a turn: the servers' first start, then a new pin for withheld tools."""
        with trio.move_on_after(self.settle_secs):
            await self.settled.wait()
            await self.repin_withheld()

    def tools(self) -> tuple[McpTool, ...]:
        """Every offered tool, in the spec's server order."""
        return tuple(t for name in self.servers for t in self._tools.get(name, ()))

    async def run(self) -> None:
        if not self.servers:
            self.settled.set()
            return
        async with trio.open_nursery() as nursery:
            for server in self.servers.values():
                nursery.start_soon(self._serve, server)

    def _settle(self, name: str) -> None:
        self._pending.discard(name)
        if not self._pending:
            self.settled.set()

    def _report(self, actions: tuple[Action, ...]) -> tuple[Spawn | None, Sleep | None]:
        spawn: Spawn | None = None
        sleep: Sleep | None = None
        for action in actions:
            if isinstance(action, Report):
                self.status[action.state.server] = action.state.status
                self._post(action.state)
            elif isinstance(action, Spawn):
                spawn = action
            elif isinstance(action, Sleep):
                sleep = action
        return spawn, sleep

    def _post(self, state: McpServerState) -> None:
        try:
            self._post_state(msgspec.structs.replace(state, at_ns=time.monotonic_ns()))
        except Exception as exc:  # a bus that is going away: the state is only news
            log.debug("mcp %s: state not posted: %s", state.server, exc)

    async def _serve(self, server: McpServerSpec) -> None:
        life = Lifecycle(
            server.name,
            base_secs=self._backoff[0],
            max_secs=self._backoff[1],
            max_attempts=self._max_attempts,
        )
        try:
            actions = life.handle(Start())
            while True:
                spawn, sleep = self._report(actions)
                if spawn is not None:
                    detail = await self._attempt(server, life)
                    log.warning("mcp %s: %s", server.name, detail)
                    actions = life.handle(Exited(detail))
                    self._settle(server.name)
                elif sleep is not None:
                    await trio.sleep(sleep.secs)
                    actions = life.handle(Woke())
                else:  # failed for good, until the agent stops: its tools are unavailable
                    await trio.sleep_forever()
        finally:
            self._report(life.handle(Stop()))
            self._settle(server.name)

    def _connect(self, server: McpServerSpec) -> AbstractAsyncContextManager[Connection]:
        """The connection to one server: its stdio child started, or its URL reached."""
        from ._client import HttpLaunch, McpFailure, connect, connect_http

        if server.transport == "http":
            headers, problem = http_headers(server.headers_env, self._agent_env)
            if problem:
                raise McpFailure("mcp_unavailable", f"{server.name}: {problem}")
            return connect_http(
                HttpLaunch(
                    name=server.name,
                    url=server.url,
                    headers=headers,
                    timeout_secs=server.timeout_secs,
                    max_result_bytes=server.max_result_bytes,
                    startup_timeout_secs=server.startup_timeout_secs,
                )
            )
        return connect(
            Launch(
                name=server.name,
                command=server.command,
                args=server.args,
                env_names=server.env,
                timeout_secs=server.timeout_secs,
                max_result_bytes=server.max_result_bytes,
                rules=self._rules(),
                agent_env=self._agent_env,
                confine=self._confine,
                home_root=self._home_root,
                tracker=self._tracker,
                commands=self._commands,
                startup_timeout_secs=server.startup_timeout_secs,
            )
        )

    async def _attempt(self, server: McpServerSpec, life: Lifecycle) -> str:
        """One start of the server, until it ends; why it ended."""
        from ._client import McpFailure

        try:
            async with self._connect(server) as connection:
                await self._offer(server, connection)
                self.connections[server.name] = connection
                try:
                    self._report(life.handle(Ready(connection.pid)))
                    self._settle(server.name)
                    while not connection.closed.is_set():
                        changed = connection.tools_changed
                        await _either(connection.closed, changed)
                        if changed.is_set() and not connection.closed.is_set():
                            connection.tools_changed = trio.Event()
                            log.info("mcp %s: its tools changed; listing them again", server.name)
                            await self._offer(server, connection)
                            # A server that says so without end costs a listing and a
                            # pin a second at most.
                            await trio.sleep(LIST_CHANGED_SPACING_SECS)
                finally:
                    self.connections.pop(server.name, None)
                return f"mcp_unavailable: {connection.why}"
        except McpFailure as failure:
            return f"{failure.code}: {failure.detail}"
        except Exception as exc:  # the SDK's bug or ours: this server restarts, the agent lives
            log.exception("mcp %s: the connection failed", server.name)
            return f"mcp_unavailable: internal error ({type(exc).__name__})"

    async def _offer(self, server: McpServerSpec, connection: Connection) -> None:
        listed = self._listed[server.name] = await connection.list_tools()
        for tool, size in oversized(listed, server.tools).items():
            log.warning(
                "mcp %s: %s not offered: its description and input schema are %d bytes, "
                "over %d (mcp_schema_too_large)",
                server.name,
                tool,
                size,
                MAX_TOOL_SPEC_BYTES,
            )
        await self._apply(server)

    async def _apply(self, server: McpServerSpec) -> None:
        """Pin what the server listed last and hand the agent what may be offered."""
        listed = self._listed.get(server.name, ())
        pinned = await self._pinned(server.name, pin_order(listed, server.tools))
        offered = offered_tools(
            listed, allowlist=server.tools, pinned=pinned, readonly_agent=self.readonly
        )
        self._tools[server.name] = tuple(
            mcp_tool(server.name, tool, self.call, readonly_agent=self.readonly) for tool in offered
        )
        self._on_tools(self.tools())

    async def repin_withheld(self) -> None:
        """Ask the daemon again for the servers with withheld tools (the operator may have
        trusted them since): before a turn, so the turn sees what was trusted."""
        for name in [n for n, withheld in self._withheld.items() if withheld]:
            if name in self.connections:
                await self._apply(self.servers[name])

    async def _pinned(self, name: str, listed: tuple[ListedTool, ...]) -> frozenset[str] | None:
        """What the daemon lets the agent offer; None: it has no pin service."""
        call = McpPinCall(name, tuple(t.seen() for t in listed))
        try:
            answer = await self._pin(call)
        except CallRefused as refused:
            self._changed.pop(name, None)
            if refused.code != "unknown_service":
                # The service is there and refused (a damaged store, a listing the book
                # will not take, a lost call): withheld, asked again before each turn.
                # Never "no pins": a hostile server could list its way to that.
                self._withheld[name] = tuple(t.name for t in listed)
                self._pin_refused[name] = (refused.code, refused.detail)
                log.warning(
                    "mcp %s: every tool withheld, the pin was refused: %s %s",
                    name,
                    refused.code,
                    refused.detail,
                )
                return frozenset()
            self._withheld.pop(name, None)
            self._pin_refused.pop(name, None)
            if not self._no_pin_service_logged:
                self._no_pin_service_logged = True
                log.info("mcp: no pinned schemas (%s %s)", refused.code, refused.detail)
            return None
        self._withheld[name] = answer.withheld
        self._changed[name] = frozenset(answer.withheld)
        self._pin_refused.pop(name, None)
        if answer.withheld:
            log.warning(
                "mcp %s: withheld, their schema changed: %s", name, ", ".join(answer.withheld)
            )
        return frozenset(answer.offered)

    def explain(self, name: str) -> ToolResult | None:
        """Why `name` (mcp__<server>__<tool>) is not offered, when the server listed it and
        the config allows it: its schema changed since the operator trusted it
        (`mcp_schema_changed`), the daemon refused the server's pin (its code), too large to
        offer (`mcp_schema_too_large`), or not read-only and this agent is readonly
        (`mcp_tool_not_allowed`). None otherwise (not ready, not allowed: the engine says
        so)."""
        for server in self.servers.values():
            listed = self._listed.get(server.name, ())
            for tool in listed:
                if mcp_tool_name(server.name, tool.name) != name or tool.name not in server.tools:
                    continue
                if tool.name in self._changed.get(server.name, ()):
                    return ToolResult.refused(
                        "mcp_schema_changed",
                        f"{name} changed its schema since the operator trusted it: withheld "
                        f"until 'zeroclaw mcp trust {server.name} --tool {tool.name}'",
                    )
                refused = self._pin_refused.get(server.name)
                if refused is not None:
                    code, detail = refused
                    why = f"{name} is withheld, its server's pin refused: {code} {detail}"
                    return ToolResult.refused(_pin_code(code), why[:500])
                size = oversized([tool], server.tools).get(tool.name)
                if size is not None:
                    return ToolResult.refused(
                        "mcp_schema_too_large",
                        f"{name} is not offered: its description and input schema are "
                        f"{size} bytes, over {MAX_TOOL_SPEC_BYTES}",
                    )
                if self.readonly and not tool.read_only:
                    return ToolResult.refused(
                        "mcp_tool_not_allowed",
                        f"{name} is not read-only (its server does not annotate it so) "
                        "and this agent is readonly",
                    )
        return None

    async def call(self, server: str, tool: str, arguments: dict[str, object]) -> ToolResult:
        """One call of an offered tool; every failure a typed result."""
        connection = self.connections.get(server)
        if connection is None or connection.closed.is_set():
            status = self.status.get(server, "unknown")
            return ToolResult.refused("mcp_unavailable", f"the MCP server {server} is {status}")
        from ._client import McpFailure

        try:
            is_error, text, too_large = await connection.call_tool(tool, arguments)
        except McpFailure as failure:
            return ToolResult.refused(failure.code, failure.detail)
        limit = connection.launch.max_result_bytes
        if is_error:
            return ToolResult.refused("mcp_tool_error", text[:limit])
        if too_large:
            return ToolResult.refused(
                "mcp_result_too_large", f"{tool}'s result is over {limit} bytes"
            )
        return ToolResult(True, text)


def _pin_code(code: str) -> McpErrorCode:
    """A refused pin as the model is told it: the pin service's own codes, else that the
    server's tools are unavailable."""
    if code == "mcp_pins_corrupt":
        return "mcp_pins_corrupt"
    if code == "mcp_pin_limit":
        return "mcp_pin_limit"
    return "mcp_unavailable"


async def _either(first: trio.Event, second: trio.Event) -> None:
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait, first)
        nursery.start_soon(wait, second)
