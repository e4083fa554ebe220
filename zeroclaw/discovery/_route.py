"""`invoke for CAPABILITY`: which registered adapter a call that names none goes to (the
seed's §5.7, §9.2, §10), pure.

- A business alias (`[discovery.aliases]`, the one table) names its adapter and capability,
  or its MCP server and tool: the call is that call, admitted as if it had named them.
- Otherwise only a capability whose descriptor allows auto-routing and has no side effect
  (`none`, `read_only_external`) is routed; anything that writes must be named.
- Among the active adapters that offer it and the agent is granted, the one from the
  strongest source wins (`SOURCE_PRIORITY`: project manifest > config > builtin template >
  $PATH > user directories), then by id; the winner is then admitted like a named call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._model import SOURCE_PRIORITY
from ._registry import AdapterRegistry, CallRefused


@dataclass(frozen=True)
class Alias:
    adapter: str
    capability: str | None = None
    tool: str | None = None


@dataclass(frozen=True)
class Routed:
    adapter: str
    capability: str | None
    tool: str | None
    why: str  # "alias" or "routed"


def route(
    registry: AdapterRegistry,
    *,
    capability: str | None,
    granted: tuple[str, ...],
    aliases: Mapping[str, Alias],
) -> Routed | CallRefused:
    """The adapter a call without one goes to, or why there is none."""
    if not capability:
        return CallRefused("bad_arguments", "name the adapter, or the capability to route")
    alias = aliases.get(capability)
    if alias is not None:
        return Routed(alias.adapter, alias.capability, alias.tool, "alias")
    descriptor = registry.capabilities.get(capability)
    if descriptor is None or not descriptor.auto_routable:
        why = (
            "is not in the capability registry"
            if descriptor is None
            else f"has side effect {descriptor.side_effect!r}"
            if descriptor.writes or descriptor.side_effect not in ("none", "read_only_external")
            else "does not allow auto-routing (allow_auto_route)"
        )
        return CallRefused(
            "capability_not_routable",
            f"{capability} {why}: name the adapter to call (zeroclaw discover list)",
        )
    candidates = sorted(
        (
            adapter
            for ident, adapter in registry.active.items()
            if ident in granted
            and capability in adapter.side_effects
            and adapter.item.kind != "mcp_server"  # its tools are named, never routed
        ),
        key=lambda a: (SOURCE_PRIORITY[a.item.source.kind], a.id),
    )
    if not candidates:
        return CallRefused(
            "no_adapter_for_capability",
            f"no registered adapter this agent may call offers {capability}",
        )
    return Routed(candidates[0].id, capability, None, "routed")
