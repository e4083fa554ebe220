"""The pin service's events as `zeroclaw events` words them, and as `--kind mcp` selects."""

from __future__ import annotations

from zeroclaw.events import McpSchemaChanged, McpServerChanged, McpToolTrusted
from zeroclaw.ops import EventFilter, describe

OLD, NEW = "a" * 64, "b" * 64


def test_a_schema_change_says_what_changed_and_the_fix() -> None:
    changed = McpSchemaChanged("alpha", "git", "status", OLD, NEW)
    assert describe(changed) == (
        f"alpha git/status changed its schema ({OLD[:12]} -> {NEW[:12]}): "
        "withheld until 'zeroclaw mcp trust git'"
    )
    claims = McpSchemaChanged("alpha", "git", "commit", OLD, OLD, False, True)
    assert "read-only false -> true" in describe(claims)


def test_trust_and_server_states_read_as_lines() -> None:
    assert describe(McpToolTrusted("alpha", "git", "status", NEW)) == (
        f"alpha git/status trusted at {NEW[:12]}"
    )
    assert describe(McpServerChanged("alpha", "git", "failed", "exited 1", 2)) == (
        "alpha git failed (restarts 2): exited 1"
    )


def test_the_mcp_family_and_its_agent_select_them() -> None:
    events = [
        McpSchemaChanged("alpha", "git", "status", OLD, NEW),
        McpToolTrusted("beta", "git", "status", NEW),
        McpServerChanged("alpha", "git", "ready"),
    ]
    chosen = EventFilter.of(agents=["alpha"], kinds=["mcp"])
    assert [e for e in events if chosen.matches(e)] == [events[0], events[2]]
