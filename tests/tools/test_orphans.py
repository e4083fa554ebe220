"""The agent's sweep after a command, in a real process confined the way an agent is
(subreaper, then Landlock with /proc closed): what the command left behind dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PATIENCE, REPO
from tests.supervisor.harness import process_alive, wait_gone
from zeroclaw.policy import abi_version

AGENT = textwrap.dedent(
    """
    import os, sys, trio
    from zeroclaw.policy import apply_sandbox, plan_for, rules_for
    from zeroclaw.tools import run_shell
    from zeroclaw.tools._orphans import become_subreaper

    ws, bin_dir, confine = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    become_subreaper()
    if confine:
        apply_sandbox(plan_for(ws))
        try:
            os.listdir("/proc")
            sys.exit("the agent's Landlock ruleset should keep /proc closed")
        except PermissionError:
            pass
    rules = rules_for(ws, workspace_only=True, may_write=True)

    async def main():
        result = await run_shell(
            "spawner", rules=rules, allowed_commands=frozenset({"spawner"}),
            may_run_shell=True, block_high_risk=True, asks_approval=False, approver=None,
            timeout_secs=20, agent_env={"PATH": bin_dir + ":" + os.environ["PATH"]},
            home_root=ws,  # (run_shell's own ruleset is off: it would refuse a #! script)
        )
        assert result.ok, result
        print("done", flush=True)

    trio.run(main)
    """
)
SPAWNER = """#!/bin/sh
setsid sleep 4141 </dev/null >/dev/null 2>&1 &
echo $! > grandchild.pid
"""


@pytest.mark.parametrize(
    "confine",
    [
        pytest.param(True, marks=pytest.mark.skipif(abi_version() < 1, reason="no Landlock here")),
        False,
    ],
)
def test_a_command_leaves_nothing_running_in_a_confined_agent(
    tmp_path: Path, confine: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bin_dir = ws / "bin"  # the agent's own ruleset lets it execute only there and in /usr...
    bin_dir.mkdir()
    (bin_dir / "spawner").write_text(SPAWNER)
    (bin_dir / "spawner").chmod(0o755)
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(ws), str(bin_dir), "1" if confine else "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None
        assert agent.stdout.readline() == "done\n"  # the tool call returned: sweep done
        grandchild = int((ws / "grandchild.pid").read_text())
        assert not process_alive(grandchild) or wait_gone([grandchild], timeout=PATIENCE) == []
    finally:
        agent.kill()
        agent.wait()
        marker = ws / "grandchild.pid"
        if marker.exists() and process_alive(pid := int(marker.read_text())):
            os.kill(pid, signal.SIGKILL)  # the test failed: leave nothing behind either
