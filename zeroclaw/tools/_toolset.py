"""A tool is one object: what a model is told (name, description, the JSON schema of its
arguments), the msgspec struct its arguments decode into, and `run(ctx, args)`. A toolset
is a value: each runtime is given its own (the agent's chat, a peer's turn, later a
sub-agent), and the providers render exactly the specs of the toolset a turn runs with.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec

from .._ops import Operation
from ..policy import PathRules
from ..providers import ToolSpec
from ..turns import AdapterCall, AdapterInvoke, CatalogCall, DispatchCall
from ._base import Approver, ToolResult
from ._shell import ShellSettings

A = TypeVar("A", bound=msgspec.Struct)
Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)


class Reach(Protocol):
    """What an agent reaches beyond its own process: memory, peers, sub-agents and adapters (through
    the router in the daemon; the store, and "unavailable" peers and sub-agents, when a CLI
    runs the agent)."""

    async def memory(self, op: Operation[Req, Ans], request: Req) -> Ans:
        """One memory operation (a struct of `zeroclaw.turns`' memory wire); its answer
        struct, or CallRefused with the memory service's code (or the bus's)."""
        ...

    async def message_peer(
        self,
        to: str,
        text: str,
        *,
        delegate: bool,
        depth: int,
        session: str = "default",
        turn: str | None = None,
    ) -> ToolResult:
        """`session`: the asking turn's session key (the daemon's); the router names the
        callee's session after it, inside the asker's peer namespace (ADR 0041).
        `turn`: the asking turn's id; the router passes that turn's grant on (ADR 0052)."""
        ...

    async def subagent(
        self, op: Literal["catalog", "dispatch"], body: CatalogCall | DispatchCall
    ) -> ToolResult:
        """Ask the daemon's sub-agent service. ok: `data` is the decoded `CatalogAnswer` or
        `DispatchAnswer` as builtins (a dispatch answers once its invocation ended, whatever
        its state); not ok: the service's refusal code (or the bus's) and its detail."""
        ...

    async def adapter(
        self, op: Literal["admit", "invoke"], body: AdapterCall | AdapterInvoke
    ) -> ToolResult:
        """Ask the daemon's adapter service. ok: `data` is the `AdapterAdmission` ("admit")
        or the `AdapterResult` ("invoke") as builtins; not ok: the service's refusal code
        (or the bus's) and its detail."""
        ...

    async def schedule(self, op: Operation[Req, Ans], body: Req) -> ToolResult:
        """Ask the daemon's schedule service (the reminder tools, issue 28). ok: `data` is
        the op's answer as builtins; not ok: the service's refusal code and its detail."""
        ...


@dataclass(frozen=True)
class ToolContext:
    """What one turn's tools work with. `approver` is the turn's channel, already bounded
    by the engine's approval timeout (None: nobody to ask, so asking is a denial);
    `depth` counts the asks and delegations that led to this turn; `session` is the turn's
    session key as the daemon named it (a peer ask carries it: one origin's turns never
    continue the peer conversation of another's); `turn` is the id of the message that
    opened the turn (the daemon's chat, or a peer's question): a peer ask names it, and the
    router passes on that turn's grant, so a chain never widens it (ADR 0052); an
    approval for a daemon service (an adapter's run) is found by it too."""

    rules: PathRules
    shell: ShellSettings
    reach: Reach
    asks_approval: bool  # a supervised profile asks before medium-risk actions
    approver: Approver | None = None
    delegates: frozenset[str] = frozenset()
    depth: int = 0
    session: str = "default"
    turn: str | None = None

    async def approved(self, what: str) -> bool:
        return self.approver is not None and await self.approver(what)


class BadArguments(Exception):
    """A model's arguments that do not decode into the tool's argument struct."""


def _parameters(args: type[msgspec.Struct]) -> dict[str, Any]:
    """The argument struct's JSON schema, inline (no $ref), as providers send it."""
    schema = msgspec.json.schema(args)
    ref = schema["$ref"].rsplit("/", 1)[-1]
    body: dict[str, Any] = dict(schema["$defs"][ref])
    body.pop("title", None)
    body["additionalProperties"] = False
    return body


@dataclass(frozen=True)
class Tool(Generic[A]):
    name: str
    description: str
    args: type[A]
    run: Callable[[ToolContext, A], Awaitable[ToolResult]]

    @functools.cached_property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, _parameters(self.args))

    def decode(self, raw: object) -> A:
        """The provider's arguments as this tool's struct; BadArguments says what is wrong.
        Unknown fields are ignored, as models add them."""
        try:
            return msgspec.convert(raw, self.args)
        except msgspec.ValidationError as exc:
            raise BadArguments(f"{self.name}: {exc}") from None


class Toolset:
    """Tools by name, in a fixed order (the order providers list them)."""

    def __init__(self, name: str, tools: Iterable[Tool[Any]]) -> None:
        self.name = name
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"tool {tool.name!r} twice in toolset {name!r}")
            self._tools[tool.name] = tool
        self.specs: tuple[ToolSpec, ...] = tuple(t.spec for t in self._tools.values())

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def only(self, names: Iterable[str], name: str) -> Toolset:
        """The tools of this set among `names`, in this set's order."""
        wanted = frozenset(names)
        return Toolset(name, (t for t in self._tools.values() if t.name in wanted))

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolset({self.name!r}, {list(self._tools)})"
