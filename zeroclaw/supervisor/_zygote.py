"""The zygote: a fork server for agent processes (ADR 0003).

The daemon starts the zygote as a *fresh interpreter* with a scrubbed environment (never
a fork of itself: a fork would hand every agent the daemon's memory, config and original
environment block, which /proc/self/environ exposes). The zygote imports the agent code
once, freezes the GC so those pages stay shared, then forks one child per agent start.
It is single-threaded and never runs trio, so forking from it is safe and costs milliseconds.

The daemon starts it first, before it has read its config (ADR 0067): the two load their
code at once, on two cores. What the configured providers need comes once the config is
read, as the first message (Preload), before any Spawn.

Wire (SOCK_SEQPACKET, one msgpack message per packet):
  daemon → zygote  Preload(kinds) | Spawn(id, spec, env)  + SCM_RIGHTS with a Spawn: the
                   agent's link socket
  zygote → daemon  Spawned(id, pid) | SpawnFailed(id, error) | Exited(pid, wait_status)

Death chain: each agent has PR_SET_PDEATHSIG=SIGKILL towards the zygote. The zygote's own
death signal towards the daemon is SIGUSR1, which it catches: when the daemon dies (even by
SIGKILL), or closes the socket, the zygote SIGKILLs its whole descendant tree — agents,
their commands, whatever those started and hid with setsid — in repeated passes until none
is left, and only then exits (ADR 0012). The zygote is also a child subreaper: whatever
loses its parent below it is handed to it, and each time it reaps a child it kills every
child that is not an agent, with its subtree, so nothing an exited agent started lingers.
"""

from __future__ import annotations

import array
import contextlib
import errno
import gc
import importlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import msgspec
import setproctitle

from .._decode import DecodeFailure, decode_msgpack
from .._prctl import PR_SET_CHILD_SUBREAPER, prctl, set_death_signal, set_not_dumpable
from .._proctree import kill_all, orphans, read_parents, subtrees
from .._trio_import import import_trio
from ..agent import AgentSpec
from ..providers import preload_providers

if TYPE_CHECKING:
    from ..config import Config

log = logging.getLogger("zeroclaw.zygote")

MAX_PACKET = 1024 * 1024
DEFAULT_ENTRYPOINT = "zeroclaw.agent:agent_main"
# Development and test hook: run another agent entry point (module:function). Whoever can set
# the daemon's environment already controls the daemon, so this widens nothing.
ENTRYPOINT_ENV = "ZEROCLAW_AGENT_ENTRYPOINT"

AgentEntry = Callable[[AgentSpec, int], int]
DAEMON_GONE = signal.SIGUSR1  # the zygote's death signal: the daemon has died


class Spawn(msgspec.Struct, tag="spawn", frozen=True):
    id: int
    spec: AgentSpec
    env: dict[str, str]


class Preload(msgspec.Struct, tag="preload", frozen=True):
    """Load what providers of these kinds need before the next fork (ADR 0036)."""

    kinds: list[str]


class Spawned(msgspec.Struct, tag="spawned", frozen=True):
    id: int
    pid: int


class SpawnFailed(msgspec.Struct, tag="spawn_failed", frozen=True):
    id: int
    error: str


class Exited(msgspec.Struct, tag="exited", frozen=True):
    pid: int
    status: int


ZygoteRequest = Spawn | Preload
ZygoteMessage = Spawned | SpawnFailed | Exited

_encoder = msgspec.msgpack.Encoder()
_request_decoder = msgspec.msgpack.Decoder(ZygoteRequest)
_reply_decoder = msgspec.msgpack.Decoder(ZygoteMessage)


def encode(message: ZygoteRequest | ZygoteMessage) -> bytes:
    return _encoder.encode(message)


def decode_request(data: bytes) -> ZygoteRequest:
    """Raises DecodeFailure on anything that is not a Spawn or Preload request (ADR 0014)."""
    return decode_msgpack(_request_decoder, data, max_bytes=MAX_PACKET)


def decode_reply(data: bytes) -> ZygoteMessage:
    """Raises DecodeFailure on anything that is not a zygote message (ADR 0014)."""
    return decode_msgpack(_reply_decoder, data, max_bytes=MAX_PACKET)


def resolve_entrypoint(name: str) -> AgentEntry:
    module_name, _, func = name.partition(":")
    module = importlib.import_module(module_name)
    entry = getattr(module, func or "agent_main")
    if not callable(entry):
        raise TypeError(f"{name} is not callable")
    return entry  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- process titles
#
# What `ps` shows (/proc/<pid>/cmdline, rewritten by setproctitle) and what `top` shows by
# default (/proc/<pid>/comm, 15 bytes): every agent would otherwise be the zygote's
# `python -c ...` line. A C extension of a few pages, imported here, before the zygote
# forks, so agents share it.

ZYGOTE_TITLE = "zeroclaw zygote"
SUBAGENT_PREFIX = "sub:"  # a sub-agent runtime's bus identity: sub:<id>@<digest12>


def daemon_title(config_path: os.PathLike[str] | str) -> str:
    return f"zeroclaw daemon --config {os.path.abspath(config_path)}"


def agent_title(alias: str) -> tuple[str, str]:
    """The process title and the 15-byte name (`comm`) of an agent or sub-agent runtime."""
    if alias.startswith(SUBAGENT_PREFIX):
        identity = alias[len(SUBAGENT_PREFIX) :]
        return f"zeroclaw subagent {identity}", f"zc:{alias}"
    return f"zeroclaw agent {alias}", f"zc:{alias}"


def set_title(title: str, name: str | None = None) -> None:
    """Set this process's title; `name` (else the title's start) becomes its comm."""
    setproctitle.setproctitle(title)
    if name is not None:
        setproctitle.setthreadtitle(name[:15])


# --------------------------------------------------------------------------- daemon side


class StartedZygote:
    """The zygote process and the daemon's end of its socket, from its start until an exit
    stack holds them (`hold_on`); a start that fails before kills it (`drop`)."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.proc = proc
        self.sock = sock
        self._held = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def hold_on(self, stack: contextlib.ExitStack) -> None:
        """From here on `stack` ends it: the socket closed first (the EOF tells the zygote
        to kill what is left below it and exit), then the zygote waited for."""
        stack.callback(self.proc.wait)
        stack.callback(self.sock.close)
        self._held = True

    def drop(self) -> None:
        """Unless a stack holds it: it has forked nothing yet, so it is killed (not left
        to finish loading its code before it reads the EOF) and reaped."""
        if not self._held:
            self.proc.kill()
            self.sock.close()
            self.proc.wait()


def start_zygote(entrypoint: str, env: Mapping[str, str]) -> StartedZygote:
    """Start the zygote interpreter with `env` as its whole environment. It needs nothing
    of the config: the daemon starts it first, and `send_preload` follows once the config
    is read."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # A Spawn carries the agent's spec, which names every other agent's workspace (~40
    # bytes an agent): past the default send buffer (~208 KB) at ~5,000 agents, every
    # start failed (EMSGSIZE). As large as a packet may be (the kernel doubles the value),
    # within net.core.wmem_max.
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_PACKET // 2)
    code = (
        # The collector is off from the first import on (see zygote_main).
        "import gc; gc.disable(); import sys; from zeroclaw.supervisor._zygote import zygote_main; "
        "zygote_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])"
    )
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                str(theirs.fileno()),
                str(os.getpid()),
                entrypoint,
            ],
            env=dict(env),
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
    finally:
        theirs.close()
    return StartedZygote(proc, ours)


def preload_kinds(config: Config) -> frozenset[str]:
    """The provider kinds the enabled agents use: the zygote preloads what they need, so
    an agent does not import (and privately hold) it after the fork (ADR 0036)."""
    return frozenset(
        ref.partition(".")[0]
        for agent in config.agents.values()
        if agent.enabled
        for ref in agent.provider_chain
    )


def send_preload(sock: socket.socket, kinds: Iterable[str]) -> None:
    """Have the zygote load what providers of `kinds` need before its first fork. Sent
    before the first Spawn; a blocking send of one small packet, before trio runs."""
    sock.send(encode(Preload(sorted(set(kinds)))))


# --------------------------------------------------------------------------- zygote side


def zygote_main(fd: int, daemon_pid: int, entrypoint: str) -> None:
    """The zygote process's main (started by start_zygote)."""
    sock = socket.socket(fileno=fd)
    # Catchable, so the zygote can clean up before it goes (see the module docstring).
    signal.signal(DAEMON_GONE, lambda *_: None)
    set_death_signal(daemon_pid, DAEMON_GONE)
    # Subreaper: an agent's orphans stay below us, which is what lets the control socket
    # refuse every descendant of an agent (ADR 0011). Not dumpable: agents may not ptrace us.
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    set_not_dumpable()
    set_title(ZYGOTE_TITLE)
    # Signals sent to the daemon's whole process group (Ctrl-C, `timeout`, `kill -- -PGID`)
    # are the daemon's to handle: it stops the agents in order, then closes our socket.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    import_trio()  # before the agent's code imports it: without a subprocess (ADR 0067)
    entry = resolve_entrypoint(entrypoint)
    _freeze()

    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    agents: set[int] = set()
    zygote_pid = os.getpid()

    def send(message: Spawned | SpawnFailed | Exited) -> None:
        # If the daemon is gone, PDEATHSIG is about to end us anyway.
        with contextlib.suppress(OSError):
            sock.send(encode(message))

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in agents:
                agents.discard(pid)
                _kill_group(pid)  # whatever the agent left behind in its group
                send(Exited(pid, status))
            # Every child that is not an agent was inherited from a dead parent: kill it
            # and all below it (what a dead agent's commands started, setsid or not).
            kill_all(orphans(read_parents(), zygote_pid, agents))

    while True:
        try:
            readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
            if os.getppid() != daemon_pid:  # the daemon is gone (DAEMON_GONE, or missed)
                kill_descendants(zygote_pid)
                return
            reap()
        if sock.fileno() in readable:
            try:
                data, fds = _recv_with_fds(sock)
            except OSError:
                data, fds = b"", []
            if not data:
                # The daemon closed its end (shutdown, or it died): leave nothing behind.
                kill_descendants(zygote_pid)
                return
            try:
                request = decode_request(data)
            except DecodeFailure as exc:
                request = None
                log.error("zygote: malformed request dropped: %s", exc)
            if not isinstance(request, Spawn):
                for fd in fds:
                    os.close(fd)
                if isinstance(request, Preload):
                    _preload(request.kinds)
                continue
            pid = _fork_agent(request, fds, entry, zygote_pid, [sock.fileno(), wake_r, wake_w])
            for fd in fds:
                os.close(fd)
            if pid < 0:
                send(SpawnFailed(request.id, "fork failed"))
            else:
                agents.add(pid)
                send(Spawned(request.id, pid))
            reap()  # a child may already have died before we started tracking it


def _freeze() -> None:
    """Pre-import done: move every object to the permanent generation so the GC never
    touches (and so copies) these pages in the children. No collection first: with the
    collector off since the first import, the heap has no freed holes that an agent's first
    allocations would fill, copying the page around each (the gc module's advice for fork
    servers). Collecting again from here on only ever walks younger objects."""
    gc.freeze()
    gc.enable()


def _preload(kinds: Iterable[str]) -> None:
    """What a networked agent would otherwise import and build after the fork, once per
    agent (~10 MB each): httpx and what it loads lazily, the provider modules, the TLS
    context. Safe here: nothing of it opens a socket or starts a thread (ADR 0036)."""
    gc.disable()
    preload_providers(kinds)
    _freeze()


MAX_KILL_PASSES = 100


def kill_descendants(me: int) -> None:
    """SIGKILL every descendant of `me` and reap them, pass after pass until none is left
    (a process forked between two passes, or handed to us when its parent died, is caught
    by the next). Agents go too: this runs only when the daemon is gone or stopping."""
    for _ in range(MAX_KILL_PASSES):
        doomed = subtrees(read_parents(), [me]) - {me}
        if not doomed:
            return
        kill_all(doomed)
        while True:  # reap what has died; the rest is reaped on the next pass
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        time.sleep(0.005)  # let SIGKILLed processes exit before looking again
    log.error("zygote: descendants still alive after %d kill passes", MAX_KILL_PASSES)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _recv_with_fds(sock: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, ancdata, _flags, _addr = sock.recvmsg(MAX_PACKET, socket.CMSG_SPACE(16 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return data, list(fds)


def _fork_agent(
    request: Spawn, fds: list[int], entry: AgentEntry, zygote_pid: int, close_in_child: list[int]
) -> int:
    try:
        pid = os.fork()
    except OSError:
        return -1
    if pid != 0:
        return pid
    code = 70
    try:
        _become_agent(request, fds, zygote_pid, close_in_child)
        code = entry(request.spec, fds[0] if fds else -1)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:
        traceback.print_exc()
        if fds:  # the operator's `status` shows this line, not only the log
            from ..agent import say_fatal  # the agent's code: loaded in the zygote already

            say_fatal(fds[0], f"crashed: {type(exc).__name__}: {exc}")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return 0  # unreachable


def _become_agent(request: Spawn, fds: list[int], zygote_pid: int, close_fds: list[int]) -> None:
    """Everything between fork and the agent's own code, in the order that matters."""
    os.setsid()  # own session and process group: killpg reaches all it starts
    set_title(*agent_title(request.spec.alias))
    set_death_signal(zygote_pid)
    # Inherited from the zygote, but said here because it is the agent's promise: no other
    # process of our uid (another agent included) may ptrace it or read its /proc secrets.
    set_not_dumpable()
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGHUP, signal.SIGTERM, DAEMON_GONE):
        signal.signal(sig, signal.SIG_DFL)
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError as exc:
            if exc.errno != errno.EBADF:
                raise
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.umask(0o077)
    os.chdir(request.spec.workspace)
    os.environ.clear()
    os.environ.update(request.env)
    # The zygote's frozen objects stay frozen: unfreezing would let the GC walk (and so
    # copy) every shared page. Objects the agent creates from here on are collected normally.
