"""Discovery through a real daemon: a fake `codex` on a temporary PATH is found, probed,
registered and invoked by an agent through `invoke_adapter` (in its workspace, under its
Landlock), refused for a readonly agent when the capability writes, and adapters come and
go while the daemon runs."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE, REPO
from tests.known_secrets import UNBOUND_SECRET
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.policy import abi_version

CODEX = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "codex-cli 9.9.9"; exit 0; fi
echo "codex in $(pwd) got: $*"
if [ "$2" = "escape" ]; then echo nope > {outside} && echo "wrote outside"; fi
if [ "$2" = "inside" ]; then echo yes > made-by-codex.txt && echo "wrote inside"; fi
exit 0
"""


def project(root: Path, bin_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The config and its adapters in `root`; codex in `bin_dir`, outside the project (a
    program inside it would be workspace-local, ignored unless pinned)."""
    bin_dir.mkdir()
    codex = bin_dir / "codex"
    codex.write_text(CODEX.format(outside=root / "outside.txt"))
    codex.chmod(0o755)
    (root / "adapters").mkdir()
    (root / "adapters" / "reviewer.yaml").write_text(
        "id: reviewer\ntransport: cli\ncommand: codex\nargs: [review]\n"
        "capabilities: [code.review]\n"
    )
    (root / "adapters" / "writer.yaml").write_text(
        "id: writer\ntransport: cli\ncommand: codex\nargs: [write]\ncapabilities: [code.generate]\n"
    )
    doc = make_config(
        root,
        {
            "alpha": agent_entry(adapters=["reviewer", "writer"], risk_profile="full"),
            "beta": agent_entry(adapters=["reviewer", "writer"], risk_profile="ro"),
            "gamma": agent_entry(),
            "delta": agent_entry(adapters=["writer"]),  # supervised: asks before writing
        },
        extra_profiles={},
    )
    doc["risk_profiles"].update({"full": {"level": "full"}, "ro": {"level": "readonly"}})
    doc["discovery"] = {"probe_model_ports": False, "scan_user_dirs": False}
    home = root / "home"
    home.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}
    return doc, env


def chat(daemon: Daemon, alias: str, text: str) -> dict[str, Any]:
    result = daemon.cli("--agent", alias, "chat", "-m", text, "--json")
    assert result.returncode == 0, result.stderr + daemon.log()
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def follow_discovery(
    daemon: Daemon, env: dict[str, str], field: str, key: str, kind: str = "discovery.completed"
) -> None:
    """Follow the daemon's discovery events of `kind` until one has `key` in (or as) its
    `field`; the recent ones count too, so a scan that already happened is seen."""
    follow = subprocess.Popen(
        [*daemon.cli_argv(), "events", "--follow", "--kind", kind, "--json"],
        stdout=subprocess.PIPE,
        env={"PYTHONPATH": str(REPO), **env},
        cwd=REPO,
    )
    assert follow.stdout is not None
    fd = follow.stdout.fileno()
    deadline = time.monotonic() + PATIENCE
    pending = b""
    try:
        while time.monotonic() < deadline:
            # Unbuffered reads: a line Python had buffered would be invisible to select().
            ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                value = json.loads(line)["event"].get(field, [])
                if key == value or (isinstance(value, list) and key in value):
                    return
        raise AssertionError(f"no discovery scan with {key} {field}\n{daemon.log()}")
    finally:
        follow.kill()
        follow.wait()


@pytest.fixture
def running(root: Path, daemons: Any, tmp_path: Path) -> tuple[Daemon, dict[str, str]]:
    doc, env = project(root, tmp_path / "bin")
    daemon = daemons(doc, faults=False)
    daemon.start(**env)
    follow_discovery(daemon, env, "added", "reviewer")
    return daemon, env


def test_a_fake_codex_is_found_probed_and_invoked_in_the_agents_workspace(
    running: tuple[Daemon, dict[str, str]],
) -> None:
    daemon, _ = running
    answer = chat(daemon, "alpha", "invoke reviewer: look at main.py")
    [call] = answer["tool_calls"]
    assert call["name"] == "invoke_adapter" and call["ok"], call
    # The program ran in alpha's workspace, with its fixed args first and the input last.
    assert "/state/agents/alpha/workspace got: review look at main.py" in answer["reply"]


@pytest.mark.skipif(abi_version() < 1, reason="needs Landlock")
def test_the_adapter_runs_under_the_agents_landlock(
    running: tuple[Daemon, dict[str, str]], root: Path
) -> None:
    daemon, _ = running
    inside = chat(daemon, "alpha", "invoke writer for code.generate: inside")
    assert "wrote inside" in inside["reply"], inside
    escape = chat(daemon, "alpha", "invoke writer for code.generate: escape")
    assert "wrote outside" not in escape["reply"]
    assert not (root / "outside.txt").exists()


def test_a_readonly_agent_may_not_use_a_writing_capability(
    running: tuple[Daemon, dict[str, str]],
) -> None:
    daemon, _ = running
    refused = chat(daemon, "beta", "invoke writer for code.generate: make it")
    [call] = refused["tool_calls"]
    assert (call["ok"], call["error_code"]) == (False, "read_only_profile")
    allowed = chat(daemon, "beta", "invoke reviewer: read it")
    assert allowed["tool_calls"][0]["ok"]


def test_an_agent_without_adapters_has_no_adapter_tool(
    running: tuple[Daemon, dict[str, str]],
) -> None:
    daemon, _ = running
    answer = chat(daemon, "gamma", "invoke reviewer: hi")
    assert not answer["tool_calls"] or not answer["tool_calls"][0]["ok"]


def test_adapters_come_and_go_while_the_daemon_runs(
    running: tuple[Daemon, dict[str, str]], root: Path
) -> None:
    daemon, env = running
    (root / "adapters" / "late.yaml").write_text(
        "id: late\ntransport: cli\ncommand: codex\nargs: [late]\ncapabilities: [code.review]\n"
    )
    doc = tomllib.loads(daemon.config_path.read_text())
    doc["agents"]["alpha"]["adapters"] = ["reviewer", "writer", "late"]
    daemon.write_config(doc)
    assert daemon.cli("reload").returncode == 0
    follow_discovery(daemon, env, "added", "late")
    assert "got: late hello" in chat(daemon, "alpha", "invoke late: hello")["reply"]
    (root / "adapters" / "late.yaml").unlink()
    follow_discovery(daemon, env, "removed", "late")
    gone = chat(daemon, "alpha", "invoke late: hello")["tool_calls"][0]
    assert (gone["ok"], gone["error_code"]) == (False, "adapter_not_found")


def test_discover_list_through_the_cli_sees_what_the_daemon_cached(
    running: tuple[Daemon, dict[str, str]],
) -> None:
    daemon, env = running
    result = subprocess.run(
        [*daemon.cli_argv(), "discover", "list", "--registered", "--json"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), **env},
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {"reviewer", "writer", "codex"} <= {i["id"] for i in out["items"]}
    assert out["cache"]["used"] is True


def test_a_supervised_agent_is_asked_before_a_side_effect_and_nobody_said_yes(
    running: tuple[Daemon, dict[str, str]], root: Path
) -> None:
    daemon, _ = running
    answer = chat(daemon, "delta", "invoke writer for code.generate: inside")
    [call] = answer["tool_calls"]
    assert (call["ok"], call["error_code"]) == (False, "approval_denied")
    assert not (root / "state" / "agents" / "delta" / "workspace" / "made-by-codex.txt").exists()


def test_a_required_adapter_that_is_refused_makes_the_daemon_degraded(
    running: tuple[Daemon, dict[str, str]], root: Path
) -> None:
    daemon, env = running
    assert daemon.status()["discovery"].get("degraded", []) == []
    (root / "adapters" / "needed.yaml").write_text(
        "id: needed\ntransport: cli\ncommand: codex\nrequired: true\n"
        "capabilities: [no.such.capability]\n"
    )
    follow_discovery(daemon, env, "degraded", "cli_adapter:needed")
    status = daemon.status()["discovery"]
    assert status["degraded"] == ["cli_adapter:needed"]
    human = daemon.cli("status")
    assert "degraded  required but not registered: cli_adapter:needed" in human.stdout


def test_a_secret_in_a_manifest_never_reaches_the_log_or_the_events(
    running: tuple[Daemon, dict[str, str]], root: Path
) -> None:
    daemon, env = running
    (root / "adapters" / "leaky.yaml").write_text(
        "id: leaky\ntransport: http\nendpoint: https://api.example.test\n"
        f"api_key: {UNBOUND_SECRET}\ncapabilities: [chat.reply]\n"
    )
    follow_discovery(daemon, env, "key", "http_adapter:leaky", kind="discovery.decided")
    events = daemon.cli("events", "--json")
    assert "http_adapter:leaky" in events.stdout
    assert UNBOUND_SECRET not in events.stdout
    assert UNBOUND_SECRET not in daemon.log_path.read_text()  # the fixture checks it too
