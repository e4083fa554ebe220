"""One trio task per agent: it feeds the agent's Lifecycle and carries out what it decides.

Everything that happens to an agent (operator commands, process exit, readiness, a hung
link, a change in how many turns it runs) arrives in the runner's inbox and is handled in
order, so there are no races between, say, a restart request and a crash. Every decision,
timers included, is the Lifecycle's (`_lifecycle`): the runner waits for its inbox until
the machine's next deadline, feeds it the event or the deadline, and executes the actions
it returns (spawn, signal, removed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .._decode import DecodeFailure
from .._frame_stream import receive_frames
from .._framing import FrameDecoder, FrameTooLarge, encode_frame
from ..agent import (
    MAX_LINK_FRAME,
    AgentSpec,
    Busy,
    Fatal,
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
from ..control import AgentStatus
from ..policy import abi_version, process_gaps, sandbox_summary
from ._environment import agent_environment
from ._lifecycle import (
    Action,
    CommandKind,
    ExitStatus,
    Lifecycle,
    Removed,
    SignalGroup,
    StartProcess,
    State,
    Timers,
    Transition,
)
from ._zygote_client import SpawnError, ZygoteClient

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

log = logging.getLogger("zeroclaw.supervisor")

START_TIMEOUT_SECS = 20.0  # from spawn to Ready; past it the start counts as a failure
# Every agent is pinged on the same grid of instants (`next_ping`), so an idle daemon wakes
# once per interval for all of them; each ping also wakes its agent. With 100 always-on
# agents a ping each every 5 s, staggered, was most of the idle CPU (ADR 0069).
LIVENESS_INTERVAL_SECS = 10.0
LIVENESS_TIMEOUT_SECS = 30.0  # no Pong for this long: the agent is hung and is killed
MAX_ERROR_LINE = 500  # characters of an agent's last error line kept for `status`
LAST_WORDS_SECS = 1.0  # after an exit, how long the link may still deliver the agent's error


@dataclass(frozen=True)
class Command:
    kind: CommandKind
    reason: str = ""


@dataclass(frozen=True)
class ProcessExited:
    pid: int
    status: ExitStatus


@dataclass(frozen=True)
class SandboxReport:
    """What an agent said of its own sandbox in its Hello: a summary, and whether the OS
    confines it. The agent's claim, shown to the operator; nothing is decided on it."""

    summary: str = ""
    in_force: bool = False


@dataclass(frozen=True)
class ProcessReady:
    pid: int
    sandbox: SandboxReport | None = None


@dataclass(frozen=True)
class ProcessHung:
    pid: int


@dataclass(frozen=True)
class ProcessBusy:
    """The agent's count of running turns changed (sent over its link)."""

    pid: int
    turns: int


@dataclass(frozen=True)
class Reconfigure:
    """A reload kept this agent running but changed its restart policy or stop grace."""

    policy: RestartPolicy
    grace_secs: float


Event = Command | ProcessExited | ProcessReady | ProcessHung | ProcessBusy | Reconfigure


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
        idle = spec.idle_stop_secs if spec.activation == "on-demand" else None
        self.lifecycle = Lifecycle(spec.alias, policy, Timers(grace_secs, START_TIMEOUT_SECS, idle))
        self._zygote = zygote
        self._daemon_env = daemon_env
        self._register_pid = register_pid
        self._on_transition = on_transition
        self._mint_keys = mint_keys
        self.max_frame = max_frame
        self._link: trio.SocketStream | None = None
        self._link_lock = trio.Lock()
        self._link_done: trio.Event | None = None  # set when the current link is read to EOF
        self._last_words: str | None = None  # a Fatal line read from the current link
        self._probes: dict[int, trio.MemorySendChannel[ProbeResult]] = {}
        self._probe_seq = 0
        self._send, self._inbox = trio.open_memory_channel[Event](256)
        self._changed = trio.Event()
        self._link_scope: trio.CancelScope | None = None
        self._traffic_at = 0.0  # newest traffic the router saw; fed to the machine lazily
        self._sandbox: tuple[int, SandboxReport] | None = None  # (pid, its report)
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

    def note_traffic(self) -> None:
        """The router delivered to or from this agent. Cheap: called per message, read by
        the machine only when its idle deadline comes."""
        self._traffic_at = trio.current_time()

    async def wait_until(self, predicate: Callable[[Lifecycle], bool], wait_secs: float) -> bool:
        with trio.move_on_after(wait_secs):
            while not predicate(self.lifecycle):
                changed = self._changed
                await changed.wait()
            return True
        return False

    def status(self) -> AgentStatus:
        lc = self.lifecycle
        now = trio.current_time()
        # trio's clock has an arbitrary origin: a machine that never moved (since 0.0) has
        # no time to show, not one hours in the past.
        changed = lc.since != 0.0 or lc.starts > 0
        return AgentStatus(
            alias=self.alias,
            state=lc.state.value,
            pid=lc.pid,
            restarts=lc.restarts,
            last_exit=lc.last_exit.describe() if lc.last_exit else None,
            last_error=lc.last_error,
            since=round(time.time() - (now - lc.since), 3) if changed else None,
            since_secs=round(now - lc.since, 3) if changed else None,
            activation=self.spec.activation,
            busy_turns=lc.busy_turns,
            next_start_in=round(lc.next_start_at - now, 3) if lc.next_start_at else None,
            # What confines this agent's shell commands: the profile's mode and the kernel.
            sandbox=sandbox_summary(self.spec.risk.sandbox, abi_version()),
            sandbox_in_force=self._sandbox_in_force(),
            without=list(process_gaps(self.spec.risk.sandbox, abi_version())),
        )

    def _sandbox_in_force(self) -> bool | None:
        """The running process's report; None for an agent not running (or silent)."""
        lc = self.lifecycle
        if lc.state != State.RUNNING or self._sandbox is None or self._sandbox[0] != lc.pid:
            return None
        return self._sandbox[1].in_force

    # --- the task --------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            while not self.removed.is_set():
                event: Event | None = None
                with trio.move_on_at(self.lifecycle.next_deadline()):
                    event = await self._inbox.receive()
                if event is None:
                    self.lifecycle.activity(self._traffic_at)
                    await self._execute(self.lifecycle.on_deadline(trio.current_time()))
                else:
                    await self._execute(await self._feed(event))
            nursery.cancel_scope.cancel()

    async def _feed(self, event: Event) -> list[Action]:
        """The event, given to the machine; what it decided."""
        lc = self.lifecycle
        now = trio.current_time()
        if isinstance(event, Command):
            operator = event.reason == "operator"
            return lc.command(now, event.kind, "" if operator else event.reason, operator=operator)
        if isinstance(event, ProcessExited):
            if event.pid != lc.pid:
                return []
            words = await self._read_last_words()
            self._end_link()
            return lc.process_exited(trio.current_time(), event.pid, event.status, words)
        if isinstance(event, ProcessReady):
            actions = lc.process_ready(now, event.pid)
            if actions and event.sandbox is not None:
                self._sandbox = (event.pid, event.sandbox)
            return actions
        if isinstance(event, ProcessBusy):
            if event.pid == lc.pid:
                lc.activity(now, event.turns)
            return []
        if isinstance(event, Reconfigure):
            lc.policy = event.policy
            lc.timers = dataclasses.replace(lc.timers, grace_secs=event.grace_secs)
            return []
        return lc.process_hung(now, event.pid)

    async def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Transition):
                self._emit(action)
            elif isinstance(action, StartProcess):
                await self._execute(await self._spawn())
            elif isinstance(action, SignalGroup):
                if action.signum == signal.SIGKILL:
                    log.warning(
                        "agent %s %s; killing its process group",
                        self.alias,
                        action.reason,
                        extra={"alias": self.alias, "pid": self.lifecycle.pid},
                    )
                self._signal_group(action.signum)
            elif isinstance(action, Removed):
                self.removed.set()
        if actions:
            changed, self._changed = self._changed, trio.Event()
            changed.set()

    async def _read_last_words(self) -> str | None:
        """An agent that cannot start says why on its link before it exits; the zygote's exit
        report may overtake that line, so wait (briefly) for the link to reach its end."""
        done = self._link_done
        if done is not None:
            with trio.move_on_after(LAST_WORDS_SECS):
                await done.wait()
        words, self._last_words = self._last_words, None
        return words

    # --- actions ---------------------------------------------------------------------------

    async def _spawn(self) -> list[Action]:
        lc = self.lifecycle
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
            if self.spec.subagent is None:  # a runtime's "workspace" is its snapshot: the
                # registry writes it whole and checks it; an empty one must never appear
                await trio.to_thread.run_sync(_ensure_workspace, Path(self.spec.workspace))
            env = agent_environment(self.spec, self._daemon_env)
            pid = await self._zygote.spawn(self.spec, env, theirs.fileno())
        except (SpawnError, OSError) as exc:
            ours.close()
            theirs.close()
            log.error(
                "agent %s could not be started: %s", self.alias, exc, extra={"alias": self.alias}
            )
            return lc.spawn_failed(trio.current_time(), f"could not be started: {exc}")
        theirs.close()
        actions = lc.process_spawned(trio.current_time(), pid)
        self._register_pid(pid, self)
        scope = trio.CancelScope()
        self._link_scope = scope
        self._link_done = trio.Event()
        self._last_words = None
        self._nursery.start_soon(self._watch_link, ours, pid, scope, self._link_done)
        return actions

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

    async def _watch_link(
        self, sock: socket.socket, pid: int, scope: trio.CancelScope, done: trio.Event
    ) -> None:
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
                    await self._read_link(stream, pid, last_pong)
                    nursery.cancel_scope.cancel()
            finally:
                done.set()
                if self._link is stream:
                    self._link = None

    async def _read_link(self, stream: trio.SocketStream, pid: int, last_pong: list[float]) -> None:
        decoder = FrameDecoder(MAX_LINK_FRAME)
        while True:
            try:
                frames = await receive_frames(stream, decoder)
                if frames is None:
                    return  # the process is exiting; its exit report follows
                messages = [decode_link(frame) for frame in frames]
            except (FrameTooLarge, DecodeFailure) as exc:
                log.warning("agent %s sent a bad link frame: %s", self.alias, exc)
                return
            for message in messages:
                if isinstance(message, Pong):
                    last_pong[0] = trio.current_time()
                elif isinstance(message, ProbeResult):
                    waiter = self._probes.get(message.seq)
                    if waiter is not None:
                        waiter.send_nowait(message)
                elif isinstance(message, Busy):
                    self.post(ProcessBusy(pid, message.turns))
                elif isinstance(message, Fatal):
                    self._last_words = message.reason[:MAX_ERROR_LINE]

    async def _ping(self, stream: trio.SocketStream, pid: int, last_pong: list[float]) -> None:
        seq = 0
        while True:
            await trio.sleep_until(next_ping(trio.current_time(), LIVENESS_INTERVAL_SECS))
            if trio.current_time() - last_pong[0] > LIVENESS_TIMEOUT_SECS:
                self.post(ProcessHung(pid))
                return
            seq += 1
            try:
                async with self._link_lock:
                    await stream.send_all(encode_frame(encode_link(Ping(seq))))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


def next_ping(now: float, interval: float) -> float:
    """The next instant of the grid every agent is pinged on: a multiple of `interval`,
    after `now`, at most `interval` away (every runner's ping task wakes at the same one,
    in one pass of the event loop)."""
    return (math.floor(now / interval) + 1) * interval


def _ensure_workspace(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
