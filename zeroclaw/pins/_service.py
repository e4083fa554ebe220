"""The daemon's MCP pin service (`MCP_SERVICE`, ADR 0053): the agents' tool listings judged
against the pin book, their servers' live state, and the operator's trust.

The caller is the router's authenticated identity, never a field of the body: an agent
pins only servers its own `[agents.<alias>] mcp` lists, and is offered only tools the
server's `tools` allowlist names. Every listed tool with a valid name is pinned (bounded by
the book), so a tool the operator allows later is judged against its first sight, not
against whatever it says the day it is allowed. The book is written (on a thread, one
write at a time) whenever a call changed it, before the answer goes back.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from .._ops import Nothing, OpTable
from ..bus import Request, Response, answer, refusal, serve_op
from ..config import Config
from ..control import McpServerInfo, McpServerLive, McpStatus, McpToolPin
from ..events import EventSink, McpSchemaChanged, McpServerChanged, McpToolTrusted
from ..turns import (
    MCP_OPERATIONS,
    MCP_PIN,
    MCP_SERVICE,
    MCP_STATE,
    McpPinAnswer,
    McpPinCall,
    McpServerState,
)
from ._book import (
    MAX_TOOLS_PER_SERVER,
    BadListing,
    Pin,
    PinBook,
    PinKey,
    PinLimit,
    ToolSeen,
    TrustOutcome,
)
from ._store import PinStore, PinStoreCorrupt

log = logging.getLogger("zeroclaw.pins")

MAX_DETAIL = 500  # characters of a server state's detail kept for `mcp list`


class PinsUnavailable(Exception):
    """The pin store is unreadable (its problem is the message)."""


class UnknownServer(Exception):
    pass


@dataclass(frozen=True)
class Trusted:
    trusted: tuple[McpToolPin, ...]
    already: tuple[McpToolPin, ...]
    stale: tuple[McpToolPin, ...] = ()  # their latest schema is not the digest given


class PinService:
    def __init__(
        self,
        store: PinStore,
        config: Callable[[], Config],
        events: EventSink | None = None,
        clock: Callable[[], float] = time.time,
        bound: Callable[[str], frozenset[str]] = lambda identity: frozenset(),
    ) -> None:
        """`config`: the running config (a reload changes who may pin what); `bound`: the
        MCP servers a sub-agent runtime's revision binds, by its bus identity (issue 26)."""
        self.store = store
        self._config = config
        self._bound = bound
        self.events = events
        self._clock = clock
        self.book: PinBook | None = None  # None: the store is unreadable
        self.problem = ""
        self._signature: tuple[int, int, int] | None = None
        self._live: dict[tuple[str, str], tuple[McpServerState, float]] = {}
        self._lock = trio.Lock()  # one change and its write at a time
        self._load()

    def _load(self) -> None:
        self._signature = self.store.signature()
        try:
            self.book = self.store.load()
            self.problem = ""
        except (PinStoreCorrupt, OSError) as exc:  # withheld, never trusted anew
            problem = str(exc) if isinstance(exc, PinStoreCorrupt) else f"{self.store.path}: {exc}"
            if problem != self.problem:
                log.error("%s", problem)
            self.book, self.problem = None, problem

    def _book(self) -> PinBook:
        """The book; a store found unreadable is read again once its file was replaced or
        moved aside (the operator's fix needs no restart)."""
        if self.book is None and self.store.signature() != self._signature:
            self._load()
        if self.book is None:
            raise PinsUnavailable(self.problem)
        return self.book

    async def _save(self, book: PinBook) -> None:
        await trio.to_thread.run_sync(self.store.save, book)
        self._signature = self.store.signature()

    # --- the bus service -----------------------------------------------------------------

    async def serve(self, sender: str, request: Request) -> Response:
        """`MCP_SERVICE` requests; `sender` is the router's identity of the agent."""
        return await serve_op(
            _TABLE, (self, sender, request), request, log=log, service="MCP pins", sender=sender
        )

    def _refused(self, sender: str, server: str) -> str | None:
        """Why `sender` may not speak of `server`, or None."""
        config = self._config()
        if sender.startswith(SUBAGENT_PREFIX):
            if server not in self._bound(sender) or server not in config.mcp_servers:
                return f"{sender[:80]}: its bundle binds no MCP server {server[:64]!r}"
            return None
        agent = config.agents.get(sender)
        if agent is None or server not in agent.mcp or server not in config.mcp_servers:
            return f"[agents.{sender[:64]}] mcp does not list MCP server {server[:64]!r}"
        return None

    async def _pin(self, sender: str, request: Request, call: McpPinCall) -> Response:
        why = self._refused(sender, call.server)
        if why is not None:
            return refusal(request, "mcp_tool_not_allowed", why)
        if len(call.tools) > MAX_TOOLS_PER_SERVER:
            detail = (
                f"{len(call.tools)} tools listed; the daemon pins at most {MAX_TOOLS_PER_SERVER}"
            )
            return refusal(request, "mcp_pin_limit", detail)
        seen = [ToolSeen(t.name, t.digest, t.read_only, t.description) for t in call.tools]
        async with self._lock:
            try:
                book = self._book()
            except PinsUnavailable as exc:
                return refusal(request, "mcp_pins_corrupt", str(exc))
            try:
                observed = book.observe(pin_owner(sender), call.server, seen, self._clock())
            except BadListing as exc:
                return refusal(request, "bad_request", str(exc))
            except PinLimit as exc:
                return refusal(request, exc.code, exc.detail)
            if observed.dirty:
                await self._save(book)
        # Read again after the write: a reload meanwhile may have changed the allowlist.
        server = self._config().mcp_servers.get(call.server)
        allowed = frozenset(server.tools if server is not None else ())
        for change in observed.changes:
            if change.key.tool not in allowed:
                continue  # pinned and listed, never offered: no event a flood could repeat
            log.warning(
                "MCP tool %s/%s of %s changed its schema; withheld until 'zeroclaw mcp trust %s'",
                change.key.server,
                change.key.tool,
                sender,
                change.key.server,
            )
            self._publish(
                McpSchemaChanged(
                    sender,
                    call.server,
                    change.key.tool,
                    change.trusted_digest,
                    change.digest,
                    change.trusted_read_only,
                    change.read_only,
                )
            )
        return answer(
            request,
            McpPinAnswer(
                offered=tuple(n for n in observed.offered if n in allowed),
                withheld=tuple(n for n in observed.withheld if n in allowed),
            ),
        )

    async def _state(self, sender: str, request: Request, state: McpServerState) -> Response:
        why = self._refused(sender, state.server)
        if why is not None:
            return refusal(request, "mcp_tool_not_allowed", why)
        state = McpServerState(
            server=state.server,
            status=state.status,
            detail=state.detail[:MAX_DETAIL],
            restarts=state.restarts,
            pid=state.pid,
            at_ns=state.at_ns,
        )
        key = (sender, state.server)
        before = self._live.get(key)
        if before is not None and state.at_ns < before[0].at_ns:
            return answer(request, Nothing())  # stale: a later state was told first
        self._live[key] = (state, self._clock())
        if before is None or (before[0].status, before[0].restarts) != (
            state.status,
            state.restarts,
        ):
            self._publish(
                McpServerChanged(sender, state.server, state.status, state.detail, state.restarts)
            )
        return answer(request, Nothing())

    def agent_down(self, alias: str) -> None:
        """The agent's process is gone, and with it the stdio servers it ran as children:
        each server it last reported as anything else is `stopped` now."""
        for (agent, server), (state, _) in sorted(self._live.items()):
            if agent == alias and state.status != "stopped":
                stopped = McpServerState(
                    server, "stopped", "its agent is not running", at_ns=time.monotonic_ns()
                )
                self._live[(agent, server)] = (stopped, self._clock())
                self._publish(McpServerChanged(agent, server, stopped.status, stopped.detail))

    def _publish(self, event: McpSchemaChanged | McpServerChanged | McpToolTrusted) -> None:
        if self.events is not None:
            self.events.publish(event)

    # --- what the operator sees and does ---------------------------------------------------

    def servers(self) -> tuple[McpServerInfo, ...]:
        """Every configured server, with its agents, their live state and its pin counts."""
        config = self._config()
        pins = self.book.items() if self.book is not None else []
        out = []
        for name, server in sorted(config.mcp_servers.items()):
            users = tuple(a for a, agent in sorted(config.agents.items()) if name in agent.mcp)
            live = tuple(
                McpServerLive(agent, s.status, s.detail, s.restarts, s.pid, at)
                for (agent, srv), (s, at) in sorted(self._live.items())
                if srv == name and agent in users  # not one a reload took the server from
            )
            mine = [pin for key, pin in pins if key.server == name]
            target = (
                shlex.join([server.command, *server.args])
                if server.command is not None
                else str(server.url)
            )
            out.append(
                McpServerInfo(
                    name=name,
                    transport=server.transport,
                    target=target,
                    tools=server.tools,
                    agents=users,
                    live=live,
                    pinned=len(mine),
                    withheld=sum(pin.withheld for pin in mine),
                )
            )
        return tuple(out)

    def status(self) -> McpStatus | None:
        """What `zeroclaw status` shows: None while no MCP server is configured."""
        servers = len(self._config().mcp_servers)
        if not servers and self.book is not None:
            return None
        pins = self.book.items() if self.book is not None else []
        withheld = sum(pin.withheld for _, pin in pins)
        return McpStatus(servers, len(pins), withheld, self.problem)

    def server(self, name: str) -> McpServerInfo:
        for info in self.servers():
            if info.name == name:
                return info
        raise UnknownServer(name)

    def tools(self, agent: str | None = None, server: str | None = None) -> tuple[McpToolPin, ...]:
        if self.book is None:
            return ()
        config = self._config()
        return tuple(
            tool_pin(config, key, pin) for key, pin in self.book.select(server, None, agent)
        )

    async def trust(
        self,
        server: str,
        tool: str | None = None,
        agent: str | None = None,
        digest: str | None = None,
    ) -> Trusted:
        """The operator's trust (of the schema whose digest starts with `digest`, when
        given); UnknownServer when neither the config nor the book knows `server`,
        PinsUnavailable when the store is unreadable."""
        async with self._lock:
            book = self._book()
            if server not in self._config().mcp_servers and not book.select(server):
                raise UnknownServer(server)
            outcome: TrustOutcome = book.trust(
                server, tool, agent, now=self._clock(), digest=digest
            )
            if outcome.trusted:
                await self._save(book)
        config = self._config()
        done, stale_keys = frozenset(outcome.trusted), frozenset(outcome.stale)
        trusted: list[McpToolPin] = []
        already: list[McpToolPin] = []
        stale: list[McpToolPin] = []
        for key in outcome.matched:
            pin = book.get(key)
            assert pin is not None
            into = trusted if key in done else stale if key in stale_keys else already
            into.append(tool_pin(config, key, pin))
        for key in outcome.trusted:
            pin = book.get(key)
            assert pin is not None
            log.info(
                "MCP tool %s/%s of %s trusted by the operator", key.server, key.tool, key.agent
            )
            self._publish(McpToolTrusted(key.agent, key.server, key.tool, pin.trusted_digest))
        return Trusted(tuple(trusted), tuple(already), tuple(stale))


SUBAGENT_PREFIX = "sub:"  # a sub-agent runtime's identity: sub:<id>@<digest12>


def pin_owner(sender: str) -> str:
    """Whose pins a sender's listing is judged against: an agent's own; a sub-agent
    runtime's are its sub-agent's (`sub:<id>`), whatever the revision, so a new revision
    of a bundle does not see a changed schema as new."""
    if sender.startswith(SUBAGENT_PREFIX):
        return sender.partition("@")[0]
    return sender


def tool_pin(config: Config, key: PinKey, pin: Pin) -> McpToolPin:
    server = config.mcp_servers.get(key.server)
    return McpToolPin(
        agent=key.agent,
        server=key.server,
        tool=key.tool,
        state="withheld" if pin.withheld else "trusted",
        digest=pin.latest_digest,
        trusted_digest=pin.trusted_digest,
        first_digest=pin.first_digest,
        read_only=pin.read_only,
        trusted_read_only=pin.trusted_read_only,
        allowed=server is not None and key.tool in server.tools,
        first_seen=pin.first_seen,
        description=pin.description,
        changed_at=pin.changed_at,
        trusted_at=pin.trusted_at,
    )


_Ctx = tuple[PinService, str, Request]  # the service, the sender, its request

# The MCP service's one table: op -> request struct -> handler.
_TABLE: OpTable[_Ctx, Awaitable[Response]] = (
    OpTable[_Ctx, Awaitable[Response]](MCP_SERVICE)
    .on(MCP_PIN, lambda ctx, call: ctx[0]._pin(ctx[1], ctx[2], call))
    .on(MCP_STATE, lambda ctx, state: ctx[0]._state(ctx[1], ctx[2], state))
    .require(MCP_OPERATIONS)
)
