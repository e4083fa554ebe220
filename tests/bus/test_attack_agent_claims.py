"""An agent process that lies about its own turn (ADR 0052), with its real keys, through a
real daemon: what a question may use and whether an adapter's side effect was approved are
the daemon's records, never the agent's word."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bus.test_router import plan, result_of
from tests.discovery.test_discovery_daemon import CODEX, follow_discovery
from tests.supervisor.harness import Daemon, agent_entry, make_config

VAULT = "the vault code is 7781-otter"  # the operator's record in alpha's memory


def test_an_agent_cannot_claim_a_grant_or_an_approval_the_daemon_did_not_give(
    root: Path, daemons: Callable[..., Daemon], tmp_path: Path
) -> None:
    # The holes: the asker put its turn's grant in the question's body (`tools`; None is
    # "not narrowed"), so an agent whose turn an outside sender drove could send None and
    # the callee's turn got all its peer_tools; and the adapter service ran a side effect
    # when the agent said `approved: true`. Now the router stamps the grant of the turn the
    # asker holds (a made-up or missing turn: no tools), and the adapter service takes a yes
    # from the daemon's own record of the turn's approvals.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"
    codex.write_text(CODEX.format(outside=root / "outside.txt"))
    codex.chmod(0o755)
    (root / "adapters").mkdir()
    (root / "adapters" / "writer.yaml").write_text(
        "id: writer\ntransport: cli\ncommand: codex\nargs: [write]\ncapabilities: [code.generate]\n"
    )
    doc = make_config(
        root,
        {
            "alpha": agent_entry(peer_tools=["memory_recall"]),  # trusts its peers with recall
            "beta": agent_entry(),  # an honest peer: its operator's chain keeps its grant
            "mallory": agent_entry(adapters=["writer"]),  # supervised: its writes need a yes
        },
        groups={"pair": {"channel": "cli", "agents": ["alpha", "beta", "mallory"]}},
    )
    doc["discovery"] = {"probe_model_ports": False, "scan_user_dirs": False}
    home = root / "home"
    home.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}
    plan(
        root,
        "mallory",
        do="forged_claims",
        to="alpha",
        channel="cli.local",
        text="recall vault",
        invoke={"adapter": "writer", "input": "inside", "capability": "code.generate"},
    )
    daemon = daemons(doc).start(**env)
    follow_discovery(daemon, env, "added", "writer")
    stored = daemon.cli("--agent", "alpha", "chat", "-m", f"remember: {VAULT}")
    assert stored.returncode == 0, stored.stderr
    workspace = root / "state" / "agents" / "mallory" / "workspace"
    (workspace / "go").write_text("")

    result = result_of(root, "mallory")
    assert set(result["replies"]) == {"no-turn", "made-up-turn"}, result
    for claim, reply in result["replies"].items():
        assert "7781-otter" not in reply, (claim, reply)
        assert "tool_not_granted" in reply, (claim, reply)
    assert result["adapter"] == [False, "approval_denied"]
    assert not (workspace / "made-by-codex.txt").exists()
    # the operator's own chain is not narrowed: its turn's grant passes on
    own = daemon.cli("--agent", "beta", "chat", "-m", "ask alpha: recall vault")
    assert own.returncode == 0 and "7781-otter" in own.stdout, own.stdout + own.stderr
