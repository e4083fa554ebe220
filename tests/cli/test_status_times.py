"""`status` times are wall-clock: an agent that never started says so (never a time made up
from trio's arbitrary clock origin, the "16 h" of issue 14)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]


def test_never_started_agents_have_no_time_and_others_a_sane_one(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(
        root,
        {"alpha": agent_entry(), "lazy": agent_entry(runtime_profile="lazy")},
        extra_profiles={"lazy": {"activation": "on-demand", "idle_stop_secs": 30.0}},
    )
    before = time.time()
    daemon = daemons(doc).start()
    status = daemon.wait_for(lambda s: daemon_agent(s, "alpha")["state"] == "running")
    lazy, alpha = daemon_agent(status, "lazy"), daemon_agent(status, "alpha")
    assert (lazy["state"], lazy["since"], lazy["since_secs"]) == ("stopped", None, None)
    assert before - 1 <= alpha["since"] <= time.time() + 1
    assert 0 <= alpha["since_secs"] < 60

    table = daemon.cli("status").stdout
    row = next(line for line in table.splitlines() if line.startswith("lazy "))
    assert "never started" in row, table
    alpha_row = next(line for line in table.splitlines() if line.startswith("alpha "))
    shown = datetime.fromtimestamp(alpha["since"]).strftime("%H:%M:")
    assert shown in alpha_row and "s ago)" in alpha_row, table


def daemon_agent(status: dict[str, object], alias: str) -> dict[str, object]:
    agents = status["agents"]
    assert isinstance(agents, list)
    return next(a for a in agents if a["alias"] == alias)
