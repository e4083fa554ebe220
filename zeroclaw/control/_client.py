"""Blocking control-socket client for the CLI (the CLI is not a trio program).

The control socket is an abstract name (`_address`), which any local process could bind
first. So the client checks who it reached: the listening process must run as our uid,
as root, or as the owner of the runtime dir (a root operator talking to a daemon that runs
as its own user). Anything else gets no request from us."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from .._decode import DecodeFailure
from .._framing import FrameDecoder, FrameTooLarge, encode_frame
from ._address import control_address, printable
from ._protocol import MAX_CONTROL_FRAME, AnyRequest, Reply, Request, decode_reply, encode

R = TypeVar("R")


class DaemonUnreachable(Exception):
    """No daemon answers on the control socket."""


class UntrustedDaemon(DaemonUnreachable):
    """Something answers on the control socket's name, but not as a uid we trust."""


def trusted_uids(runtime_dir: Path) -> frozenset[int]:
    uids = {os.geteuid(), 0}
    with contextlib.suppress(OSError):
        uids.add(runtime_dir.stat().st_uid)
    return frozenset(uids)


LOCK_NAME = "zeroclaw.lock"  # the daemon's pid lock in its runtime dir (supervisor._lock)


def lock_holder(runtime_dir: Path) -> int | None:
    """The pid the runtime dir's lock file names (0: no daemon holds it, the file is
    absent or empty), or None when we cannot read it (then the uid alone decides)."""
    try:
        text = (runtime_dir / LOCK_NAME).read_text().strip()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else 0


def server_refusal(uid: int, pid: int, trusted: frozenset[int], holder: int | None) -> str | None:
    """Why the process listening on the control socket's name is not our daemon, or None.
    An abstract name is anyone's to bind: an agent of another daemon (same uid, its
    connect scoped but not its bind) could take the name of one that is not running and
    read what the operator sends it. The daemon writes its pid in the lock before binding."""
    if uid not in trusted:
        return f"pid {pid} running as uid {uid}, which is neither us, root nor the owner"
    if holder is not None and pid > 0 and holder != pid:
        who = f"pid {holder}" if holder else "no daemon"
        return f"pid {pid}, but {who} holds the lock"
    return None


def connect_waiting(sock: socket.socket, address: str, timeout: float | None) -> None:
    """Connect `sock` to `address`, waiting at most `timeout` (None: as long as it takes)
    for room in the listener's accept queue. A unix socket with a timeout is non-blocking,
    and a non-blocking connect to a full queue fails at once (EAGAIN), where a blocking
    one waits for the listener to accept, for as long as the socket's send timeout: so the
    connect blocks, under that timeout. EAGAIN once it has passed."""
    sock.settimeout(None)
    if timeout is not None:
        whole = int(timeout)
        # At least a microsecond: a send timeout of 0 s 0 µs means none at all.
        micros = max(int((timeout - whole) * 1_000_000), 0 if whole else 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("@ll", whole, micros))
    sock.connect(address)


class ControlSession:
    """One connection: send requests, read replies. A streaming command (chat) reads its
    events with `replies()` and may `send` more (cancel, approval) in between."""

    def __init__(self, runtime_dir: Path, timeout: float | None = 30.0) -> None:
        self.address = control_address(runtime_dir)
        self.name = printable(self.address)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self._decoder = FrameDecoder(MAX_CONTROL_FRAME)
        self._ready: list[bytes] = []  # frames, decoded when read (as the reader's type)
        try:
            connect_waiting(self._sock, self.address, timeout)
        except OSError as exc:
            self._sock.close()
            if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
                raise DaemonUnreachable(f"{self.name} (runtime dir {runtime_dir})") from None
            if exc.errno == errno.EAGAIN:
                raise DaemonUnreachable(
                    f"{self.name}: the daemon accepted no connection within {timeout:g} s "
                    "(its queue of connections waiting to be accepted stayed full)"
                ) from None
            raise
        self._sock.settimeout(timeout)
        creds = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
        why = server_refusal(uid, pid, trusted_uids(runtime_dir), lock_holder(runtime_dir))
        if why is not None:
            self._sock.close()
            raise UntrustedDaemon(
                f"{self.name} is held by {why} of {runtime_dir}; refusing to talk to it"
            )

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
        """Send a request. If the daemon has already closed the connection (it refused it),
        raise nothing here: its refusal is waiting to be read by `next_reply`."""
        self.send_payload(encode(request))

    def send_payload(self, payload: bytes) -> None:
        """One frame of already encoded bytes (for tests and diagnostics of the server)."""
        # MSG_NOSIGNAL: a closed peer is an error to handle, never a SIGPIPE.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._sock.sendall(encode_frame(payload), socket.MSG_NOSIGNAL)

    def next_reply(self, data_type: Any = Any) -> Reply[Any]:
        """The next reply, its `data` decoded as `data_type` (a request's `reply_type`);
        plain msgpack values by default."""
        while not self._ready:
            try:
                chunk = self._sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise DaemonUnreachable(f"{self.name}: the daemon closed the connection")
            try:
                self._ready += self._decoder.feed(chunk)
            except FrameTooLarge as exc:
                raise DaemonUnreachable(f"{self.name}: not a zeroclaw reply: {exc}") from None
        try:
            return decode_reply(self._ready.pop(0), data_type)
        except DecodeFailure as exc:
            # Whatever answered is not a daemon this CLI can talk to.
            raise DaemonUnreachable(f"{self.name}: not a zeroclaw reply: {exc}") from None

    def replies(self, data_type: Any = Any) -> Iterator[Reply[Any]]:
        """The replies to the last request, up to and including the final one."""
        while True:
            reply = self.next_reply(data_type)
            yield reply
            if not reply.more:
                return


class ControlClient:
    def __init__(self, runtime_dir: Path, timeout: float = 30.0) -> None:
        self.runtime_dir = runtime_dir
        self.timeout = timeout
        self.name = printable(control_address(runtime_dir))

    def session(self, timeout: float | None = None) -> ControlSession:
        return ControlSession(self.runtime_dir, timeout)

    def stream(self, request: AnyRequest, data_type: Any = Any) -> Iterator[Reply[Any]]:
        """Send one request; yield its replies until the last one."""
        with ControlSession(self.runtime_dir, self.timeout) as session:
            session.send(request)
            yield from session.replies(data_type)

    def request(self, request: AnyRequest) -> Reply[Any]:
        """One request, its final reply, `data` as plain values."""
        replies = list(self.stream(request))
        return replies[-1]

    def call(self, request: Request[R]) -> Reply[R]:
        """One request, its final reply, `data` decoded as the request's reply type."""
        replies = list(self.stream(request, request.reply_type))  # type: ignore[arg-type]
        reply: Reply[R] = replies[-1]
        return reply
