"""What `config validate` says about a config and the pins the daemon recorded (issue 26).

The config's own rules are pure and read no state; this check needs the pin book, so the
validate command loads it (`PinStore.load`) and hands it here. Pure: config and book in,
issues out.

A readonly agent is offered only tools the server annotates read-only (the agent side
filters), so an MCP tool it is bound to that the pins record as not read-only grants
nothing: a warning, at the binding the operator wrote (its `peer_tools`, a peer group's
`tools`, or else its `mcp` entry for the server whose allowlist names the tool).
"""

from __future__ import annotations

from ..config import Config, ConfigIssue, mcp_tool_name, readonly_agents
from ._book import PinBook, PinKey


def readonly_pin_issues(config: Config, book: PinBook) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    for alias in sorted(readonly_agents(config)):
        agent = config.agents[alias]
        for server_index, server in enumerate(agent.mcp):
            spec = config.mcp_servers.get(server)
            if spec is None:
                continue  # rule_mcp_servers reports it
            for tool in spec.tools:
                pin = book.get(PinKey(alias, server, tool))
                if pin is None or (pin.read_only and pin.trusted_read_only):
                    continue
                name = mcp_tool_name(server, tool)
                why = (
                    f"readonly agent {alias!r} is bound to {name}, which the MCP pins record "
                    "as not read-only: it is never offered to this agent"
                )
                places: list[tuple[str | int, ...]] = [
                    ("agents", alias, "peer_tools", i)
                    for i, granted in enumerate(agent.peer_tools)
                    if granted == name
                ]
                places += [
                    ("peer_groups", group_name, "tools", i)
                    for group_name, group in sorted(config.peer_groups.items())
                    if alias in group.agents
                    for i, granted in enumerate(group.tools)
                    if granted == name
                ]
                if not places:
                    places = [("agents", alias, "mcp", server_index)]
                issues += [ConfigIssue(place, why) for place in places]
    return issues
