"""Blocking control-socket client for the CLI (the CLI is not a trio program)."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from pathlib import Path

from ._framing import FrameDecoder, encode_frame
from ._protocol import MAX_CONTROL_FRAME, AnyRequest, Reply, decode_reply, encode


class DaemonUnreachable(Exception):
    """No daemon answers on the control socket."""


class ControlClient:
    def __init__(self, socket_path: Path, timeout: float = 30.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def stream(self, request: AnyRequest) -> Iterator[Reply]:
        """Send one request; yield its replies until the last one."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            try:
                sock.connect(str(self.socket_path))
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
                    raise DaemonUnreachable(str(self.socket_path)) from None
                raise
            sock.sendall(encode_frame(encode(request)))
            decoder = FrameDecoder(MAX_CONTROL_FRAME)
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    raise DaemonUnreachable(f"{self.socket_path}: connection closed mid-reply")
                for frame in decoder.feed(chunk):
                    reply = decode_reply(frame)
                    yield reply
                    if not reply.more:
                        return
        finally:
            sock.close()

    def request(self, request: AnyRequest) -> Reply:
        replies = list(self.stream(request))
        return replies[-1]
