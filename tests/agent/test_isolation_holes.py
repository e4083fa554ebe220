"""Issue 16's holes, closed (ADR 0039), against a real daemon and the in-process chat:

C1 `full` under sandbox = "auto": a read outside the workspace works through the tool
   and in the kernel; a forbidden path and the daemon's files are refused by both.
C2 readonly: memory writes and delegation refused by the tool, the memory service and the
   router; asking a peer stays allowed.
C3 `recall from beta: ...` searches a granted namespace, hits labelled by agent.
C5 forgetting another agent's record by id is `forbidden`, the record untouched.
   Sibling grants `write` and `read_write` through policy and kernel.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agent.test_chat_daemon import chat as daemon_chat
from tests.agent.test_chat_inprocess import codes
from tests.bodies import write_args
from tests.bus.test_router import plan, result_of
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.memory import MemoryStore, Scope, WriteOp
from zeroclaw.policy import abi_version

DaemonFactory = Callable[..., Daemon]
needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
MISSING_ID = "01J0000000000000000000000Z"


def ws(root: Path, alias: str) -> Path:
    return root / "state" / "agents" / alias / "workspace"


def full_entry(root: Path) -> dict[str, Any]:
    return agent_entry(
        risk_profile="wide",
        workspace={"access": {"beta": "write", "gamma": "read_write", "delta": "read"}},
        memory={"read_memory_from": ["beta"]},
    )


def config(root: Path, **extra: dict[str, Any]) -> dict[str, Any]:
    agents = {
        "full": full_entry(root),
        "beta": agent_entry(),
        "gamma": agent_entry(),
        "delta": agent_entry(),
        "ro": agent_entry(risk_profile="ro", delegates=["beta"]),
        **extra,
    }
    peers = [alias for alias in ("ro", "beta", "rod") if alias in agents]
    doc = make_config(root, agents, groups={"ops": {"channel": "cli", "agents": peers}})
    doc["risk_profiles"]["wide"] = {
        "level": "full",
        "forbidden_paths": [str(root / "outside" / "forbidden")],
        "sandbox": "auto",
    }
    doc["risk_profiles"]["ro"] = {"level": "readonly"}
    return doc


def make_tree(root: Path) -> None:
    (root / "outside" / "forbidden").mkdir(parents=True, exist_ok=True)
    (root / "outside" / "notes.txt").write_text("outside the workspace")
    (root / "outside" / "forbidden" / "secret.txt").write_text("forbidden secret")
    for alias in ("full", "fullk", "beta", "gamma", "delta", "ro"):
        ws(root, alias).mkdir(parents=True, exist_ok=True)
        (ws(root, alias) / "shared.txt").write_text(f"{alias}'s notes")


def full_chats(root: Path) -> list[tuple[str, tuple[str, str | None]]]:
    """What `full` asks its tools, and the answer the policy gives (same with a daemon
    and in-process)."""
    outside = root / "outside"
    return [
        (f"read {outside}/notes.txt", ("file_read", None)),
        (f"read /proc/self/root{outside}/notes.txt", ("file_read", None)),
        (f"read {outside}/forbidden/secret.txt", ("file_read", "forbidden_path")),
        (f"read {root}/state/memory/data.mdb", ("file_read", "forbidden_path")),
        (f"write {ws(root, 'beta')}/w.txt: from full", ("file_write", None)),
        (f"read {ws(root, 'beta')}/shared.txt", ("file_read", "path_not_allowed")),
        (f"write {ws(root, 'gamma')}/w.txt: from full", ("file_write", None)),
        (f"read {ws(root, 'gamma')}/shared.txt", ("file_read", None)),
        (f"write {ws(root, 'delta')}/w.txt: from full", ("file_write", "path_not_allowed")),
        (f"read {ws(root, 'delta')}/shared.txt", ("file_read", None)),
        (f"read {ws(root, 'ro')}/shared.txt", ("file_read", "path_not_allowed")),
    ]


RO_CHATS = [
    ("remember: readonly agents keep nothing", ("memory_store", "read_only_profile")),
    ("forget anything", ("memory_forget", "read_only_profile")),
    ("delegate beta: do some work", ("delegate", "read_only_profile")),
]


@needs_landlock
def test_holes_are_closed_through_the_daemon_and_in_the_kernel(
    root: Path, daemons: DaemonFactory
) -> None:
    make_tree(root)
    # beta's record, written before the daemon starts; `thief` will try to forget it by id.
    store = MemoryStore(root / "state" / "memory")
    try:
        op = WriteOp(
            Scope("beta"), write_args("store", {"key": "vault", "content": "the vault is blue"})
        )
        store.apply_writes([op])
        beta_id = op.result.id
    finally:
        store.close()
    outside = root / "outside"
    kernel_checks = [
        ["read", f"{outside}/notes.txt"],
        ["read", f"{outside}/forbidden/secret.txt"],
        ["read", f"{root}/state/memory/data.mdb"],
        ["read", f"{root}/zeroclaw.toml"],  # the config file
        ["write", f"{ws(root, 'beta')}/k.txt"],
        ["read", f"{ws(root, 'beta')}/shared.txt"],
        ["write", f"{ws(root, 'gamma')}/k.txt"],
        ["read", f"{ws(root, 'gamma')}/shared.txt"],
        ["write", f"{ws(root, 'delta')}/k.txt"],
        ["read", f"{ws(root, 'delta')}/shared.txt"],
        ["read", f"{ws(root, 'ro')}/shared.txt"],
    ]
    plan(root, "fullk", do="syscalls", checks=kernel_checks)
    writes = [["store", {"key": "k", "content": "c"}], ["forget", {"key": "k"}]]
    # Readonly agents create no file, even in their workspace: their results go through a
    # file made before their sandbox.
    requests = [*writes, ["recall", {"query": "vault"}]]
    plan(root, "rok", do="raw_memory", requests=requests, preopen_result=True)
    plan(root, "rod", do="forged_questions", to="beta", channel="cli.local", preopen_result=True)
    plan(
        root,
        "thief",
        do="raw_memory",
        requests=[["forget", {"id": i}] for i in (beta_id, MISSING_ID)],
    )
    doc = config(
        root,
        fullk=full_entry(root),
        rok=agent_entry(risk_profile="ro"),
        rod=agent_entry(risk_profile="ro", delegates=["beta"]),
        thief=agent_entry(),
    )
    daemon = daemons(doc).start()

    # C1 and the sibling grants, in the kernel: direct syscalls from inside the agent.
    assert result_of(root, "fullk") == {
        "read " + kernel_checks[0][1]: "done",
        "read " + kernel_checks[1][1]: "denied",
        "read " + kernel_checks[2][1]: "denied",
        "read " + kernel_checks[3][1]: "denied",
        "write " + kernel_checks[4][1]: "done",  # a write grant
        "read " + kernel_checks[5][1]: "denied",  # ... does not read
        "write " + kernel_checks[6][1]: "done",  # read_write
        "read " + kernel_checks[7][1]: "done",
        "write " + kernel_checks[8][1]: "denied",  # a read grant does not write
        "read " + kernel_checks[9][1]: "done",
        "read " + kernel_checks[10][1]: "denied",  # no grant: another agent's workspace
    }
    # ... and through the tools, the same answers.
    for text, expected in full_chats(root):
        reply = daemon_chat(daemon, "full", text)
        assert codes(reply) == [expected], (text, reply)
    assert (
        "outside the workspace" in daemon_chat(daemon, "full", f"read {outside}/notes.txt")["reply"]
    )
    # C3: a granted namespace, labelled; an ungranted one is forbidden by the service.
    recalled = daemon_chat(daemon, "full", "recall from beta: vault")
    assert codes(recalled) == [("memory_recall", None)] and "[beta] vault" in recalled["reply"]
    assert codes(daemon_chat(daemon, "full", "recall from gamma: vault")) == [
        ("memory_recall", "forbidden")
    ]
    assert "vault" not in daemon_chat(daemon, "full", "recall vault")["reply"]  # own only
    # C2: the readonly agent's tools, and the service and router behind them.
    for text, expected in RO_CHATS:
        assert codes(daemon_chat(daemon, "ro", text)) == [expected], text
    asked = daemon_chat(daemon, "ro", "ask beta: hello")  # a question is a read
    assert codes(asked) == [("send_message_to_peer", None)]
    raw = result_of(root, "rok")["responses"]
    assert [r["error"] for r in raw] == ["read_only_profile", "read_only_profile", None]
    assert result_of(root, "rod")["code"] == "read_only_profile"
    # C5: another agent's record by id is forbidden and stays; a missing id is not there.
    stolen, missing = result_of(root, "thief")["responses"]
    assert stolen["error"] == "forbidden", stolen
    assert missing == {"ok": True, "error": None, "body": {"forgotten": False}}
    recalled = daemon_chat(daemon, "full", "recall from beta: vault")
    assert "the vault is blue" in recalled["reply"]


def in_process(daemon: Daemon, alias: str, text: str) -> tuple[dict[str, Any], str]:
    result = daemon.cli("--agent", alias, "chat", "-m", text, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


@needs_landlock
def test_the_in_process_chat_runs_under_the_daemons_ruleset(
    root: Path, daemons: DaemonFactory
) -> None:
    make_tree(root)
    doc = config(root, bare=agent_entry(risk_profile="bare"))
    doc["risk_profiles"]["bare"] = {"level": "supervised", "sandbox": "none"}
    daemon = daemons(doc)  # never started: every chat runs in the CLI process
    first, stderr = in_process(daemon, "full", f"read {root}/outside/notes.txt")
    assert first["sandbox_in_force"] is True and "in-process under Landlock" in stderr
    assert "outside the workspace" in first["reply"]
    for text, expected in full_chats(root):
        reply, _ = in_process(daemon, "full", text)
        assert codes(reply) == [expected], (text, reply)
    for text, expected in RO_CHATS[:2]:
        assert codes(in_process(daemon, "ro", text)[0]) == [expected], text
    in_process(daemon, "beta", "remember: the vault is blue")
    recalled, _ = in_process(daemon, "full", "recall from beta: vault")
    assert "the vault is blue" in recalled["reply"] and "[beta]" in recalled["reply"]
    assert codes(in_process(daemon, "full", "recall from gamma: vault")[0]) == [
        ("memory_recall", "forbidden")
    ]
    # Turns after the sandbox still reach the store (history from earlier turns).
    assert "recall from beta" in in_process(daemon, "full", "history")[0]["reply"]
    bare, stderr = in_process(daemon, "bare", "hello")
    assert bare["sandbox_in_force"] is False and "in-process without a sandbox" in stderr
