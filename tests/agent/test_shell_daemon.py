"""The shell tool in a real daemon-started agent with Landlock on: each command runs under
its own ruleset inside the agent's, and `status` says what confines an agent's commands."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent.test_chat_daemon import chat
from tests.agent.test_chat_inprocess import codes
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.policy import abi_version

DaemonFactory = Callable[..., Daemon]
needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")


def workspace(root: Path, alias: str) -> Path:
    return root / "state" / "agents" / alias / "workspace"


@needs_landlock
def test_commands_in_a_confined_agent_run_only_allowed_programs_and_paths(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(
        root, {"boxed": agent_entry(risk_profile="cmd"), "open": agent_entry(risk_profile="raw")}
    )
    profile = {
        "level": "full",  # no approvals; reads outside the workspace allowed by policy
        "allowed_commands": ["tar", "cat", "date"],
        "block_high_risk_commands": False,  # only the kernel stands in the way of -I
        "forbidden_paths": ["/etc/hostname", "/proc", "/sys"],
    }
    doc["risk_profiles"]["cmd"] = profile
    doc["risk_profiles"]["raw"] = {**profile, "sandbox": "none"}
    daemon = daemons(doc, faults=False).start()
    status = {a["alias"]: a["sandbox"] for a in daemon.status()["agents"]}
    assert status == {
        "boxed": f"landlock ABI {abi_version()}",
        "open": "none: commands parsed, not confined",
    }
    table = daemon.cli("status").stdout
    assert "SANDBOX" in table and "none: commands parsed, not confined" in table

    for alias in ("boxed", "open"):
        ws = workspace(root, alias)
        (ws / "notes.txt").write_text("notes\n")
        # The parser sees only `list`; the forbidden path inside it is the kernel's to refuse.
        (ws / "list").write_text("/etc/hostname\nnotes.txt\n")
        chat(daemon, alias, "run tar -cf out.tar -T list")
        chat(daemon, alias, "run tar '-Itouch pwned' -cf z.tar notes.txt")
    listing = subprocess.run(
        ["tar", "-tf", "out.tar"], cwd=workspace(root, "boxed"), capture_output=True, text=True
    ).stdout
    assert listing.split() == ["notes.txt"]
    assert not (workspace(root, "boxed") / "pwned").exists()
    # Finding 4's spellings, refused by the parser first (with Landlock on as well)
    for spelling in ("cat -- -/../../../../../../../etc/hostname", "date -f/etc/hostname"):
        assert codes(chat(daemon, "boxed", f"run {spelling}")) == [("shell", "forbidden_path")]
    # /etc is granted entry by entry around the forbidden file
    passwd = chat(daemon, "boxed", "run cat /etc/passwd")
    assert codes(passwd) == [("shell", None)] and "root:" in passwd["reply"]
    # The same commands in an agent without the sandbox: only the parser, which they pass.
    unconfined = subprocess.run(
        ["tar", "-tf", "out.tar"], cwd=workspace(root, "open"), capture_output=True, text=True
    ).stdout
    assert "etc/hostname" in unconfined.split()
    assert (workspace(root, "open") / "pwned").exists()
