"""The daemon's side of the zygote socket, as one trio task plus a spawn() call."""

from __future__ import annotations

import array
import errno
import itertools
import logging
import socket
from collections.abc import Callable

import trio

from .._decode import DecodeFailure
from ..agent import AgentSpec
from ._zygote import MAX_PACKET, Exited, Spawn, Spawned, SpawnFailed, decode_reply, encode

log = logging.getLogger("zeroclaw.supervisor")


class SpawnError(Exception):
    pass


class ZygoteClient:
    """`spawn()` may be called from any task; `run()` is the one task reading the socket."""

    def __init__(self, pid: int, sock: socket.socket, on_exit: Callable[[int, int], None]) -> None:
        self.pid = pid
        self._sock = trio.socket.from_stdlib_socket(sock)
        self._on_exit = on_exit
        self._ids = itertools.count(1)
        self._pending: dict[int, trio.MemorySendChannel[Spawned | SpawnFailed]] = {}
        self._send_lock = trio.Lock()
        self.closed = trio.Event()

    async def spawn(self, spec: AgentSpec, env: dict[str, str], link_fd: int) -> int:
        """Ask the zygote for a new agent process; returns its pid."""
        if self.closed.is_set():
            raise SpawnError("the zygote is gone")
        request_id = next(self._ids)
        payload = encode(Spawn(request_id, spec, env))
        if len(payload) > MAX_PACKET:
            raise SpawnError(
                f"zygote did not spawn {spec.alias}: its start message is {len(payload)} bytes, "
                f"over the zygote's {MAX_PACKET}; run fewer agents in one daemon"
            )
        send, receive = trio.open_memory_channel[Spawned | SpawnFailed](1)
        self._pending[request_id] = send
        try:
            fds = array.array("i", [link_fd]).tobytes()
            async with self._send_lock:
                await self._sock.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            with trio.fail_after(10):
                reply = await receive.receive()
        except OSError as exc:
            if exc.errno == errno.EMSGSIZE:
                raise SpawnError(
                    f"zygote did not spawn {spec.alias}: its start message is {len(payload)} "
                    f"bytes, more than the zygote's socket carries ({self._capacity()}); "
                    f"raise net.core.wmem_max (sysctl) to {MAX_PACKET // 2}, or run fewer "
                    "agents in one daemon"
                ) from None
            raise SpawnError(f"zygote did not spawn {spec.alias}: {exc}") from None
        except (trio.EndOfChannel, trio.TooSlowError) as exc:
            raise SpawnError(f"zygote did not spawn {spec.alias}: {exc}") from None
        finally:
            self._pending.pop(request_id, None)
        if isinstance(reply, SpawnFailed):
            raise SpawnError(f"zygote could not spawn {spec.alias}: {reply.error}")
        return reply.pid

    def _capacity(self) -> str:
        try:
            return f"{self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)} bytes of buffer"
        except OSError:
            return "its buffer"

    async def run(self) -> None:
        try:
            while True:
                try:
                    data = await self._sock.recv(1024 * 1024)
                except OSError:
                    data = b""
                if not data:
                    log.critical("the zygote exited; no agent can be started any more")
                    return
                try:
                    message = decode_reply(data)
                except DecodeFailure as exc:
                    log.error("dropped a bad message from the zygote: %s", exc)
                    continue
                if isinstance(message, Exited):
                    self._on_exit(message.pid, message.status)
                else:
                    waiter = self._pending.get(message.id)
                    if waiter is not None:
                        waiter.send_nowait(message)
        finally:
            self.closed.set()
            for waiter in self._pending.values():
                waiter.close()
