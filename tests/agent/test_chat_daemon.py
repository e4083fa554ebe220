"""`zeroclaw --agent A chat -m` through a running daemon: the turn runs in A's process,
memory and peers go through the router."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.test_chat_inprocess import ESCAPES, codes, config, make_workspaces
from tests.bus.test_router import plan, result_of
from tests.conftest import PATIENCE, REPO
from tests.known_secrets import OPENAI_KEY
from tests.supervisor.harness import Daemon, agent_entry, wait_for_process, wait_gone

DaemonFactory = Callable[..., Daemon]


def chat(
    daemon: Daemon, alias: str, text: str, session: str = "default", ok: bool = True
) -> dict[str, Any]:
    result = daemon.cli("--agent", alias, "chat", "-m", text, "--json", "--session", session)
    assert (result.returncode == 0) == ok, result.stderr + daemon.log()
    assert "in-process" not in result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_memory_isolation_and_continuity_across_a_restart(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(config(root), faults=False).start()
    stored = chat(daemon, "alpha", "remember: the release ships on friday", session="s1")
    assert set(stored) == {"schema_version", "reply", "tool_calls", "usage"}
    assert stored["tool_calls"] == [
        {
            "name": "memory_store",
            "args": {
                "key": stored["tool_calls"][0]["args"]["key"],
                "content": "the release ships on friday",
            },
            "ok": True,
            "error_code": None,
        }
    ]
    assert "ships on friday" in chat(daemon, "alpha", "recall release", session="s1")["reply"]
    assert "friday" not in chat(daemon, "gamma", "recall release")["reply"]

    daemon.stop()
    daemon = daemons(config(root), faults=False).start()
    assert "ships on friday" in chat(daemon, "alpha", "recall release", session="s1")["reply"]
    history = chat(daemon, "alpha", "history", session="s1")["reply"]
    assert "- remember: the release ships on friday" in history
    assert "- recall release" in history
    assert "no earlier messages" in chat(daemon, "alpha", "history", session="s2")["reply"]


def test_peers_answer_through_the_router(root: Path, daemons: DaemonFactory) -> None:
    doc = config(root)
    doc["agents"]["beta"]["peer_tools"] = ["memory_recall", "file_write"]
    daemon = daemons(doc, faults=False).start()
    asked = chat(daemon, "alpha", "ask beta: hello there")
    assert codes(asked) == [("send_message_to_peer", None)]
    assert asked["reply"].startswith("beta says: Hello, I am beta.")
    refused = chat(daemon, "alpha", "ask gamma: hello")
    assert codes(refused) == [("send_message_to_peer", "not_peers")]
    assert codes(chat(daemon, "alpha", "ask zeta: hello")) == [
        ("send_message_to_peer", "unknown_agent")
    ]
    delegated = chat(daemon, "alpha", "delegate beta: recall anything")
    assert codes(delegated) == [("delegate", None)]
    assert "beta says: I remember nothing" in delegated["reply"]
    assert codes(chat(daemon, "alpha", "delegate gamma: hi")) == [
        ("delegate", "delegation_not_allowed")
    ]
    # A peer's turn has nobody to approve anything: beta's supervised write is denied.
    assert "approval_denied" in chat(daemon, "alpha", "ask beta: write x.txt: hi")["reply"]


def _parent_pid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:")))


def test_a_full_agent_without_sandbox_cannot_touch_the_daemons_own_files(
    root: Path, daemons: DaemonFactory
) -> None:
    """Finding 8: without Landlock, a `full` agent read every agent's memory (the LMDB
    file), the daemon's environment and config, and wrote into its state and runtime dirs."""
    doc = config(root)
    # The widest profile there is: full, nothing forbidden, no kernel sandbox.
    doc["risk_profiles"]["wide"] = {
        "level": "full",
        "forbidden_paths": [],
        "sandbox": "none",
        "allowed_commands": ["cat", "ls"],
    }
    doc["agents"]["alpha"]["risk_profile"] = "wide"
    daemon = daemons(doc, faults=False).start()
    chat(daemon, "beta", "remember: the vault code is 4711")
    assert daemon.proc is not None
    daemon_pid = daemon.proc.pid
    zygote_pid = _parent_pid(daemon.agent("alpha")["pid"])
    assert zygote_pid != daemon_pid
    state, run = root / "state", root / "run"
    threads = [t for t in os.listdir(f"/proc/{daemon_pid}/task") if int(t) != daemon_pid]
    refused = [
        f"read {state}/memory/data.mdb",
        f"read /proc/{daemon_pid}/environ",
        f"read /proc/{zygote_pid}/environ",
        f"read /proc/{daemon_pid}/task/{daemon_pid}/environ",
        *(f"read /proc/{tid}/environ" for tid in threads[:2]),  # a thread's own entry
        f"read {daemon.config_path}",
        f"list {state}",
        f"list {state}/agents",
        f"list {run}",
        f"write {state}/planted.txt: x",
        f"write {state}/memory/data.mdb: x",
        f"write {run}/planted.sock: x",
        f"write {daemon.config_path}: [agents]",
        f"run cat {state}/memory/data.mdb",
        f"run ls {run}",
    ]
    for text in refused:
        reply = chat(daemon, "alpha", text)
        assert codes(reply)[0][1] == "forbidden_path", (text, reply)
        assert "4711" not in reply["reply"]
    assert not (state / "planted.txt").exists() and not (run / "planted.sock").exists()
    # Its own workspace (inside the state dir) is still its own; a granted one is readable.
    assert codes(chat(daemon, "alpha", "write notes.txt: mine")) == [("file_write", None)]
    assert "mine" in chat(daemon, "alpha", "read notes.txt")["reply"]
    make_workspaces(root)
    assert codes(chat(daemon, "alpha", f"read {state}/agents/beta/workspace/shared.txt")) == [
        ("file_read", None)
    ]
    # Another agent's workspace keeps its own refusal; elsewhere `full` still reaches.
    assert codes(chat(daemon, "alpha", f"read {state}/agents/gamma/workspace/secret")) == [
        ("file_read", "path_not_allowed")
    ]
    assert codes(chat(daemon, "alpha", "read /etc/hostname")) == [("file_read", None)]


def test_a_peer_gets_none_of_the_callees_tools_by_default(
    root: Path, daemons: DaemonFactory
) -> None:
    """Finding 10: alpha asked beta for its memory and files and got them."""
    daemon = daemons(config(root), faults=False).start()
    beta = root / "state" / "agents" / "beta" / "workspace"
    beta.mkdir(parents=True, exist_ok=True)
    (beta / "secret.txt").write_text("beta's secret")
    chat(daemon, "beta", "remember: the vault code is 4711")
    for text, tool in (
        ("ask beta: recall vault", "memory_recall"),
        ("ask beta: read secret.txt", "file_read"),
        ("ask beta: list .", "file_list"),
        ("ask beta: run ls", "shell"),
        ("ask beta: remember: alpha was here", "memory_store"),
        ("delegate beta: forget anything", "memory_forget"),
        ("ask beta: ask alpha: hi", "send_message_to_peer"),
    ):
        reply = chat(daemon, "alpha", text)["reply"]
        assert f"{tool} refused: tool_not_granted" in reply, (text, reply)
        assert "4711" not in reply and "beta's secret" not in reply
    # beta's own operator keeps every tool.
    assert "4711" in chat(daemon, "beta", "recall vault")["reply"]
    assert "beta's secret" in chat(daemon, "beta", "read secret.txt")["reply"]


def test_a_peer_tools_grant_lets_exactly_that_tool_through(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = config(root)
    doc["agents"]["beta"]["peer_tools"] = ["file_read"]
    daemon = daemons(doc, faults=False).start()
    beta = root / "state" / "agents" / "beta" / "workspace"
    beta.mkdir(parents=True, exist_ok=True)
    (beta / "secret.txt").write_text("beta's shared secret")
    chat(daemon, "beta", "remember: the vault code is 4711")
    assert (
        "beta says: beta's shared secret"
        in chat(daemon, "alpha", "ask beta: read secret.txt")["reply"]
    )
    recalled = chat(daemon, "alpha", "ask beta: recall vault")["reply"]
    assert "memory_recall refused: tool_not_granted" in recalled and "4711" not in recalled


def test_unknown_alias_exits_2_with_the_aliases(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root), faults=False).start()
    result = daemon.cli("--agent", "zeta", "chat", "-m", "hi")
    assert result.returncode == 2 and "agents: alpha, beta, gamma, ro" in result.stderr


def test_a_stopped_agent_is_unavailable(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root), faults=False).start()
    assert daemon.cli("agents", "stop", "beta").returncode == 0
    result = daemon.cli("--agent", "beta", "chat", "-m", "hi")
    assert result.returncode == 1 and "unavailable" in result.stderr
    assert codes(chat(daemon, "alpha", "ask beta: hi")) == [("send_message_to_peer", "unavailable")]


def test_escape_routes_are_refused_in_the_agent_process(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root), faults=False).start()
    make_workspaces(root)
    gamma = root / "state" / "agents" / "gamma" / "workspace"
    for text, expected in ESCAPES:
        reply = chat(daemon, "alpha", text)
        assert codes(reply) == [expected], (text, reply)
    assert codes(chat(daemon, "alpha", f"read {gamma}/secret")) == [
        ("file_read", "path_not_allowed")
    ]
    granted = chat(daemon, "alpha", "read ../../beta/workspace/shared.txt")
    assert codes(granted) == [("file_read", None)] and "beta's notes" in granted["reply"]
    assert codes(chat(daemon, "ro", "write a.txt: x")) == [("file_write", "read_only_profile")]
    assert codes(chat(daemon, "ro", "run ls")) == [("shell", "read_only_profile")]
    assert codes(chat(daemon, "alpha", "run ls")) == [("shell", None)]


def test_a_reload_that_adds_an_agent_fences_its_workspace_without_restarts(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = config(root)
    # full drops workspace_only; no Landlock, so only the tool policy stands in the way
    doc["risk_profiles"]["wide"] = {"level": "full", "sandbox": "none"}
    doc["agents"]["alpha"]["risk_profile"] = "wide"
    daemon = daemons(doc, faults=False).start()
    # Outside the state dir: what there is no workspace yet is the daemon's own (ADR 0015).
    late = root / "late"
    late.mkdir(parents=True)
    (late / "diary.txt").write_text("late's diary")
    assert codes(chat(daemon, "alpha", f"read {late}/diary.txt")) == [("file_read", None)]
    pid = daemon.agent("alpha")["pid"]

    doc["agents"]["late"] = {**doc["agents"]["beta"], "workspace": {"path": str(late)}}
    daemon.write_config(doc)
    result = daemon.cli("reload", "--json")
    assert json.loads(result.stdout)["diff"] == {"added": ["late"], "removed": [], "changed": []}
    assert daemon.agent("alpha")["pid"] == pid  # not restarted
    refused = chat(daemon, "alpha", f"read {late}/diary.txt")
    assert codes(refused) == [("file_read", "path_not_allowed")]
    assert "another agent's workspace" in refused["reply"]


@pytest.fixture
def openai_server() -> Iterator[int]:
    """The OpenAI protocol server in its own process; yields its port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.providers.protocol_server", "openai"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


def test_an_agent_on_a_network_provider_answers_through_the_daemon(
    root: Path, daemons: DaemonFactory, openai_server: int
) -> None:
    doc = config(root)
    doc["providers"]["openai"] = {
        "fake": {
            "base_url": f"http://127.0.0.1:{openai_server}/v1",
            "model": "m",
            "api_key_env": "FAKE_OPENAI_KEY",
        }
    }
    doc["agents"]["beta"]["model_provider"] = "openai.fake"
    # Landlock is on (sandbox auto): it fences files, not the loopback connection.
    daemon = daemons(doc, faults=False).start(FAKE_OPENAI_KEY=OPENAI_KEY)
    reply = chat(daemon, "beta", "hello")
    [step] = reply.pop("usage")  # the fake server reports none: the turn estimated it
    assert step["provider"] == "openai.fake" and step["tokens"]["estimated"] is True
    assert reply == {"schema_version": 1, "reply": "fake openai answers", "tool_calls": []}
    # and a peer on the offline provider asks it
    assert chat(daemon, "alpha", "ask beta: hi")["reply"] == "beta says: fake openai answers"


def test_an_ask_chain_is_cut_at_the_depth_limit(root: Path, daemons: DaemonFactory) -> None:
    doc = config(root)
    for alias in ("alpha", "beta"):  # asking on is a tool a peer's turn needs a grant for
        doc["agents"][alias]["peer_tools"] = ["send_message_to_peer"]
    daemon = daemons(doc, faults=False).start()
    # alpha asks beta, who asks alpha, who would ask beta a third time: refused
    reply = chat(daemon, "alpha", "ask beta: ask alpha: ask beta: hello")["reply"]
    assert reply.startswith("beta says: alpha says: send_message_to_peer refused: ")
    assert "depth_exceeded" in reply


def test_who_are_you_comes_from_the_identity_file(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root), faults=False).start()
    identity = root / "state" / "agents" / "gamma" / "workspace" / "IDENTITY.md"
    identity.write_text("# Gamma\n\nI work alone.\n")
    assert chat(daemon, "gamma", "who are you?")["reply"] == "I work alone."


def test_a_chat_starts_an_on_demand_agent(root: Path, daemons: DaemonFactory) -> None:
    doc = config(root)
    doc["runtime_profiles"]["lazy"] = {"activation": "on-demand", "idle_stop_secs": 60}
    doc["agents"]["gamma"]["runtime_profile"] = "lazy"
    daemon = daemons(doc, faults=False).start()
    assert daemon.agent("gamma")["state"] == "stopped"
    assert chat(daemon, "gamma", "hello")["reply"].startswith("Hello, I am gamma.")
    assert daemon.agent("gamma")["state"] == "running"


def _runner_config(root: Path) -> dict[str, Any]:
    doc = config(root)
    doc["risk_profiles"]["runner"] = {"level": "full", "allowed_commands": ["sleep"]}
    doc["agents"]["gamma"]["risk_profile"] = "runner"
    return doc


def _start_sleeping_turn(daemon: Daemon) -> tuple[subprocess.Popen[str], int]:
    """gamma runs `sleep 120` for a CLI in another process; returns that CLI and the sleep."""
    turn = daemon.cli_popen(
        "--agent",
        "gamma",
        "chat",
        "-m",
        "run sleep 120",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return turn, wait_for_process(["sleep", "120"], under=daemon.agent("gamma")["pid"])


def test_a_command_dies_with_its_agent(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(_runner_config(root), faults=False).start()
    turn, sleeper = _start_sleeping_turn(daemon)
    try:
        os.kill(daemon.agent("gamma")["pid"], signal.SIGKILL)
        assert not wait_gone([sleeper], timeout=PATIENCE)
        _, err = turn.communicate(timeout=PATIENCE)
        assert turn.returncode == 1 and "unavailable" in err  # the turn ended with its agent
    finally:
        turn.kill()


def test_a_client_that_goes_away_cancels_its_turn(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(_runner_config(root), faults=False).start()
    pid = daemon.agent("gamma")["pid"]
    turn, sleeper = _start_sleeping_turn(daemon)
    turn.kill()  # the connection closes mid-turn: the daemon cancels the agent's turn
    turn.wait()
    assert not wait_gone([sleeper], timeout=PATIENCE)
    assert daemon.agent("gamma")["pid"] == pid  # the agent itself lives on
    assert chat(daemon, "gamma", "hello")["reply"].startswith("Hello, I am gamma.")


def test_a_peer_that_floods_asks_is_told_busy_and_nothing_piles_up(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = config(root)
    doc["agents"]["asker"] = agent_entry()
    doc["peer_groups"]["ops"]["agents"].append("asker")
    plan(root, "asker", do="askflood", to="beta", channel="cli.local", count=300)
    daemon = daemons(doc).start()  # fault entry point: plan agents, real agents otherwise
    result = result_of(root, "asker")
    assert result["answers"] == 300  # every ask got an answer: a reply or "busy"
    assert 0 < result["busy"] < 300
    assert chat(daemon, "beta", "hello")["reply"].startswith("Hello, I am beta.")


def test_a_chat_message_over_the_bus_frame_limit_is_refused_before_the_agent(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = config(root)
    doc["daemon"]["max_frame_bytes"] = 4096
    daemon = daemons(doc, faults=False).start()
    big = daemon.cli("--agent", "alpha", "chat", "-m", "remember: " + "x" * 5000, "--session", "s")
    assert big.returncode == 1, big.stderr
    assert "too_large" in big.stderr and "max_frame_bytes is 4096" in big.stderr
    # The agent never saw it: its history is empty and it was never restarted.
    assert "no earlier messages" in chat(daemon, "alpha", "history", session="s")["reply"]
    assert daemon.agent("alpha")["restarts"] == 0
    assert daemon.status()["router"]["outcomes"]["too_large"] == 1
