"""A daemon whose router cannot start exits, saying why: the services started before it
stop, and nothing it opened keeps the process alive (its bus context terminates)."""

from __future__ import annotations

from pathlib import Path

from tests.supervisor.harness import agent_entry, make_config
from tests.supervisor.test_daemon import DaemonFactory


def test_a_daemon_whose_router_cannot_bind_exits_and_says_why(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()}))
    blocked = daemon.runtime_dir / "router.sock"
    blocked.mkdir(parents=True)  # the router can neither remove it nor bind over it
    daemon.start(wait_ready=False)
    assert daemon.wait_exit() != 0
    text = daemon.log_text()
    why = next(line for line in text.splitlines() if "service router could not start" in line)
    assert str(blocked) in why  # the operator reads why, not "internal error"
