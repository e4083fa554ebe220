"""The pin book: which schema of each MCP tool the operator trusts, per agent and server.

Sans-IO: the service feeds it what an agent reported and the time; the store persists it.
A tool is pinned by its digest (`turns.tool_digest`: name, description, input schema) and
its read-only annotation together: the digest does not cover annotations, and a tool that
starts to claim `readOnlyHint` would otherwise reach readonly agents unreviewed.

- First seen: recorded, trusted as it is (trust on first use), offered.
- Seen as trusted: offered.
- Seen different: withheld, and reported as a change once per new schema (the same changed
  schema again is withheld quietly), until the operator `trust`s the latest one; at most
  MAX_REPORTED_CHANGES of them per pin until then, so a server flipping its schema every
  listing cannot flood the daemon's events (the pin still follows every listing).

Bounded: at most MAX_SERVERS_PER_AGENT servers per agent and MAX_TOOLS_PER_SERVER tools
per server; an observation past either is refused whole (`PinLimit`), never half applied.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import msgspec

MAX_TOOLS_PER_SERVER = 512
MAX_SERVERS_PER_AGENT = 64
MAX_DESCRIPTION = 200  # characters kept for the operator's listing (the wire's own cut)
MAX_REPORTED_CHANGES = 8  # schema changes reported per pin until it is trusted again

# The config's MCP tool-name syntax: a name the agent could offer as mcp__<server>__<tool>.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")

PinLimitCode = Literal["mcp_pin_limit"]


class Pin(msgspec.Struct, frozen=True, kw_only=True):
    """One tool of one server as one agent reported it. `first_*`: its first sight;
    `trusted_*`: what is offered; `latest_*`: what the server listed last."""

    first_digest: str
    trusted_digest: str
    trusted_read_only: bool
    latest_digest: str
    read_only: bool  # the latest listing's annotation
    description: str = ""
    first_seen: float
    changed_at: float | None = None  # when the latest listing first differed from the trust
    trusted_at: float | None = None  # when the operator last trusted it (None: first use)
    reported: int = 0  # changes reported since it was last as trusted (MAX_REPORTED_CHANGES)

    @property
    def withheld(self) -> bool:
        return (self.latest_digest, self.read_only) != (self.trusted_digest, self.trusted_read_only)


class ToolSeen(msgspec.Struct, frozen=True):
    """One tool as a server listed it (the service's copy of the wire's `McpToolSeen`)."""

    name: str
    digest: str
    read_only: bool = False
    description: str = ""


@dataclass(frozen=True)
class PinKey:
    agent: str
    server: str
    tool: str


@dataclass(frozen=True)
class SchemaChange:
    """A tool whose listing differs from its trusted pin, seen so the first time."""

    key: PinKey
    trusted_digest: str
    digest: str
    trusted_read_only: bool
    read_only: bool


@dataclass(frozen=True)
class Observation:
    offered: tuple[str, ...]
    withheld: tuple[str, ...]
    changes: tuple[SchemaChange, ...]
    added: tuple[str, ...]  # first seen now
    dirty: bool  # the book changed (the store must write it)


@dataclass(frozen=True)
class TrustOutcome:
    matched: tuple[PinKey, ...]  # every pin the selector named
    trusted: tuple[PinKey, ...]  # those that were withheld and are offered now
    stale: tuple[PinKey, ...] = ()  # matched, but their latest schema is not the digest given


class PinLimit(Exception):
    """An observation the book refuses whole: too many tools or servers."""

    code: PinLimitCode = "mcp_pin_limit"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadListing(ValueError):
    """A listing that is not one: a digest that is no sha256 hex, a tool named twice."""


class PinBook:
    """agent -> server -> tool -> Pin. Mutable; every change goes through its methods."""

    def __init__(
        self,
        pins: Iterable[tuple[PinKey, Pin]] = (),
        *,
        max_tools: int = MAX_TOOLS_PER_SERVER,
        max_servers: int = MAX_SERVERS_PER_AGENT,
    ) -> None:
        self.max_tools = max_tools
        self.max_servers = max_servers
        self._pins: dict[str, dict[str, dict[str, Pin]]] = {}
        for key, pin in pins:
            servers = self._pins.setdefault(key.agent, {})
            tools = servers.setdefault(key.server, {})
            if key.tool in tools:
                raise BadListing(f"{key.agent}/{key.server}/{key.tool} is pinned twice")
            if len(servers) > max_servers or len(tools) >= max_tools:
                raise PinLimit(f"{key.agent}/{key.server}: more pins than the book holds")
            tools[key.tool] = pin

    # --- reading -------------------------------------------------------------------------

    def get(self, key: PinKey) -> Pin | None:
        return self._pins.get(key.agent, {}).get(key.server, {}).get(key.tool)

    def items(self) -> list[tuple[PinKey, Pin]]:
        """Every pin, sorted by agent, server, tool."""
        return [
            (PinKey(agent, server, tool), pin)
            for agent, servers in sorted(self._pins.items())
            for server, tools in sorted(servers.items())
            for tool, pin in sorted(tools.items())
        ]

    def __len__(self) -> int:
        return sum(len(t) for s in self._pins.values() for t in s.values())

    def select(
        self, server: str | None = None, tool: str | None = None, agent: str | None = None
    ) -> list[tuple[PinKey, Pin]]:
        return [
            (key, pin)
            for key, pin in self.items()
            if (server is None or key.server == server)
            and (tool is None or key.tool == tool)
            and (agent is None or key.agent == agent)
        ]

    # --- changing ------------------------------------------------------------------------

    def observe(
        self, agent: str, server: str, tools: Iterable[ToolSeen], now: float
    ) -> Observation:
        """What `server` listed to `agent` now: which tools it may offer, which are withheld,
        and what changed. Tools whose names the agent could not offer are skipped (neither
        pinned nor offered). BadListing or PinLimit leave the book as it was."""
        listing: dict[str, ToolSeen] = {}
        for seen in tools:
            if not DIGEST.match(seen.digest):
                raise BadListing(f"{seen.name[:64]!r}: the digest is not a sha256 hex digest")
            if seen.name in listing:
                raise BadListing(f"{seen.name[:64]!r} is listed twice")
            listing[seen.name] = seen
        listed = {name: seen for name, seen in listing.items() if TOOL_NAME.match(name)}
        servers = self._pins.get(agent, {})
        known = servers.get(server, {})
        if server not in servers and len(servers) >= self.max_servers:
            raise PinLimit(f"{agent} has pins of {len(servers)} servers, the most the book holds")
        new = sum(1 for name in listed if name not in known)
        if len(known) + new > self.max_tools:
            raise PinLimit(
                f"{server} listed {len(known) + new} tools to {agent}; the book pins at most "
                f"{self.max_tools} per server"
            )
        offered: list[str] = []
        withheld: list[str] = []
        changes: list[SchemaChange] = []
        added: list[str] = []
        updated = dict(known)
        for name, seen in listed.items():
            description = seen.description[:MAX_DESCRIPTION]
            pin = known.get(name)
            if pin is None:
                updated[name] = Pin(
                    first_digest=seen.digest,
                    trusted_digest=seen.digest,
                    trusted_read_only=seen.read_only,
                    latest_digest=seen.digest,
                    read_only=seen.read_only,
                    description=description,
                    first_seen=now,
                )
                added.append(name)
                offered.append(name)
                continue
            now_seen = (seen.digest, seen.read_only)
            if now_seen == (pin.trusted_digest, pin.trusted_read_only):
                offered.append(name)
                after = msgspec.structs.replace(
                    pin,
                    latest_digest=seen.digest,
                    read_only=seen.read_only,
                    description=description,
                    changed_at=None,
                    reported=0,
                )
            else:
                withheld.append(name)
                if now_seen != (pin.latest_digest, pin.read_only):  # a new schema: once
                    if pin.reported < MAX_REPORTED_CHANGES:
                        changes.append(
                            SchemaChange(
                                PinKey(agent, server, name),
                                pin.trusted_digest,
                                seen.digest,
                                pin.trusted_read_only,
                                seen.read_only,
                            )
                        )
                    after = msgspec.structs.replace(
                        pin,
                        latest_digest=seen.digest,
                        read_only=seen.read_only,
                        description=description,
                        changed_at=now,
                        reported=min(pin.reported + 1, MAX_REPORTED_CHANGES),
                    )
                else:
                    after = msgspec.structs.replace(pin, description=description)
            if after != pin:
                updated[name] = after
        dirty = updated != known
        if dirty:
            self._pins.setdefault(agent, {})[server] = updated
        return Observation(tuple(offered), tuple(withheld), tuple(changes), tuple(added), dirty)

    def trust(
        self,
        server: str,
        tool: str | None = None,
        agent: str | None = None,
        *,
        now: float,
        digest: str | None = None,
    ) -> TrustOutcome:
        """The operator accepts what `server` (its `tool`, for `agent`; None: every one)
        listed last: the latest schema of each matching pin becomes the trusted one. With
        `digest` (a prefix of the digest the operator reviewed), only a pin whose latest
        schema is that one: a server that changed it since is `stale`, not trusted."""
        matched: list[PinKey] = []
        trusted: list[PinKey] = []
        stale: list[PinKey] = []
        for key, pin in self.select(server, tool, agent):
            matched.append(key)
            if digest is not None and not pin.latest_digest.startswith(digest):
                stale.append(key)
                continue
            if pin.withheld:
                self._pins[key.agent][key.server][key.tool] = msgspec.structs.replace(
                    pin,
                    trusted_digest=pin.latest_digest,
                    trusted_read_only=pin.read_only,
                    changed_at=None,
                    trusted_at=now,
                    reported=0,
                )
                trusted.append(key)
        return TrustOutcome(tuple(matched), tuple(trusted), tuple(stale))
