"""Each agent reports its own sandbox in its Hello (issue 14): `status` shows whether it is
in force, and the daemon says at info when an agent runs unconfined."""

from __future__ import annotations

from pathlib import Path

from tests.supervisor.harness import agent_entry, make_config
from tests.supervisor.test_daemon import DaemonFactory
from zeroclaw.policy import abi_version


def test_status_shows_the_sandbox_in_force_per_running_agent(
    root: Path, daemons: DaemonFactory
) -> None:
    assert abi_version() >= 1, "this test needs a kernel with Landlock"
    doc = make_config(
        root,
        {
            "alpha": agent_entry(),
            "open": agent_entry(risk_profile="open"),
            "lazy": agent_entry(runtime_profile="lazy"),
        },
        extra_profiles={"lazy": {"activation": "on-demand"}},
    )
    doc["risk_profiles"]["open"] = {"level": "supervised", "sandbox": "none"}
    daemon = daemons(doc).start()
    status = daemon.wait_for(
        lambda s: all(a["state"] == "running" for a in s["agents"] if a["alias"] != "lazy")
    )
    agents = {a["alias"]: a for a in status["agents"]}
    assert agents["alpha"]["sandbox_in_force"] is True
    assert agents["open"]["sandbox_in_force"] is False
    assert agents["lazy"]["state"] == "stopped" and agents["lazy"]["sandbox_in_force"] is None
    assert "agent open runs without an OS sandbox" in daemon.log_text()

    table = daemon.cli("status").stdout.splitlines()
    header = next(line for line in table if line.startswith("AGENT"))
    assert header.rstrip().endswith("IN FORCE")
    row = {
        line.split()[0]: line.split()[-1]
        for line in table
        if line.split()[:1] in (["alpha"], ["open"], ["lazy"])
    }
    assert row == {"alpha": "yes", "open": "no", "lazy": "-"}

    daemon.cli("agents", "stop", "alpha")
    stopped = {a["alias"]: a for a in daemon.status()["agents"]}["alpha"]
    assert stopped["state"] == "stopped" and stopped["sandbox_in_force"] is None
