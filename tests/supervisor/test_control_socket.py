"""The control socket against hostile and careless clients."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.control import (
    ControlClient,
    Status,
    control_address,
    decode_reply,
    encode,
    encode_frame,
)

DaemonFactory = Callable[..., Daemon]
NOBODY = 65534


def one_agent(root: Path) -> dict[str, object]:
    return make_config(root, {"alpha": agent_entry()})


def read_reply(sock: socket.socket) -> dict[str, object]:
    header = sock.recv(4, socket.MSG_WAITALL)
    (size,) = struct.unpack(">I", header)
    reply = decode_reply(sock.recv(size, socket.MSG_WAITALL))
    return {"ok": reply.ok, "error": reply.error}


def connect(daemon: Daemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(control_address(daemon.runtime_dir))
    return sock


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff" * 64,  # a length far over the limit
        struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1",  # invalid msgpack
        encode_frame(b"\x81\xa3cmd\xa4nope"),  # {"cmd": "nope"}: unknown command
        encode_frame(b"\x81\xa3cmd\xacagents.start"),  # missing the alias field
    ],
)
def test_garbage_gets_an_error_and_the_daemon_survives(
    root: Path, daemons: DaemonFactory, garbage: bytes
) -> None:
    daemon = daemons(one_agent(root)).start()
    with connect(daemon) as sock:
        sock.sendall(garbage)
        reply = read_reply(sock)
    assert reply["ok"] is False
    assert reply["error"] in ("too_large", "malformed")
    assert daemon.status()["agents"][0]["state"] == "running"


def test_half_closed_and_truncated_connections(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(one_agent(root)).start()
    with connect(daemon) as sock:  # half a frame, then shut down the write side
        sock.sendall(encode_frame(encode(Status()))[:3])
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b""  # the daemon closes its side, no reply, no crash
    with connect(daemon):
        pass  # connect and vanish
    socks = [connect(daemon) for _ in range(20)]  # idle connections do not block others
    assert daemon.status()["agents"][0]["state"] == "running"
    for sock in socks:
        sock.close()


def test_two_requests_on_one_connection(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(one_agent(root)).start()
    with connect(daemon) as sock:
        sock.sendall(encode_frame(encode(Status())) * 2)
        assert read_reply(sock)["ok"] is True
        assert read_reply(sock)["ok"] is True


SYSTEM_PYTHON = "/usr/bin/python3"  # the venv's interpreter lives where nobody may not read


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another uid")
@pytest.mark.skipif(
    not os.access(SYSTEM_PYTHON, os.X_OK), reason="no system python3 for uid nobody"
)
def test_other_uid_is_refused(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(one_agent(root)).start()
    # An abstract socket has no file mode: anyone in the network namespace may connect, and
    # SO_PEERCRED is what refuses a peer of another uid.
    probe = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({control_address(daemon.runtime_dir)!r})\n"
        # The daemon refuses at accept time, before reading: just read its answer.
        "print(s.recv(4096).hex())\n"
    )
    answer = subprocess.run(
        [SYSTEM_PYTHON, "-c", probe],
        user=NOBODY,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
        check=True,
    ).stdout.strip()
    reply = decode_reply(bytes.fromhex(answer)[4:])
    assert reply.ok is False and reply.error == "forbidden"
    # And the daemon still serves its own user.
    assert ControlClient(daemon.runtime_dir).request(Status()).ok


def test_socket_path_too_long_is_a_clear_error(root: Path, daemons: DaemonFactory) -> None:
    doc = one_agent(root)
    deep = root / ("d" * 60) / ("e" * 60)
    doc["daemon"]["runtime_dir"] = str(deep)  # type: ignore[index]
    daemon = daemons(doc)
    result = daemon.cli("daemon", timeout=30)
    assert result.returncode == 2
    assert "shorter runtime_dir" in result.stderr
    assert "Traceback" not in result.stderr
