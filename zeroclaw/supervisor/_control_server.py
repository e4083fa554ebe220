"""The operator API on `<runtime_dir>/control.sock`.

Mode 0600 and an SO_PEERCRED check (only our own uid, or root) guard it: it is
root-equivalent for the daemon's user. Each connection is its own task with an idle
timeout; garbage, oversized frames and half-closed connections end that connection only.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from ..control import (
    MAX_CONTROL_FRAME,
    AnyRequest,
    DecodeFailure,
    FrameDecoder,
    FrameTooLarge,
    Reply,
    decode_request,
    encode,
    encode_frame,
    error_reply,
    receive_frames,
)

log = logging.getLogger("zeroclaw.control")

IDLE_TIMEOUT_SECS = 30.0
MAX_CONNECTIONS = 64
SUN_PATH_MAX = 107  # sizeof(sun_path) - 1 on Linux


@dataclass(frozen=True)
class Exchange:
    """A request's way back to its client: `send` streams replies before the last one,
    `inbox` holds what the client sends while the request runs (a chat's cancel)."""

    send: Callable[[Reply], Awaitable[None]]
    inbox: trio.MemoryReceiveChannel[AnyRequest]


Handler = Callable[[AnyRequest, Exchange], Awaitable[Reply]]


class SocketPathTooLong(Exception):
    pass


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise SocketPathTooLong(
            f"socket path {path} is {len(os.fsencode(path))} bytes; unix sockets allow "
            f"{SUN_PATH_MAX}. Choose a shorter runtime_dir."
        )


def bind_unix_socket(path: Path) -> socket.socket:
    """Bind a stream socket at `path` with mode 0600 from the start (no window at 0666)."""
    check_socket_path(path)
    # Stale from a killed daemon; we hold the lock, so it is not in use.
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def peer_uid(sock: socket.socket | trio.socket.SocketType) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class ControlServer:
    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        self.refused_peers = 0
        self.bad_requests = 0
        self._slots = trio.CapacityLimiter(MAX_CONNECTIONS)
        self._allowed_uids = {os.geteuid(), 0}

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.socket.from_stdlib_socket(bind_unix_socket(self.path))
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    conn, _ = await listener.accept()
                    nursery.start_soon(self._connection, conn)
        finally:
            listener.close()
            self.path.unlink(missing_ok=True)

    async def _connection(self, conn: trio.socket.SocketType) -> None:
        stream = trio.SocketStream(conn)
        async with stream:
            replies = _Replies(stream)
            uid = peer_uid(conn)
            if uid not in self._allowed_uids:
                self.refused_peers += 1
                log.warning("control connection from uid %d refused", uid, extra={"peer_uid": uid})
                await replies.try_send(error_reply("forbidden", "peer uid not allowed"))
                return
            if self._slots.available_tokens == 0:
                await replies.try_send(error_reply("busy", "too many control connections"))
                return
            async with self._slots:
                await self._serve_requests(stream, replies)

    async def _serve_requests(self, stream: trio.SocketStream, replies: _Replies) -> None:
        requests, inbox = trio.open_memory_channel[AnyRequest](16)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read_requests, stream, requests, replies.try_send)
            while True:
                try:
                    with trio.fail_after(IDLE_TIMEOUT_SECS):
                        request = await inbox.receive()
                except (trio.TooSlowError, trio.EndOfChannel):
                    break
                try:
                    reply = await self.handler(request, Exchange(replies.send, inbox))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break  # the client went away while we streamed to it
                except Exception as exc:  # a bug must not take the control socket down
                    log.exception("control handler failed on %s", type(request).__name__)
                    reply = error_reply("internal", f"{type(exc).__name__}: {exc}")
                if not await replies.try_send(reply):
                    break
            nursery.cancel_scope.cancel()

    async def _read_requests(
        self,
        stream: trio.SocketStream,
        requests: trio.MemorySendChannel[AnyRequest],
        try_send: Callable[[Reply], Awaitable[bool]],
    ) -> None:
        """Decode frames into `requests`; closing it tells the server the client is done."""
        decoder = FrameDecoder(MAX_CONTROL_FRAME)
        async with requests:
            while True:
                try:
                    frames = await receive_frames(stream, decoder)
                except FrameTooLarge as exc:
                    self.bad_requests += 1
                    await try_send(error_reply("too_large", str(exc)))
                    return
                if frames is None:
                    return
                for frame in frames:
                    try:
                        request = decode_request(frame)
                    except DecodeFailure as exc:
                        self.bad_requests += 1
                        await try_send(error_reply(exc.code, f"bad request: {exc}"))
                        return
                    await requests.send(request)


class _Replies:
    """Replies on one connection. Locked: the request reader and a handler may both answer."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._lock = trio.Lock()

    async def send(self, reply: Reply) -> None:
        async with self._lock:
            await self._stream.send_all(encode_frame(encode(reply)))

    async def try_send(self, reply: Reply) -> bool:
        """Send unless the client has gone; False when it has."""
        try:
            await self.send(reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True
