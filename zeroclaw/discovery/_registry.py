"""Phase B's adapter registry: what agents may call now, swapped whole on each scan, as a
pure state machine driven event by event (apply a snapshot, acquire, release).

- `apply` computes the next registry from a finished scan and swaps it in one step. An
  adapter whose manifest became broken (invalid, unreadable, leading out of its
  directory) keeps its last good registration and the change is reported, so a typo
  saved in an editor never takes a working adapter away. An adapter that is gone or
  refused by policy leaves the registry: it takes no new call, and while calls are in
  flight it is `draining` until the last one is released.
- `acquire` admits a call to an active adapter only, and counts it; `release` ends it.

Registered is not authorised: whether an agent may call an adapter is `admit_call`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from ..turns import AdapterRefusalCode, McpErrorCode
from ._model import CapabilityDescriptor, DiscoveredItem, SideEffect
from ._scan import Snapshot

ADAPTER_KINDS = ("cli_adapter", "http_adapter", "mcp_server", "workflow_skill")
# Refusals that mean "the manifest is broken", not "policy says no": last good stays.
_BROKEN = ("schema_invalid", "path_not_allowed")


class RegisteredAdapter(msgspec.Struct, frozen=True):
    id: str
    item: DiscoveredItem
    side_effects: dict[str, SideEffect]  # capability -> its side-effect class
    generation: int


@dataclass(frozen=True)
class RegistryChange:
    generation: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    kept_last_good: tuple[str, ...] = ()  # broken now; the previous registration stays
    draining: tuple[str, ...] = ()  # removed with calls in flight

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.replaced or self.kept_last_good)


@dataclass
class AdapterRegistry:
    generation: int = 0
    active: dict[str, RegisteredAdapter] = field(default_factory=dict)
    draining: dict[str, RegisteredAdapter] = field(default_factory=dict)
    capabilities: dict[str, CapabilityDescriptor] = field(default_factory=dict)
    inflight: Counter[str] = field(default_factory=Counter)

    def apply(self, snapshot: Snapshot) -> RegistryChange:
        generation = self.generation + 1
        capabilities = {
            e.item.id: e.item.descriptor
            for e in snapshot.entries
            if e.item.kind == "capability" and e.decision.registered and e.item.descriptor
        }
        winners = {
            e.item.id: e
            for e in snapshot.entries
            if e.item.kind in ADAPTER_KINDS and e.decision.action != "shadowed"
        }
        nxt: dict[str, RegisteredAdapter] = {}
        kept: list[str] = []
        for ident, entry in winners.items():
            if entry.decision.registered:
                nxt[ident] = RegisteredAdapter(
                    ident, entry.item, _side_effects(entry.item, capabilities), generation
                )
            elif ident in self.active and entry.decision.reason in _BROKEN:
                nxt[ident] = self.active[ident]
                kept.append(ident)
        added = sorted(nxt.keys() - self.active.keys())
        removed = sorted(self.active.keys() - nxt.keys())
        replaced = sorted(
            i
            for i in nxt.keys() & self.active.keys()
            if i not in kept and nxt[i].item != self.active[i].item
        )
        for ident in removed:
            if self.inflight[ident] > 0:
                self.draining[ident] = self.active[ident]
        self.active = nxt
        self.capabilities = capabilities
        self.generation = generation
        return RegistryChange(
            generation,
            tuple(added),
            tuple(removed),
            tuple(replaced),
            tuple(sorted(kept)),
            tuple(sorted(i for i in removed if i in self.draining)),
        )

    def acquire(self, ident: str) -> RegisteredAdapter | None:
        adapter = self.active.get(ident)
        if adapter is not None:
            self.inflight[ident] += 1
        return adapter

    def release(self, ident: str) -> None:
        if self.inflight[ident] > 0:
            self.inflight[ident] -= 1
        if self.inflight[ident] == 0:
            del self.inflight[ident]
            self.draining.pop(ident, None)


def _side_effects(
    item: DiscoveredItem, capabilities: Mapping[str, CapabilityDescriptor]
) -> dict[str, SideEffect]:
    # An unknown capability (allowed by policy) counts as the worst side effect.
    return {
        cap: capabilities[cap].side_effect if cap in capabilities else "shell_or_process"
        for cap in item.capabilities
    }


# --- may this agent call it? -------------------------------------------------------------

RiskLevelName = Literal["readonly", "supervised", "full"]
_HARMLESS: tuple[SideEffect, ...] = ("none", "read_only_external")


# The kinds an agent's call runs: a local program; a tool of an MCP server, started for
# the call inside the agent's sandbox or reached over HTTP by the daemon; an HTTP adapter's
# endpoint, reached by the daemon (ADR 0054). Workflow skills are registered, never run.
CALLABLE_KINDS = ("cli_adapter", "http_adapter", "mcp_server")
MCP_TOOL_CALL = "mcp.tool.call"


def over_http(item: DiscoveredItem) -> bool:
    """Whether a call of `item` goes over the network (the daemon reaches its endpoint):
    an HTTP adapter, or an MCP server with an endpoint and no program."""
    return item.kind == "http_adapter" or (
        item.kind == "mcp_server" and bool(item.endpoint) and not item.command
    )


@dataclass(frozen=True)
class CallAllowed:
    adapter: RegisteredAdapter
    capability: str
    side_effect: SideEffect
    needs_approval: bool
    tool: str = ""  # an MCP server's tool
    endpoint: str = ""  # over HTTP: the URL the call goes to, once its reach was allowed


@dataclass(frozen=True)
class CallRefused:
    code: AdapterRefusalCode | McpErrorCode
    message: str


def admit_call(
    registry: AdapterRegistry,
    *,
    agent: str,
    granted: tuple[str, ...],
    level: RiskLevelName,
    adapter_id: str,
    capability: str | None,
    tool: str | None = None,
) -> CallAllowed | CallRefused:
    """Whether `agent` may call `adapter_id` for `capability` (pure; no counting). For an
    MCP server, `tool` names the tool (capability mcp.tool.call)."""
    if adapter_id not in granted:
        return CallRefused(
            "adapter_not_granted",
            f"{agent} may not call {adapter_id!r}: add it to [agents.{agent}] adapters",
        )
    adapter = registry.active.get(adapter_id)
    if adapter is None:
        return CallRefused(
            "adapter_not_found",
            f"no registered adapter {adapter_id!r} (zeroclaw discover explain {adapter_id})",
        )
    if adapter.item.kind not in CALLABLE_KINDS:
        return CallRefused(
            "adapter_unsupported",
            f"{adapter_id!r} is a {adapter.item.kind}; only CLI and HTTP adapters and MCP "
            "servers run",
        )
    if adapter.item.kind == "mcp_server":
        return _admit_tool(adapter, level, capability, tool)
    if tool:
        what = "an HTTP adapter" if adapter.item.kind == "http_adapter" else "a program"
        return CallRefused("bad_arguments", f"{adapter_id!r} is {what}: it has no tools")
    offered = adapter.side_effects
    if capability is None:
        if len(offered) != 1:
            return CallRefused(
                "bad_arguments",
                f"{adapter_id!r} offers {', '.join(offered)}: name the capability",
            )
        capability = next(iter(offered))
    if capability not in offered:
        return CallRefused(
            "capability_not_offered",
            f"{adapter_id!r} offers {', '.join(offered) or 'nothing'}, not {capability!r}",
        )
    effect = offered[capability]
    if level == "readonly" and effect not in _HARMLESS:
        return CallRefused(
            "read_only_profile",
            f"{capability} has side effect {effect!r}; a readonly agent may only use "
            "capabilities with none or read_only_external",
        )
    return CallAllowed(
        adapter, capability, effect, level == "supervised" and effect not in _HARMLESS
    )


def _admit_tool(
    adapter: RegisteredAdapter, level: RiskLevelName, capability: str | None, tool: str | None
) -> CallAllowed | CallRefused:
    """An MCP server's tool: in its manifest's `tools` allowlist and, once a metadata probe
    listed the server's tools, one it offers. Its side effect is mcp.tool.call's, unless
    the server annotates it read-only (then `read_only_external`: a readonly agent may call
    it, a supervised one is not asked)."""
    ident = adapter.id
    if capability not in (None, MCP_TOOL_CALL):
        return CallRefused(
            "capability_not_offered",
            f"{ident!r} is an MCP server: its tools are called as {MCP_TOOL_CALL}, "
            f"not {capability!r}",
        )
    if MCP_TOOL_CALL not in adapter.side_effects:
        return CallRefused("capability_not_offered", f"{ident!r} does not declare {MCP_TOOL_CALL}")
    if not tool:
        return CallRefused("bad_arguments", f"{ident!r} is an MCP server: name the tool")
    allowed = adapter.item.allowlists.get("tools", ())
    if tool not in allowed:
        return CallRefused(
            "mcp_tool_not_allowed",
            f"{tool!r} is not in {ident!r}'s tools allowlist ({', '.join(allowed) or 'none'})",
        )
    probed = adapter.item.mcp
    listed = {t.name: t for t in probed.tools} if probed is not None else {}
    if probed is not None and tool not in listed:
        return CallRefused(
            "mcp_tool_not_allowed", f"{ident!r} did not list {tool!r} to its metadata probe"
        )
    effect: SideEffect = adapter.side_effects[MCP_TOOL_CALL]
    if tool in listed and listed[tool].read_only:
        effect = "read_only_external"
    if level == "readonly" and effect not in _HARMLESS:
        return CallRefused(
            "mcp_tool_not_allowed",
            f"{tool!r} is not annotated read-only by {ident!r}; a readonly agent may only "
            "call read-only tools",
        )
    return CallAllowed(
        adapter,
        MCP_TOOL_CALL,
        effect,
        level == "supervised" and effect not in _HARMLESS,
        tool,
    )
