"""Caller identities: `internal-workflow` is a caller that `allowedCallers` may name (the
daemon's own workflows, issue 12), so no agent may be called that.

This test pins what SHOULD happen; it fails on the code as attacked (see the report).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomli_w

from tests.conftest import REPO
from tests.subagents.helpers import subagent_config
from tests.supervisor.harness import agent_entry


def test_an_agent_cannot_take_the_internal_workflow_caller_name(root: Path) -> None:
    # ALIAS_SYNTAX accepts it and RESERVED_ALIASES lacks it: such an agent's router
    # identity is "internal-workflow", so every sub-agent that admits the daemon's internal
    # workflows admits that agent (and `cli` is reserved for the same reason).
    doc = subagent_config(root, **{"internal-workflow": agent_entry()})
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    result = subprocess.run(
        [sys.executable, "-m", "zeroclaw", "--config", str(path), "config", "validate"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0, "an agent named internal-workflow was accepted"
    assert "internal-workflow" in result.stdout + result.stderr
