"""Blocking control-socket client for the CLI (the CLI is not a trio program)."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from .._decode import DecodeFailure
from ._framing import FrameDecoder, FrameTooLarge, encode_frame
from ._protocol import MAX_CONTROL_FRAME, AnyRequest, Reply, decode_reply, encode


class DaemonUnreachable(Exception):
    """No daemon answers on the control socket."""


class ControlSession:
    """One connection: send requests, read replies. A streaming command (chat) reads its
    events with `replies()` and may `send` more (cancel, approval) in between."""

    def __init__(self, socket_path: Path, timeout: float | None = 30.0) -> None:
        self.socket_path = socket_path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._decoder = FrameDecoder(MAX_CONTROL_FRAME)
        self._ready: list[Reply] = []
        try:
            self._sock.connect(str(socket_path))
        except OSError as exc:
            self._sock.close()
            if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
                raise DaemonUnreachable(str(socket_path)) from None
            raise

    def __enter__(self) -> ControlSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def send(self, request: AnyRequest) -> None:
        self.send_payload(encode(request))

    def send_payload(self, payload: bytes) -> None:
        """One frame of already encoded bytes (for tests and diagnostics of the server)."""
        self._sock.sendall(encode_frame(payload))

    def next_reply(self) -> Reply:
        while not self._ready:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise DaemonUnreachable(f"{self.socket_path}: connection closed mid-reply")
            try:
                self._ready += [decode_reply(f) for f in self._decoder.feed(chunk)]
            except (DecodeFailure, FrameTooLarge) as exc:
                # Whatever answered is not a daemon this CLI can talk to.
                raise DaemonUnreachable(
                    f"{self.socket_path}: not a zeroclaw reply: {exc}"
                ) from None
        return self._ready.pop(0)

    def replies(self) -> Iterator[Reply]:
        """The replies to the last request, up to and including the final one."""
        while True:
            reply = self.next_reply()
            yield reply
            if not reply.more:
                return


class ControlClient:
    def __init__(self, socket_path: Path, timeout: float = 30.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def session(self, timeout: float | None = None) -> ControlSession:
        return ControlSession(self.socket_path, timeout)

    def stream(self, request: AnyRequest) -> Iterator[Reply]:
        """Send one request; yield its replies until the last one."""
        with ControlSession(self.socket_path, self.timeout) as session:
            session.send(request)
            yield from session.replies()

    def request(self, request: AnyRequest) -> Reply:
        replies = list(self.stream(request))
        return replies[-1]
