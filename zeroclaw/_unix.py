"""Listening on unix sockets: one binder, so every socket the daemon serves is its owner's.

An abstract name (a leading NUL) has no file: who may connect is checked on accept (peer
credentials, ADR 0011). A path socket's permissions are its file's, fixed at bind() from the
umask: bound under `owner_only_umask` it is 0600 from its first instant, where a chmod after
bind() would leave a window. The umask is process-wide, so the section is kept to the bind.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

OWNER_ONLY = 0o177  # files created meanwhile: rw for the owner, nothing for anyone else


@contextmanager
def owner_only_umask() -> Iterator[None]:
    """For binds this module does not make itself (ZeroMQ's ipc:// endpoints)."""
    old = os.umask(OWNER_ONLY)
    try:
        yield
    finally:
        os.umask(old)


# Connections the kernel queues for accept(): as many as it allows (net.core.somaxconn
# caps it). A full queue refuses a unix connect at once (EAGAIN), and a burst of clients
# (200 chat sessions opened together) comes faster than the daemon accepts and checks each
# one's peer: the queue costs kernel memory only while connections wait in it.
LISTEN_BACKLOG = socket.SOMAXCONN


def bind_unix(address: str | Path, *, backlog: int = LISTEN_BACKLOG) -> socket.socket:
    """A listening AF_UNIX stream socket (close-on-exec) on `address`: an abstract name
    (str starting with NUL) or a path, which is made 0600. Raises OSError (EADDRINUSE when
    the name is taken or the path exists), with nothing left open."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        if isinstance(address, str) and address.startswith("\0"):
            sock.bind(address)
        else:
            with owner_only_umask():
                sock.bind(os.fspath(address))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock
