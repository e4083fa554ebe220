"""Finding 5 against a real daemon: no tool call kills its agent, and an ask whose peer
dies is answered `unavailable` at once.

Turns go through the control socket from this process (the path `zeroclaw chat` takes,
without a CLI process per message) with the offline provider's grammar, and approvals
are answered yes, so supervised writes really run."""

from __future__ import annotations

import os
import signal
import socket
import string
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.agent.test_chat_inprocess import config
from tests.bus.test_router import plan, result_of
from tests.supervisor.harness import Daemon, agent_entry
from tests.tmpfs import tiny_tmpfs
from zeroclaw.control import Chat, ChatApproval, ControlSession, Status
from zeroclaw.tools import ERROR_CODES

DaemonFactory = Callable[..., Daemon]


def turn(daemon: Daemon, alias: str, text: str) -> dict[str, Any]:
    """One chat turn; the final reply's data (reply, tool_calls)."""
    with ControlSession(daemon.runtime_dir, timeout=60) as session:
        session.send(Chat(agent=alias, text=text, interactive=True))
        while True:
            reply = session.next_reply()
            assert reply.ok, (text, reply, daemon.log())
            data = reply.data or {}
            if not reply.more:
                return data
            if data.get("event") == "approval":
                session.send(ChatApproval(approved=True))


def status(daemon: Daemon) -> dict[str, Any]:
    with ControlSession(daemon.runtime_dir) as session:
        session.send(Status())
        return session.next_reply().data or {}


def pids(daemon: Daemon) -> dict[str, int]:
    return {a["alias"]: a["pid"] for a in status(daemon)["agents"]}


def codes(data: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(c["name"], c["error_code"]) for c in data["tool_calls"]]


def workspace(root: Path, alias: str) -> Path:
    return root / "state" / "agents" / alias / "workspace"


def hostile_config(root: Path) -> dict[str, Any]:
    """alpha: supervised, no Landlock (the tools alone); wide: full, Landlock required (so
    generated paths cannot touch this machine outside the workspace)."""
    doc = config(root)
    commands = ["ls", "cat", "head", "wc"]
    doc["risk_profiles"]["bare"] = {
        "level": "supervised",
        "sandbox": "none",
        "allowed_commands": commands,
    }
    doc["risk_profiles"]["wide"] = {
        "level": "full",
        "sandbox": "landlock",
        "allowed_commands": commands,
    }
    doc["agents"]["alpha"]["risk_profile"] = "bare"
    doc["agents"]["wide"] = agent_entry(risk_profile="wide")
    doc["agents"]["beta"]["peer_tools"] = ["file_read"]  # so a peer's ask reaches the tool
    # No budget in the way, and a command stuck on a FIFO is cut quickly.
    doc["runtime_profiles"]["fast"].update(max_actions_per_hour=100_000, shell_timeout_secs=1)
    return doc


@pytest.fixture
def odd_files(root: Path) -> Iterator[None]:
    """In both workspaces: a file, a directory, a FIFO, a listening socket, a symlink out."""
    listeners = []
    for alias in ("alpha", "wide", "gamma"):
        ws = workspace(root, alias)
        ws.mkdir(parents=True, exist_ok=True)
        (ws / "own.txt").write_text("mine")
        (ws / "dir").mkdir(exist_ok=True)
        (ws / "dir" / "inner.txt").write_text("inner")
        os.mkfifo(ws / "fifo")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(ws / "sock"))
        listeners.append(listener)
        (ws / "to-gamma").symlink_to(workspace(root, "gamma"))
    yield
    for listener in listeners:
        listener.close()


def test_the_reported_crashes_are_typed_refusals(
    root: Path, daemons: DaemonFactory, odd_files: None
) -> None:
    daemon = daemons(hostile_config(root), faults=False).start()
    before = pids(daemon)
    for alias in ("alpha", "wide"):
        for text, expected in [
            ("read /proc/1/cwd/x", {"path_not_allowed", "not_found"}),
            ("write own.txt/x: hi", {"not_a_directory"}),
            ("read fifo", {"not_a_regular_file"}),  # returns: no blocking open
            ("read sock", {"not_a_regular_file"}),
            ("list own.txt", {"not_a_directory"}),
            ("read dir", {"not_a_regular_file"}),
        ]:
            [(_tool, code)] = codes(turn(daemon, alias, text))
            assert code in expected, (alias, text, code)
    # beta's turn for a peer hits the same wall, answers it, and lives on
    asked = turn(daemon, "alpha", "ask beta: read /proc/1/cwd/x")
    assert codes(asked) == [("send_message_to_peer", None)]
    assert "file_read refused: path_not_allowed" in asked["reply"]
    assert status(daemon)["router"]["open_questions"] == 0  # the reply closed the question
    assert pids(daemon) == before


@pytest.fixture
def full_disk(root: Path) -> Iterator[Path]:
    with tiny_tmpfs(workspace(root, "wide") / "disk") as disk:
        yield disk


def test_a_write_on_a_full_disk_is_no_space_in_a_landlocked_agent(
    root: Path, daemons: DaemonFactory, full_disk: Path
) -> None:
    daemon = daemons(hostile_config(root), faults=False).start()
    before = pids(daemon)
    assert codes(turn(daemon, "wide", "write disk/a.txt: small")) == [("file_write", None)]
    data = turn(daemon, "wide", "write disk/a.txt: " + "x" * 40_000)
    assert codes(data) == [("file_write", "no_space")]
    assert "ENOSPC" in data["reply"]
    assert (full_disk / "a.txt").read_text() == "small"
    assert pids(daemon) == before


# --- the property: generated paths and contents, every file tool, a pid that never changes

SPECIAL_PATHS = [
    "/proc/1/cwd/x",
    "/proc/1/root/etc/hostname",
    "/proc/self/fd/0",
    "/proc/self/fd/2",
    "/proc/self/mem",
    "/proc/self/root",
    "/proc/kmsg",
    "/proc/self/cwd/own.txt",
    "/dev/zero",
    "/dev/null",
    "/dev/tty",
    "/",
    ".",
    "..",
    "fifo",
    "sock",
    "dir",
    "dir/",
    "own.txt/x",
    "own.txt/x/y",
    "to-gamma/x",
    "fifo/x",
    "n" * 300,
    "/".join(["d"] * 600),
    "a\x00b",
]
SEGMENTS = ["own.txt", "dir", "fifo", "sock", "to-gamma", "..", ".", "new", "inner.txt", "x" * 255]
NAME_CHARS = string.ascii_letters + string.digits + "._-~\x00\x7f" + "äé中\u202e\U0001f600"

paths = st.one_of(
    st.sampled_from(SPECIAL_PATHS),
    st.lists(
        st.one_of(st.sampled_from(SEGMENTS), st.text(NAME_CHARS, min_size=1, max_size=20)),
        min_size=1,
        max_size=6,
    ).map("/".join),
    st.tuples(
        st.sampled_from(["/proc/self/", "/proc/1/", "/dev/", "/"]), st.text(NAME_CHARS, max_size=12)
    ).map("".join),
)
words = st.text(NAME_CHARS + " :", min_size=1, max_size=40)
file_messages = st.one_of(
    paths.map(lambda p: f"read {p}"),
    paths.map(lambda p: f"list {p}"),
    st.tuples(paths, st.text(max_size=300)).map(lambda pc: f"write {pc[0]}: {pc[1]}"),
)
messages = st.one_of(
    file_messages,
    st.tuples(st.sampled_from(["ls", "cat", "head", "wc", "rm"]), paths).map(
        lambda cp: f"run {cp[0]} {cp[1]}"
    ),
    words.map(lambda w: f"remember: {w}"),
    words.map(lambda w: f"recall {w}"),
    words.map(lambda w: f"forget {w}"),
    file_messages.map(lambda m: f"ask beta: {m}"),  # beta's peer turn runs the file tool
)


def test_no_tool_call_kills_its_agent(root: Path, daemons: DaemonFactory, odd_files: None) -> None:
    daemon = daemons(hostile_config(root), faults=False).start()
    before = pids(daemon)

    @settings(
        max_examples=50,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.sampled_from(["alpha", "wide"]), messages)  # wide asking beta: not_peers
    def drive(alias: str, text: str) -> None:
        data = turn(daemon, alias, text)
        assert "error" not in data, data  # the turn finished: the agent answered
        for call in data["tool_calls"]:
            assert call["error_code"] is None or call["error_code"] in ERROR_CODES, call
            assert call["error_code"] != "internal_error", (text, data, daemon.log())
        assert pids(daemon) == before, (text, daemon.log())

    drive()
    assert "Traceback" not in daemon.log_text()


# --- an ask whose peer dies


def test_an_ask_whose_peer_dies_is_unavailable_at_once(root: Path, daemons: DaemonFactory) -> None:
    """beta takes the ask (the router has its ack) and is killed before it answers: alpha's
    ask ends `unavailable` now, not after its 120 s reply timeout."""
    plan(root, "beta", do="silent_callee")
    daemon = daemons(config(root)).start()  # fault entry point: beta runs the plan
    asker = daemon.cli_popen(
        "--agent",
        "alpha",
        "chat",
        "-m",
        "ask beta: hello",
        "--json",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        result_of(root, "beta")  # beta has the ask, and the router its ack
        os.kill(pids(daemon)["beta"], signal.SIGKILL)
        out, err = asker.communicate(timeout=60)  # well inside the 120 s it used to wait
    finally:
        asker.kill()
    assert asker.returncode == 0, err
    assert '"error_code": "unavailable"' in out and "exited before it answered" in out, out
