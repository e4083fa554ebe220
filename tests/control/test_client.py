"""The control client's connect: a burst of clients waits for room in the daemon's accept
queue within its timeout (issue 31 #5), and says so when the queue never empties."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from tests.conftest import PATIENCE
from zeroclaw._unix import bind_unix
from zeroclaw.control import ControlSession, DaemonUnreachable, control_address


def _full_queue(runtime_dir: Path) -> tuple[socket.socket, list[socket.socket]]:
    """A listener for `runtime_dir` (this process holds its lock, as a daemon would) whose
    accept queue is full: one more non-blocking connect would be refused."""
    (runtime_dir / "zeroclaw.lock").write_text(f"{os.getpid()}\n")
    address = control_address(runtime_dir)
    listener = bind_unix(address, backlog=0)
    queued: list[socket.socket] = []
    while True:
        client = socket.socket(socket.AF_UNIX)
        client.setblocking(False)
        try:
            client.connect(address)
        except BlockingIOError:
            client.close()
            return listener, queued
        queued.append(client)


def test_a_client_waits_for_room_in_a_full_queue_and_then_talks(tmp_path: Path) -> None:
    """Before: a client with a timeout failed at once (BlockingIOError, a traceback in the
    CLI) when 200 sessions opened at once filled the queue."""
    listener, queued = _full_queue(tmp_path)
    connected: list[ControlSession] = []
    failed: list[BaseException] = []

    def client() -> None:
        try:
            connected.append(ControlSession(tmp_path, timeout=PATIENCE))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=client)
    try:
        thread.start()
        listener.settimeout(PATIENCE)
        conn, _ = listener.accept()  # room for one more in the queue: the waiting client
        thread.join(PATIENCE)
        assert not failed, failed
        assert connected, "the client is still waiting"
        connected[0].close()
        conn.close()
    finally:
        thread.join(PATIENCE)
        for sock in queued:
            sock.close()
        listener.close()


def test_a_queue_that_stays_full_is_an_unreachable_daemon_named_so(tmp_path: Path) -> None:
    listener, queued = _full_queue(tmp_path)
    try:
        with pytest.raises(DaemonUnreachable, match=r"accepted no connection within 0\.2 s"):
            ControlSession(tmp_path, timeout=0.2)
    finally:
        for sock in queued:
            sock.close()
        listener.close()
