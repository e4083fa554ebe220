"""The control server serves the operator first (issue 10, finding 6; ADR 0011).

64 connections that sent a request every 10 s kept `zeroclaw status` failing (a KeyError on
the `busy` reply, or a silent exit 141 from SIGPIPE), and an interactive chat was cut after
30 s idle. Now connections are bounded per process, the oldest idle one makes room, status
and stop have reserved slots, and a chat session is never idle.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from tests.agent.test_chat_inprocess import config
from tests.agent.test_chat_terminal import PROMPT, spawn_chat
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.control import (
    ChatOpen,
    ControlSession,
    DaemonUnreachable,
    Status,
    control_address,
    encode,
    encode_frame,
    error_reply,
    printable,
)

DaemonFactory = Callable[..., Daemon]

# One hostile process: `count` connections, each asking its first frame once (a status, or
# opening a chat session that can never be reaped), then a status every `every` seconds,
# reconnecting whenever the daemon closes one. It stops when its stdin closes.
HOSTILE = """
import select, socket, struct, sys
address = "\\0" + sys.argv[1][1:]
count, every = int(sys.argv[2]), float(sys.argv[3])
first, status = bytes.fromhex(sys.argv[4]), bytes.fromhex(sys.argv[5])

def connect():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(address)
    ask(s, first)
    return s

def ask(s, frame):
    s.sendall(frame, socket.MSG_NOSIGNAL)
    header = s.recv(4, socket.MSG_WAITALL)
    if len(header) < 4:
        raise OSError("closed")
    s.recv(struct.unpack(">I", header)[0], socket.MSG_WAITALL)

socks = [connect() for _ in range(count)]
print("held", flush=True)
while not select.select([sys.stdin], [], [], every)[0]:
    for i, s in enumerate(socks):
        try:
            ask(s, status)
        except OSError:
            s.close()
            try:
                socks[i] = connect()
            except OSError:
                pass
"""


@pytest.fixture
def hostile_crowd() -> Iterator[Callable[[Path, bytes], list[subprocess.Popen[str]]]]:
    crowd: list[subprocess.Popen[str]] = []

    def start(runtime_dir: Path, first: bytes) -> list[subprocess.Popen[str]]:
        name = printable(control_address(runtime_dir))
        status = encode_frame(encode(Status())).hex()
        for _ in range(8):  # 8 processes x 8 connections = 64, the general capacity
            crowd.append(
                subprocess.Popen(
                    [sys.executable, "-c", HOSTILE, name, "8", "2", first.hex(), status],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in crowd:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "held"
        return crowd

    yield start
    for proc in crowd:
        assert proc.stdin is not None
        proc.stdin.close()
    for proc in crowd:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("crowd", ["asking", "chatting"])
def test_status_answers_while_64_hostile_connections_are_held(
    root: Path,
    daemons: DaemonFactory,
    hostile_crowd: Callable[[Path, bytes], list[subprocess.Popen[str]]],
    crowd: str,
) -> None:
    """'asking': the oldest idle connection makes room. 'chatting': 64 chat sessions can
    never be reaped, and status goes through a reserved slot."""
    config = make_config(root, {"alpha": agent_entry()})
    # A full house of the crowd's size (the defaults are 256, 64 a process; ADR 0069).
    config["daemon"]["control_limits"] = {"max_connections": 64, "max_per_process": 16}
    daemon = daemons(config).start()
    first = Status() if crowd == "asking" else ChatOpen(agent="alpha")
    procs = hostile_crowd(daemon.runtime_dir, encode_frame(encode(first)))
    for _ in range(5):
        result = daemon.cli("status", "--json")
        assert result.returncode == 0, result.stderr + daemon.log()
        assert json.loads(result.stdout)["daemon"]["pid"] == daemon.proc.pid  # type: ignore[union-attr]
    control = json.loads(result.stdout)["control"]
    if crowd == "asking":
        assert control["reaped_idle"] >= 1  # the operator took an idle hostile's place
    else:
        assert control["reserved_used"] >= 5  # no chat session may be reaped
    human = daemon.cli("status")
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith("daemon    pid")
    assert "\ncontrol   " in human.stdout
    assert all(proc.poll() is None for proc in procs), "a hostile process gave up"
    # And the operator can still stop it, through the same door.
    stopped = daemon.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert daemon.wait_exit() == 0


def test_an_interactive_chat_is_never_closed_as_idle(root: Path, daemons: DaemonFactory) -> None:
    """With a 1 s idle timeout, a plain connection opened after the chat's last word is
    closed, while the chat, idle for longer, still answers (it got 'Broken pipe' before)."""
    daemon = daemons(config(root), faults=False).start(ZEROCLAW_CONTROL_IDLE_SECS="1")

    def outlast_the_idle_timeout() -> None:
        with (
            ControlSession(daemon.runtime_dir, timeout=30) as idle,
            pytest.raises(DaemonUnreachable),
        ):
            idle.next_reply()  # EOF: the daemon closed it for idleness

    child = spawn_chat(daemon, root)
    try:
        child.expect_exact(PROMPT)
        outlast_the_idle_timeout()  # before the first line, too: someone may be thinking
        child.sendline("hello")
        child.expect_exact("Hello, I am alpha.")
        child.expect_exact(PROMPT)
        outlast_the_idle_timeout()
        child.sendline("hello")
        child.expect_exact("Hello, I am alpha.")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before


@pytest.fixture
def stand_in(root: Path) -> Iterator[Callable[[bytes | None], None]]:
    """Something of our uid on the control socket's name that refuses every connection the
    way the daemon does when it is full or the peer is not allowed: a reply, then close,
    without reading the request (so the client may hit EPIPE)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(control_address(root / "run"))
    listener.listen(16)
    # The CLI talks only to the lock's holder (the daemon writes its pid there first).
    (root / "run").mkdir(parents=True, exist_ok=True)
    (root / "run" / "zeroclaw.lock").write_text(f"{os.getpid()}\n")
    answer: list[bytes | None] = [None]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                if answer[0] is not None:
                    conn.sendall(answer[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def set_answer(frame: bytes | None) -> None:
        answer[0] = frame

    yield set_answer
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    thread.join(5)


@pytest.mark.parametrize(
    "argv",
    [
        ("status",),
        ("status", "--json"),
        ("agents", "list"),
        ("memory", "list", "--agent", "alpha"),
        ("--agent", "alpha", "chat", "-m", "hi"),
    ],
)
def test_a_refusal_is_a_sentence_and_exit_3(
    root: Path, daemons: DaemonFactory, stand_in: Callable[[bytes | None], None], argv: tuple[str]
) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()}))  # configured, not started
    for code in ("busy", "forbidden"):
        stand_in(encode_frame(encode(error_reply(code, "too many control connections"))))
        for _ in range(3):  # the refusal races the request: both orders must read the same
            result = daemon.cli(*argv)
            assert result.returncode == 3, (argv, result.returncode, result.stderr)
            assert f"({code})" in result.stderr and "too many control connections" in result.stderr
            assert "KeyError" not in result.stderr and "internal error" not in result.stderr
    if argv[0] == "memory":
        return  # a connection closed without a word reads as no daemon: memory goes direct
    stand_in(None)  # closed without a word
    result = daemon.cli(*argv)
    assert result.returncode == 3, (argv, result.returncode, result.stderr)
    assert "closed the connection" in result.stderr or "no zeroclaw daemon" in result.stderr
    assert "Traceback" not in result.stderr
