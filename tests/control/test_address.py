"""The control socket's abstract name: derived from the runtime dir, seen without connecting."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from zeroclaw.control import control_address, is_listening, printable


def test_cli_and_daemon_agree_on_the_name(tmp_path: Path) -> None:
    """The CLI finds the daemon from the config file alone: the name is a digest of the
    resolved runtime dir, so a symlinked spelling of the same dir reaches the same name."""
    real = tmp_path / "run"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    assert control_address(tmp_path / "alias") == control_address(real)
    assert control_address(tmp_path / "other") != control_address(real)
    assert control_address(real).startswith("\0zeroclaw/control/")
    assert printable(control_address(real)).startswith("@zeroclaw/control/")


def test_is_listening_sees_only_a_listener(tmp_path: Path) -> None:
    address = control_address(tmp_path)
    assert not is_listening(address)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    assert not is_listening(address)  # bound, not yet listening
    server.listen(1)
    try:
        assert is_listening(address)
    finally:
        server.close()
    assert not is_listening(address)  # the name goes with the socket: nothing stale


def test_is_listening_reads_proc_net_unix() -> None:
    table = (
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "0000000000000000: 00000002 00000000 00010000 0001 01 1234 @zeroclaw/control/ab\n"
        "0000000000000000: 00000003 00000000 00000000 0001 03 1235 @zeroclaw/control/cd\n"
        "0000000000000000: 00000002 00000000 00010000 0001 01 1236\n"
    )
    assert is_listening("\0zeroclaw/control/ab", table)
    assert not is_listening("\0zeroclaw/control/cd", table)  # a connection, not a listener
    assert not is_listening("\0zeroclaw/control/ef", table)
