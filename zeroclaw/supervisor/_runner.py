"""One trio task per agent: it owns the agent's Lifecycle and is the only one to change it.

Everything that happens to an agent (operator commands, process exit, readiness, a hung
link) arrives in the runner's inbox and is handled in order, so there are no races
between, say, a restart request and a crash. Timers (backoff, start timeout, stop grace,
idle stop) are deadlines on the inbox wait.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec
import trio

from ..agent import (
    MAX_LINK_FRAME,
    AgentSpec,
    Keys,
    Neighbours,
    Ping,
    Pong,
    ProbeCommand,
    ProbeResult,
    decode_link,
    encode_link,
)
from ..bus import AgentKeys
from ..config import RestartPolicy
from ..control import FrameDecoder, FrameTooLarge, encode_frame, receive_frames
from ..policy import abi_version
from ..policy._landlock import sandbox_summary
from ._lifecycle import ExitStatus, Lifecycle, State, Transition
from ._spec import agent_environment
from ._zygote_client import SpawnError, ZygoteClient

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

log = logging.getLogger("zeroclaw.supervisor")

START_TIMEOUT_SECS = 20.0  # from spawn to Ready; past it the start counts as a failure
LIVENESS_INTERVAL_SECS = 5.0
LIVENESS_TIMEOUT_SECS = 15.0  # no Pong for this long: the agent is hung and is killed
SPAWN_FAILED = ExitStatus(code=127)


@dataclass(frozen=True)
class Command:
    kind: Literal["start", "stop", "restart", "remove"]
    reason: str = ""


@dataclass(frozen=True)
class ProcessExited:
    pid: int
    status: ExitStatus


@dataclass(frozen=True)
class ProcessReady:
    pid: int


@dataclass(frozen=True)
class ProcessHung:
    pid: int


Event = Command | ProcessExited | ProcessReady | ProcessHung


class AgentRunner:
    def __init__(
        self,
        spec: AgentSpec,
        policy: RestartPolicy,
        zygote: ZygoteClient,
        daemon_env: Mapping[str, str],
        grace_secs: float,
        register_pid: Callable[[int, AgentRunner], None],
        on_transition: Callable[[Transition], None],
        mint_keys: Callable[[str], AgentKeys],
        max_frame: int,
    ) -> None:
        self.spec = spec
        self.lifecycle = Lifecycle(spec.alias, policy)
        self.grace_secs = grace_secs
        self._zygote = zygote
        self._daemon_env = daemon_env
        self._register_pid = register_pid
        self._on_transition = on_transition
        self._mint_keys = mint_keys
        self.max_frame = max_frame
        self._link: trio.SocketStream | None = None
        self._link_lock = trio.Lock()
        self._probes: dict[int, trio.MemorySendChannel[ProbeResult]] = {}
        self._probe_seq = 0
        self._send, self._inbox = trio.open_memory_channel[Event](256)
        self._changed = trio.Event()
        self._kill_at: float | None = None
        self._start_deadline: float | None = None
        self._restart_after_stop = False
        self._removing = False
        self._link_scope: trio.CancelScope | None = None
        self.last_activity = 0.0
        self.removed = trio.Event()

    @property
    def alias(self) -> str:
        return self.spec.alias

    # --- called from other tasks -----------------------------------------------------------

    def post(self, event: Event) -> None:
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            log.error("agent %s: inbox full; dropping %r", self.alias, event)
        except trio.ClosedResourceError:
            pass

    async def wait_until(self, predicate: Callable[[Lifecycle], bool], wait_secs: float) -> bool:
        with trio.move_on_after(wait_secs):
            while not predicate(self.lifecycle):
                changed = self._changed
                await changed.wait()
            return True
        return False

    def status(self) -> dict[str, object]:
        lc = self.lifecycle
        now = trio.current_time()
        return {
            "alias": self.alias,
            "state": lc.state.value,
            "pid": lc.pid,
            "restarts": lc.restarts,
            "last_exit": lc.last_exit.describe() if lc.last_exit else None,
            "since": round(time.time() - (now - lc.since), 3),
            "since_secs": round(now - lc.since, 3),
            "activation": self.spec.activation,
            "next_start_in": round(lc.next_start_at - now, 3) if lc.next_start_at else None,
            # What confines this agent's shell commands: the profile's mode and the kernel.
            "sandbox": sandbox_summary(str(self.spec.risk.get("sandbox", "auto")), abi_version()),
        }

    # --- the task --------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            while not self.removed.is_set():
                deadline = self._deadline()
                event: Event | None = None
                with trio.move_on_at(deadline):
                    event = await self._inbox.receive()
                if event is None:
                    await self._on_deadline()
                else:
                    await self._handle(event)
            nursery.cancel_scope.cancel()

    def _deadline(self) -> float:
        lc = self.lifecycle
        if lc.state == State.BACKOFF and lc.next_start_at is not None:
            return lc.next_start_at
        if lc.state == State.STOPPING and self._kill_at is not None:
            return self._kill_at
        if lc.state == State.STARTING and self._start_deadline is not None:
            return self._start_deadline
        if lc.state == State.RUNNING and self.spec.activation == "on-demand":
            return self.last_activity + self.spec.idle_stop_secs
        return float("inf")

    async def _on_deadline(self) -> None:
        lc = self.lifecycle
        now = trio.current_time()
        if lc.due(now):
            await self._start(operator=False)
        elif lc.state == State.STOPPING and self._kill_at is not None and now >= self._kill_at:
            log.warning(
                "agent %s did not stop within %gs; killing its process group",
                self.alias,
                self.grace_secs,
                extra={"alias": self.alias, "pid": lc.pid},
            )
            self._kill_at = None
            self._signal_group(signal.SIGKILL)
        elif (
            lc.state == State.STARTING
            and self._start_deadline is not None
            and now >= self._start_deadline
        ):
            log.error(
                "agent %s not ready within %gs; killing it",
                self.alias,
                START_TIMEOUT_SECS,
                extra={"alias": self.alias, "pid": lc.pid},
            )
            self._start_deadline = None
            self._signal_group(signal.SIGKILL)
        elif lc.state == State.RUNNING and self.spec.activation == "on-demand":
            self._stop(f"idle for {self.spec.idle_stop_secs:g}s")

    async def _handle(self, event: Event) -> None:
        lc = self.lifecycle
        if isinstance(event, Command):
            if event.kind == "start":
                if lc.state in (State.STOPPED, State.BACKOFF, State.FATAL):
                    await self._start(operator=event.reason == "operator")
                self.last_activity = trio.current_time()
            elif event.kind == "stop":
                self._restart_after_stop = False
                self._stop(event.reason or "stop requested")
            elif event.kind == "restart":
                if lc.state in (State.STARTING, State.RUNNING, State.STOPPING) and lc.pid:
                    self._restart_after_stop = True
                    self._stop(event.reason or "restart requested")
                else:
                    if lc.state == State.STOPPING:
                        self._restart_after_stop = True
                    else:
                        await self._start(operator=True)
            elif event.kind == "remove":
                self._removing = True
                self._restart_after_stop = False
                self._stop(event.reason or "removed from config")
                if self.lifecycle.state == State.STOPPED:
                    self.removed.set()
        elif isinstance(event, ProcessExited):
            if event.pid != lc.pid:
                return  # a stale report about an earlier process
            self._end_link()
            self._kill_at = None
            self._start_deadline = None
            self._emit(lc.exited(trio.current_time(), event.status))
            if lc.state == State.STOPPED:
                if self._removing:
                    self.removed.set()
                elif self._restart_after_stop:
                    self._restart_after_stop = False
                    await self._start(operator=True)
        elif isinstance(event, ProcessReady):
            if event.pid == lc.pid and lc.state == State.STARTING:
                self._start_deadline = None
                self.last_activity = trio.current_time()
                self._emit(lc.ready(trio.current_time()))
        elif (
            isinstance(event, ProcessHung)
            and event.pid == lc.pid
            and lc.state in (State.RUNNING, State.STARTING)
        ):
            log.error(
                "agent %s stopped answering liveness checks; killing it",
                self.alias,
                extra={"alias": self.alias, "pid": lc.pid},
            )
            self._signal_group(signal.SIGKILL)

    # --- actions ---------------------------------------------------------------------------

    async def _start(self, operator: bool) -> None:
        lc = self.lifecycle
        self._emit(lc.start(trio.current_time(), operator=operator))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        keys = self._mint_keys(self.alias)
        # The keys of this start go first on the private link: never argv, never environment.
        # The buffer is empty, so this small write cannot block.
        ours.sendall(
            encode_frame(
                encode_link(
                    Keys(
                        keys.endpoint, keys.server_public, keys.public, keys.secret, self.max_frame
                    )
                )
            )
        )
        try:
            await trio.to_thread.run_sync(_ensure_workspace, Path(self.spec.workspace))
            env = agent_environment(self.spec, self._daemon_env)
            pid = await self._zygote.spawn(self.spec, env, theirs.fileno())
        except (SpawnError, OSError) as exc:
            ours.close()
            theirs.close()
            log.error(
                "agent %s could not be started: %s", self.alias, exc, extra={"alias": self.alias}
            )
            lc.pid = None
            self._emit(lc.exited(trio.current_time(), SPAWN_FAILED))
            return
        theirs.close()
        lc.spawned(trio.current_time(), pid)
        self._start_deadline = trio.current_time() + START_TIMEOUT_SECS
        self._register_pid(pid, self)
        scope = trio.CancelScope()
        self._link_scope = scope
        self._nursery.start_soon(self._watch_link, ours, pid, scope)

    def _stop(self, reason: str) -> None:
        lc = self.lifecycle
        self._emit(lc.stop(trio.current_time(), reason))
        if lc.state == State.STOPPING and self._kill_at is None:
            self._kill_at = trio.current_time() + self.grace_secs
            self._signal_group(signal.SIGTERM)

    def _signal_group(self, signum: int) -> None:
        pid = self.lifecycle.pid
        if pid is None:
            return
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass  # already gone; its exit report is on the way
        except PermissionError as exc:
            log.error("cannot signal agent %s (pid %s): %s", self.alias, pid, exc)

    def _end_link(self) -> None:
        if self._link_scope is not None:
            self._link_scope.cancel()
            self._link_scope = None

    def _emit(self, transition: Transition) -> None:
        if transition.old != transition.new:
            self._on_transition(transition)
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    async def update_neighbours(self, spec: AgentSpec) -> None:
        """Tell the running process the other agents' workspaces changed (a reload)."""
        self.spec = spec  # a restart starts with them anyway
        if self._link is None:
            return
        message = encode_frame(encode_link(Neighbours(spec.other_workspaces)))
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with self._link_lock:
                await self._link.send_all(message)

    async def probe(self, to: str, channel: str, wait_secs: float) -> ProbeResult | None:
        """Have this agent's process send a probe through the router; None if no answer."""
        if self._link is None:
            return None
        self._probe_seq += 1
        seq = self._probe_seq
        send, receive = trio.open_memory_channel[ProbeResult](1)
        self._probes[seq] = send
        try:
            async with self._link_lock:
                await self._link.send_all(encode_frame(encode_link(ProbeCommand(seq, to, channel))))
            with trio.move_on_after(wait_secs):
                return await receive.receive()
            return None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None
        finally:
            self._probes.pop(seq, None)

    async def _watch_link(self, sock: socket.socket, pid: int, scope: trio.CancelScope) -> None:
        """Read Pong/ProbeResult from the agent; ping it; report a hang. Ends with the process.

        A broken link is normal (the agent died, maybe before reading its keys): the exit
        report from the zygote is what drives the lifecycle, so errors here are only logged.
        """
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        self._link = stream
        with scope:
            try:
                async with stream, trio.open_nursery() as nursery:
                    last_pong = [trio.current_time()]
                    nursery.start_soon(self._ping, stream, pid, last_pong)
                    await self._read_link(stream, last_pong)
                    nursery.cancel_scope.cancel()
            finally:
                if self._link is stream:
                    self._link = None

    async def _read_link(self, stream: trio.SocketStream, last_pong: list[float]) -> None:
        decoder = FrameDecoder(MAX_LINK_FRAME)
        while True:
            try:
                frames = await receive_frames(stream, decoder)
                if frames is None:
                    return  # the process is exiting; its exit report follows
                messages = [decode_link(frame) for frame in frames]
            except (FrameTooLarge, msgspec.MsgspecError) as exc:
                log.warning("agent %s sent a bad link frame: %s", self.alias, exc)
                return
            for message in messages:
                if isinstance(message, Pong):
                    last_pong[0] = trio.current_time()
                elif isinstance(message, ProbeResult):
                    waiter = self._probes.get(message.seq)
                    if waiter is not None:
                        waiter.send_nowait(message)

    async def _ping(self, stream: trio.SocketStream, pid: int, last_pong: list[float]) -> None:
        seq = 0
        while True:
            await trio.sleep(LIVENESS_INTERVAL_SECS)
            if trio.current_time() - last_pong[0] > LIVENESS_TIMEOUT_SECS:
                self.post(ProcessHung(pid))
                return
            seq += 1
            try:
                async with self._link_lock:
                    await stream.send_all(encode_frame(encode_link(Ping(seq))))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


def _ensure_workspace(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
