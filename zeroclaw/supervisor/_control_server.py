"""The operator API on an abstract unix socket named after the runtime dir (ADR 0011).

Who may connect: the daemon's own uid or root (SO_PEERCRED), and never a process that
descends from the zygote, i.e. nothing inside an agent's sandbox (`_peer`). Where the
kernel has Landlock ABI 6, agents cannot even connect (their scope forbids abstract sockets
made outside their domain); the ancestry check is the second layer, and the only one under
`sandbox = "none"`.

How many: `ConnectionTable` (`_admission`) bounds connections per peer process, reaps the
oldest idle one when full and keeps reserved slots for status and stop. Each connection is
its own task with an idle timeout (none for a chat session); garbage, oversized frames and
half-closed connections end that connection only.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import math
import os
import resource
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from .._log_throttle import LogThrottle
from .._unix import bind_unix
from ..config import ControlLimits
from ..control import (
    MAX_CONTROL_FRAME,
    AgentsList,
    AnyRequest,
    Chat,
    ChatOpen,
    ControlStats,
    DecodeFailure,
    FrameDecoder,
    FrameTooLarge,
    Reply,
    Shutdown,
    Status,
    control_address,
    decode_request,
    encode,
    encode_frame,
    error_reply,
    printable,
    receive_frames,
)
from ..control import Exchange as Exchange  # moved to control; re-exported for the chat service
from ._admission import Admit, ConnectionTable, RequestKind
from ._peer import (
    OUT_OF_DESCRIPTORS,
    close_pidfd,
    judge_peer,
    needs_ancestry,
    peer_ancestry,
    peer_credentials,
)

log = logging.getLogger("zeroclaw.control")

IDLE_TIMEOUT_SECS = 30.0
# Development and test hook: a shorter idle timeout for non-chat connections.
IDLE_TIMEOUT_ENV = "ZEROCLAW_CONTROL_IDLE_SECS"
REFUSAL_SEND_SECS = 5.0
ACCEPT_RETRY_SECS = 0.1  # after a failed accept (EMFILE): do not spin
LOG_EVERY_SECS = 10.0  # a refused peer that does not read is not waited for
SUN_PATH_MAX = 107  # sizeof(sun_path) - 1 on Linux


# The command table's dispatch (`control.CommandTable`).
Handler = Callable[[AnyRequest, Exchange], Awaitable[Reply[Any]]]


class SocketPathTooLong(Exception):
    pass


class ControlNameTaken(Exception):
    """Another process holds the control socket's abstract name."""


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise SocketPathTooLong(
            f"socket path {path} is {len(os.fsencode(path))} bytes; unix sockets allow "
            f"{SUN_PATH_MAX}. Choose a shorter runtime_dir."
        )


def bind_control_socket(runtime_dir: Path) -> socket.socket:
    """Bind and listen on the control socket's abstract name for `runtime_dir`.

    We hold the runtime dir's lock, so no other zeroclaw daemon uses this name: whoever
    has it is squatting, and we say who rather than serve beside it."""
    address = control_address(runtime_dir)
    try:
        sock = bind_unix(address)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise ControlNameTaken(
            f"the control socket name {printable(address)} is already taken by "
            f"{_holder(address)}; stop that process (see 'ss -xlp')"
        ) from None
    return sock


def _holder(address: str) -> str:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.settimeout(1)
    try:
        probe.connect(address)
        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
        return f"pid {pid} (uid {uid})"
    except OSError:
        return "another process"
    finally:
        probe.close()


def request_kind(request: AnyRequest) -> RequestKind:
    if isinstance(request, (Status, AgentsList, Shutdown)):
        return "essential"
    if isinstance(request, (Chat, ChatOpen)):
        return "chat"
    return "other"


class ControlServer:
    def __init__(
        self,
        listener: socket.socket,
        handler: Handler,
        *,
        zygote_pid: int,
        daemon_pid: int | None = None,
        idle_timeout: float = IDLE_TIMEOUT_SECS,
        table: ConnectionTable | None = None,
        limits: Callable[[], ControlLimits] | None = None,
    ) -> None:
        """`daemon_pid`: the process whose descendants are never the operator (None: this
        one, the daemon; a test serving its own children says -1). `limits`: the running
        config's `[daemon] control_limits`, read at each connect (None: the table's own)."""
        self.handler = handler
        self.zygote_pid = zygote_pid
        self.idle_timeout = idle_timeout
        self.table = table if table is not None else ConnectionTable()
        self.refused_peers = 0
        self.refused_busy = 0
        self.reaped = 0
        self.admitted_reserved = 0
        self.bad_requests = 0
        self._listener = listener
        self._uid = os.geteuid()  # also the agents' uid
        # the daemon: what it starts is never the operator
        self._pid = os.getpid() if daemon_pid is None else daemon_pid
        self._allowed_uids = frozenset({self._uid, 0})
        self._ids = itertools.count(1)
        self._scopes: dict[int, trio.CancelScope] = {}
        self._warnings = LogThrottle[str](LOG_EVERY_SECS, overflow_key="other")
        self._spare = SpareDescriptor()
        self._limits = limits

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.socket.from_stdlib_socket(self._listener)
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    try:
                        conn, _ = await listener.accept()
                    except OSError as exc:  # out of fds, or the peer aborted: not fatal
                        if exc.errno in OUT_OF_DESCRIPTORS and not self._spare.release():
                            self._warn(
                                "descriptors",
                                "control socket cannot accept: %s",
                                out_of_descriptors_message(),
                            )
                            await trio.sleep(ACCEPT_RETRY_SECS)
                            continue
                        if exc.errno not in OUT_OF_DESCRIPTORS:
                            self._warn("accept", "control accept failed: %s", exc)
                            await trio.sleep(ACCEPT_RETRY_SECS)
                            continue
                        # The spare descriptor, closed, makes room to answer the operator.
                        try:
                            conn, _ = await listener.accept()
                        except OSError:
                            self._spare.keep()
                            self._warn(
                                "descriptors",
                                "control socket cannot accept: %s",
                                out_of_descriptors_message(),
                            )
                            await trio.sleep(ACCEPT_RETRY_SECS)
                            continue
                    try:
                        self._admit(conn, nursery)
                    except OSError as exc:
                        if exc.errno in OUT_OF_DESCRIPTORS:
                            self._out_of_descriptors(conn, nursery)
                        else:  # SO_PEERCRED failed: we cannot tell who it is
                            self._warn("peer", "control peer check failed: %s", exc)
                            conn.close()
                    finally:
                        self._spare.keep()
        finally:
            listener.close()
            self._spare.release()

    def _out_of_descriptors(self, conn: trio.socket.SocketType, nursery: trio.Nursery) -> None:
        """Say so, to the log and to the client: not a peer we could not verify."""
        self.refused_busy += 1
        why = out_of_descriptors_message()
        self._warn("descriptors", "control connection refused: %s", why)
        nursery.start_soon(_refuse, conn, error_reply("busy", why))

    def _admit(self, conn: trio.socket.SocketType, nursery: trio.Nursery) -> None:
        """Decide at accept time, in the accept loop: who it is, and whether there is room."""
        creds = peer_credentials(conn)  # type: ignore[arg-type]
        try:
            chain = peer_ancestry(creds) if needs_ancestry(creds.uid, self._uid) else None
            verdict = judge_peer(
                creds.uid,
                chain,
                self._allowed_uids,
                self._uid,
                self.zygote_pid,
                daemon_pid=self._pid,
            )
        finally:
            close_pidfd(creds)
        if verdict != "operator":
            self.refused_peers += 1
            why = {
                "foreign_uid": "peer uid not allowed",
                "agent": "agents, their processes and what the daemon runs for them may not "
                "use the control socket",
                "unverifiable": "cannot verify which process this is (it exited, or /proc "
                "hides its ancestors, e.g. systemd's ProtectProc=invisible: run the CLI as root)",
            }[verdict]
            self._warn(
                verdict,
                "control connection from pid %d uid %d refused: %s",
                creds.pid,
                creds.uid,
                why,
                extra={"peer_pid": creds.pid, "peer_uid": creds.uid, "verdict": verdict},
            )
            nursery.start_soon(_refuse, conn, error_reply("forbidden", why))
            return
        conn_id = next(self._ids)
        if self._limits is not None:
            limits = self._limits()
            self.table.limit(limits.max_connections, limits.max_per_process)
        decision = self.table.connect(conn_id, creds.pid, trio.current_time())
        if not isinstance(decision, Admit):
            self.refused_busy += 1
            self._warn(
                "busy", "control connection from pid %d refused: %s", creds.pid, decision.reason
            )
            nursery.start_soon(_refuse, conn, error_reply("busy", decision.reason))
            return
        self.admitted_reserved += decision.reserved
        for victim in decision.reap:
            self.reaped += 1
            scope = self._scopes.pop(victim, None)
            if scope is not None:
                scope.cancel()
        scope = self._scopes[conn_id] = trio.CancelScope()
        nursery.start_soon(self._connection, conn_id, conn, scope)

    def stats(self) -> ControlStats:
        """For `status`: what the control socket has had to turn away."""
        return ControlStats(
            connections=len(self.table),
            refused_peers=self.refused_peers,
            refused_busy=self.refused_busy,
            reaped_idle=self.reaped,
            reserved_used=self.admitted_reserved,
            bad_requests=self.bad_requests,
        )

    def _warn(
        self, kind: str, msg: str, *args: object, extra: Mapping[str, object] | None = None
    ) -> None:
        """A hostile peer can make refusals by the thousand: one warning per kind per
        LOG_EVERY_SECS, carrying how many were not logged since."""
        count = self._warnings.event(kind, trio.current_time())
        if count == 0:
            return
        if count > 1:
            msg += f" (and {count - 1} more not logged)"
        log.warning(msg, *args, extra=extra)

    async def _connection(
        self, conn_id: int, conn: trio.socket.SocketType, scope: trio.CancelScope
    ) -> None:
        stream = trio.SocketStream(conn)
        try:
            with scope:
                async with stream:
                    await self._serve_requests(conn_id, stream, _Replies(stream))
        finally:
            if self._scopes.get(conn_id) is scope:
                del self._scopes[conn_id]
            self.table.closed(conn_id)

    async def _serve_requests(
        self, conn_id: int, stream: trio.SocketStream, replies: _Replies
    ) -> None:
        requests, inbox = trio.open_memory_channel[AnyRequest](16)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read_requests, stream, requests, replies.try_send)
            while conn_id in self.table:
                # A chat session waits for its operator's next line as long as it takes.
                timeout = self.idle_timeout if self.table.times_out(conn_id) else math.inf
                try:
                    with trio.fail_after(timeout):
                        request = await inbox.receive()
                except (trio.TooSlowError, trio.EndOfChannel):
                    break
                if conn_id not in self.table:
                    break  # reaped as we woke: the cancellation is on its way
                if not self.table.request(conn_id, request_kind(request), trio.current_time()):
                    self.refused_busy += 1
                    await replies.try_send(
                        error_reply(
                            "busy",
                            "the control socket is full; this connection may only ask for "
                            "status or stop, once",
                        )
                    )
                    break
                try:
                    reply = await self.handler(request, Exchange(replies.send, inbox))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break  # the client went away while we streamed to it
                except Exception as exc:  # a bug must not take the control socket down
                    log.exception("control handler failed on %s", type(request).__name__)
                    reply = error_reply("internal", f"{type(exc).__name__}: {exc}")
                sent = await replies.try_send(reply)
                if not self.table.finished(conn_id, trio.current_time()) or not sent:
                    break
            nursery.cancel_scope.cancel()

    async def _read_requests(
        self,
        stream: trio.SocketStream,
        requests: trio.MemorySendChannel[AnyRequest],
        try_send: Callable[[Reply[Any]], Awaitable[bool]],
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


def out_of_descriptors_message() -> str:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return (
        f"the daemon is out of file descriptors (limit {soft}); raise LimitNOFILE= in its "
        "unit, and see zeroclaw_http_connections_open in `zeroclaw metrics` for who holds them"
    )


class SpareDescriptor:
    """One descriptor held back (the classic EMFILE trick): closed, it lets the control
    socket accept one more connection when the process has none left, to answer it."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self.keep()

    def keep(self) -> None:
        if self._fd is None:
            with contextlib.suppress(OSError):
                self._fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)

    def release(self) -> bool:
        """Close it; False when none was held."""
        if self._fd is None:
            return False
        os.close(self._fd)
        self._fd = None
        return True


async def _refuse(conn: trio.socket.SocketType, reply: Reply[Any]) -> None:
    """Answer a connection we will not serve, without reading from it, and close it."""
    stream = trio.SocketStream(conn)
    async with stream:
        with trio.move_on_after(REFUSAL_SEND_SECS):
            await _Replies(stream).try_send(reply)


class _Replies:
    """Replies on one connection. Locked: the request reader and a handler may both answer."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._lock = trio.Lock()

    async def send(self, reply: Reply[Any]) -> None:
        async with self._lock:
            await self._stream.send_all(encode_frame(encode(reply)))

    async def try_send(self, reply: Reply[Any]) -> bool:
        """Send unless the client has gone; False when it has."""
        try:
            await self.send(reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True
