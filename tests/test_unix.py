"""The one unix-socket binder: path sockets are their owner's alone, taken names refused."""

from __future__ import annotations

import errno
import os
import secrets
import socket
import stat
from pathlib import Path

import pytest

from zeroclaw._unix import bind_unix, owner_only_umask


def test_a_path_socket_is_the_owners_alone_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        listener = bind_unix(tmp_path / "s.sock")
        after = os.umask(0)
    finally:
        os.umask(old)
    assert after == 0  # the caller's umask is back
    with listener:
        info = (tmp_path / "s.sock").stat()
        assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(tmp_path / "s.sock"))  # it listens


def test_a_taken_abstract_name_is_eaddrinuse_and_leaves_nothing_open() -> None:
    name = f"\0zeroclaw-test/{secrets.token_hex(8)}"
    with bind_unix(name):
        before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(OSError, match="in use") as caught:
            bind_unix(name)
        assert caught.value.errno == errno.EADDRINUSE
        assert len(os.listdir("/proc/self/fd")) == before


def test_owner_only_umask_restores_the_previous_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with owner_only_umask():
            (tmp_path / "f").touch()
        after = os.umask(0o022)
    finally:
        os.umask(old)
    assert after == 0o022
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o600


def test_a_burst_of_connections_waits_in_the_queue_while_none_is_accepted() -> None:
    """200 chat sessions opened at once came faster than the daemon accepts; the queue was
    128, and a unix connect to a full queue fails at once (EAGAIN) for a client with a
    timeout. The queue is now the kernel's maximum: a burst of 300 waits in it."""
    name = f"\0zeroclaw-test/{secrets.token_hex(8)}"
    clients: list[socket.socket] = []
    try:
        with bind_unix(name):
            for _ in range(300):
                client = socket.socket(socket.AF_UNIX)
                clients.append(client)
                client.setblocking(False)  # a full queue would raise BlockingIOError here
                client.connect(name)
    finally:
        for client in clients:
            client.close()
