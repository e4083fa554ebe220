"""Rules over the shared tree (see conftest.py)."""

from __future__ import annotations

from pathlib import Path

from zeroclaw.policy import PathRules, rules_for


def rules(tree: Path, *, workspace_only: bool = True, may_write: bool = True) -> PathRules:
    ws = tree / "ws"
    return rules_for(
        str(ws / "alpha"),
        workspace_only=workspace_only,
        may_write=may_write,
        forbidden=[str(tree / "outside" / "forbidden")],
        grants=[("beta", str(ws / "beta"), "read")],
        other_workspaces=[str(ws / "beta"), str(ws / "gamma")],
    )
