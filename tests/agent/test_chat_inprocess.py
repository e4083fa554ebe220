"""`zeroclaw --agent A chat -m` with no daemon: the agent runs in the CLI process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.memory import MemoryStore, Scope

DaemonFactory = Callable[..., Daemon]


def config(root: Path) -> dict[str, Any]:
    doc = make_config(
        root,
        {
            "alpha": agent_entry(delegates=["beta"], workspace={"access": {"beta": "read"}}),
            "beta": agent_entry(),
            "gamma": agent_entry(),
            "ro": agent_entry(risk_profile="ro"),
        },
        groups={"ops": {"channel": "cli", "agents": ["alpha", "beta"]}},
    )
    doc["risk_profiles"]["sup"]["allowed_commands"] = ["ls", "cat", "rm"]
    doc["risk_profiles"]["ro"] = {"level": "readonly"}
    return doc


def make_workspaces(root: Path) -> None:
    """gamma's secret, beta's shared notes, and a symlink from alpha's workspace to gamma's."""
    agents = root / "state" / "agents"
    for alias in ("alpha", "beta", "gamma"):
        (agents / alias / "workspace").mkdir(parents=True, exist_ok=True)
    (agents / "gamma" / "workspace" / "secret").write_text("gamma's")
    (agents / "beta" / "workspace" / "shared.txt").write_text("beta's notes")
    link = agents / "alpha" / "workspace" / "link-to-gamma"
    if not link.is_symlink():
        link.symlink_to(agents / "gamma" / "workspace")


def chat(daemon: Daemon, alias: str, text: str, session: str = "default") -> dict[str, Any]:
    result = daemon.cli("--agent", alias, "chat", "-m", text, "--json", "--session", session)
    assert result.returncode == 0, result.stderr
    assert "in-process" in result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def codes(reply: dict[str, Any]) -> list[Any]:
    return [(c["name"], c["error_code"]) for c in reply["tool_calls"]]


def test_remember_recall_isolation_and_session(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root))
    stored = chat(daemon, "alpha", "remember: the release ships on friday", session="s1")
    assert stored["schema_version"] == 1 and codes(stored) == [("memory_store", None)]
    recalled = chat(daemon, "alpha", "recall release", session="s1")
    assert "ships on friday" in recalled["reply"]
    assert "friday" not in chat(daemon, "gamma", "recall release")["reply"]
    store = MemoryStore(root / "state" / "memory")
    try:
        turns = store.session(Scope("alpha"), "s1")
    finally:
        store.close()
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]


# Every escape route from alpha (supervised, workspace_only, a read grant on beta), with
# its refusal code; the same in-process and through the daemon.
ESCAPES = [
    ("read ../../gamma/workspace/secret", ("file_read", "path_not_allowed")),
    ("list ../../gamma/workspace", ("file_list", "path_not_allowed")),
    ("read link-to-gamma/secret", ("file_read", "path_not_allowed")),  # a symlink out
    ("read /proc/self/root/etc/hostname", ("file_read", "forbidden_path")),  # /etc
    ("read /proc/self/root/srv", ("file_read", "path_not_allowed")),
    ("write ../../beta/workspace/x: hi", ("file_write", "path_not_allowed")),  # read grant
    ("write notes.txt: hi", ("file_write", "approval_denied")),  # supervised, no one to ask
    ("run rm notes.txt", ("shell", "command_not_allowed")),
    ("run sh -c ls", ("shell", "command_not_allowed")),
    ("delegate gamma: do it", ("delegate", "delegation_not_allowed")),
]


def test_escape_routes_and_codes_through_chat(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root))
    make_workspaces(root)
    for text, expected in [*ESCAPES, ("ask beta: hello", ("send_message_to_peer", "unavailable"))]:
        reply = chat(daemon, "alpha", text)
        assert codes(reply) == [expected], (text, reply)
        assert reply["tool_calls"][0]["ok"] is False
    assert codes(chat(daemon, "ro", "write a.txt: x")) == [("file_write", "read_only_profile")]
    assert codes(chat(daemon, "ro", "run ls")) == [("shell", "read_only_profile")]
    assert codes(chat(daemon, "alpha", "run ls")) == [("shell", None)]
    assert chat(daemon, "alpha", "hello")["tool_calls"] == []


def test_unknown_alias_and_bad_usage_exit_2(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root))
    unknown = daemon.cli("--agent", "zeta", "chat", "-m", "hi")
    assert unknown.returncode == 2 and "agents: alpha, beta, gamma, ro" in unknown.stderr
    long_session = daemon.cli("--agent", "alpha", "chat", "-m", "hi", "--session", "s" * 129)
    assert long_session.returncode == 2 and "--session must be" in long_session.stderr
    no_message = daemon.cli("--agent", "alpha", "chat", "--json")
    assert no_message.returncode == 2 and "--json needs -m" in no_message.stderr
