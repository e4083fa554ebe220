"""`zeroclaw daemon`: a foreground trio process that supervises every agent.

Order matters: the zygote is forked before trio.run, while the process has one thread.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import signal
import socket
import stat
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import trio
import zmq

from .._http_guard import descriptor_reserve, http_bounds
from .._logging import resolve_format, setup_logging
from .._ops import encode_body
from .._prctl import set_not_dumpable
from ..bus import Request as BusRequest
from ..bus import Response, Router, ServiceHandler
from ..channels import (
    ChannelHost,
    ChannelSupervisor,
    channel_adapters,
    channel_settings,
)
from ..config import Config, ConfigError, daemon_paths, daemon_refusals, load_config
from ..control import (
    REQUEST_TYPES,
    SUBAGENT_REQUEST_TYPES,
    AgentRestart,
    AgentsList,
    AgentStart,
    AgentStop,
    ApprovalApprove,
    ApprovalDeny,
    ApprovalsList,
    Chat,
    ChatApproval,
    ChatCancel,
    ChatOpen,
    CommandTable,
    ControlStats,
    EventsFollow,
    EventsRecent,
    MemoryCommand,
    Reload,
    RouteProbe,
    SessionShow,
    SessionsList,
    Shutdown,
    Status,
)
from ..control import Metrics as MetricsRequest
from ..discovery import DiscoveryService
from ..events import EventSink, ReloadApplied
from ..memory import (
    MemoryControlCommand,
    MemoryLock,
    MemoryLocked,
    MemoryService,
    MemoryServiceError,
    MemoryStore,
    StoreCorrupt,
    memory_grants,
)
from ..ops import Metrics, MetricsListen, MetricsSources, metrics_listen
from ..policy import ROOT_FIX, code_roots, daemon_code_paths, root_warning
from ..subagents import (
    DispatchService,
    SubagentRegistry,
    SubagentStore,
    SubagentStoreCorrupt,
    SubagentStoreLocked,
    register_subagent_commands,
)
from ..turns import (
    ADAPTER_SERVICE,
    SUBAGENT_SERVICE,
    TURN_SERVICE,
    OperatorApprovals,
    TurnService,
)
from ._adapters import adapter_runner
from ._chat import ChatService
from ._commands import (
    AgentRestartCommand,
    AgentsListCommand,
    AgentStartCommand,
    AgentStopCommand,
    ApprovalApproveCommand,
    ApprovalDenyCommand,
    ApprovalsListCommand,
    ChatOpenCommand,
    EventsFollowCommand,
    EventsRecentCommand,
    MetricsCommand,
    NoChatTurnCommand,
    ReloadCommand,
    SessionShowCommand,
    SessionsListCommand,
    ShutdownCommand,
    StatusCommand,
)
from ._control_server import (
    IDLE_TIMEOUT_ENV,
    IDLE_TIMEOUT_SECS,
    ControlNameTaken,
    ControlServer,
    SocketPathTooLong,
    bind_control_socket,
    check_socket_path,
)
from ._lock import AlreadyRunning, PidLock
from ._notify import SYSTEMD_VARIABLES, Notifier
from ._route_probe import RouteProbeCommand
from ._spec import preload_kinds, zygote_environment
from ._supervisor import ReloadState, Supervisor
from ._zygote import DEFAULT_ENTRYPOINT, ENTRYPOINT_ENV, daemon_title, set_title, start_zygote
from ._zygote_client import ZygoteClient

log = logging.getLogger("zeroclaw.daemon")

# Discovery's first scan and watch wait for READY=1, or this long at most.
DISCOVERY_AFTER_START_SECS = 30.0


class DaemonError(Exception):
    """The daemon cannot start; the message says why and what to do."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def prepare_directory(path: Path, what: str) -> None:
    """Create `path` 0700 if missing; refuse one owned by someone else or open to others."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.geteuid():
        raise DaemonError(
            f"{what} {path} is owned by uid {info.st_uid}, not by us ({os.geteuid()})"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)


def run_daemon(
    config_path: Path, env: Mapping[str, str] | None = None, *, log_level: str | None = None
) -> int:
    """`log_level` (from `zeroclaw --log-level`) replaces `[daemon] log_level` for the
    daemon and every agent it starts, across reloads; None keeps the config's."""
    env = dict(os.environ if env is None else env)
    # Nothing of our uid may ptrace us or read our environment (provider keys) through /proc.
    set_not_dumpable()
    config = load_config(config_path, env)  # ConfigError → the CLI prints it, exit 2
    # The daemon's own code (ADR 0044), once: agents may read it and never write it.
    code = code_roots(daemon_code_paths())
    refusals = daemon_refusals(config, env, Path(os.path.abspath(config_path)), code)
    if refusals:
        raise ConfigError(str(config_path), refusals)
    setup_logging(
        resolve_format(config.daemon.log_format, sys.stderr, env),
        log_level or config.daemon.log_level,
    )
    set_title(daemon_title(config_path))
    raise_descriptor_limit()
    log.info(
        "the daemon's code, read-only to every agent: %s",
        ", ".join(code),
        extra={"code_paths": list(code)},
    )
    paths = daemon_paths(config, env)
    idle_timeout = _idle_timeout(env)
    try:
        check_socket_path(paths.runtime_dir / "router.sock")
    except SocketPathTooLong as exc:
        raise DaemonError(str(exc), 2) from None
    prepare_directory(paths.runtime_dir, "runtime dir")
    prepare_directory(paths.state_dir, "state dir")
    lock = PidLock(paths.runtime_dir / "zeroclaw.lock")
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        raise DaemonError(str(exc), 1) from None
    try:
        control_listener = bind_control_socket(paths.runtime_dir)
    except ControlNameTaken as exc:
        lock.release()
        raise DaemonError(str(exc), 1) from None
    notifier = Notifier(env)
    # Never let systemd's variables reach anything we start, whatever the allowlist says.
    for name in SYSTEMD_VARIABLES:
        os.environ.pop(name, None)
        env.pop(name, None)
    memory_lock = MemoryLock(paths.state_dir / "memory.lock")
    try:
        memory_lock.acquire()
    except MemoryLocked as exc:
        control_listener.close()
        lock.release()
        raise DaemonError(f"{exc}; is a 'zeroclaw memory' command still writing?", 1) from None
    zygote, zygote_sock = start_zygote(
        env.get(ENTRYPOINT_ENV, DEFAULT_ENTRYPOINT),
        zygote_environment(env),
        preload_kinds(config),
    )
    # Opened after the zygote exists (which is exec'd, not forked) and never forked after:
    # an LMDB environment must not cross a fork.
    try:
        store = MemoryStore.open_verified(
            paths.state_dir / "memory", map_size=config.daemon.memory_map_size
        )
    except StoreCorrupt as exc:
        zygote_sock.close()  # EOF: the zygote exits
        zygote.wait()
        memory_lock.release()
        control_listener.close()
        lock.release()
        raise DaemonError(str(exc), 1) from None
    try:
        subagent_store = SubagentStore.open_verified(paths.state_dir / "subagents")
    except (SubagentStoreCorrupt, SubagentStoreLocked) as exc:
        store.close()
        zygote_sock.close()
        zygote.wait()
        memory_lock.release()
        control_listener.close()
        lock.release()
        raise DaemonError(str(exc), 1) from None
    if store.reindexed:
        log.warning(
            "memory store upgraded to the current format: reindexed %d namespaces", store.reindexed
        )
    if store.stale_readers_cleared:
        log.warning(
            "cleared %d stale memory readers left by a killed process", store.stale_readers_cleared
        )
    try:
        return trio.run(
            _main,
            config,
            Path(os.path.abspath(config_path)),
            env,
            zygote.pid,
            zygote_sock,
            notifier,
            store,
            subagent_store,
            control_listener,
            idle_timeout,
            log_level,
            code,
        )
    finally:
        control_listener.close()
        zygote_sock.close()  # EOF tells the zygote to kill whatever is left and exit
        zygote.wait()
        subagent_store.close()
        store.close()
        memory_lock.release()
        notifier.close()
        lock.release()


def raise_descriptor_limit() -> None:
    """The soft RLIMIT_NOFILE up to the hard one (systemd's soft default of 1024 is for
    select()-era programs; we poll), and say what the HTTP listeners keep in reserve for
    the control socket (ADR 0045). Called before the zygote starts: agents inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the descriptor limit from %d to %d: %s", soft, target, exc)
            target = soft
    log.info(
        "descriptor limit %d (was %d); HTTP listeners stop admitting %d short of it, kept "
        "for the control socket",
        target,
        soft,
        descriptor_reserve(target),
        extra={"nofile_soft": target, "nofile_hard": hard},
    )


async def _main(
    config: Config,
    config_path: Path,
    env: dict[str, str],
    zygote_pid: int,
    zygote_sock: socket.socket,
    notifier: Notifier,
    store: MemoryStore,
    subagent_store: SubagentStore,
    control_listener: socket.socket,
    idle_timeout: float,
    log_level: str | None,
    code: tuple[str, ...],
) -> int:
    supervisor: Supervisor | None = None

    def on_exit(pid: int, status: int) -> None:
        if supervisor is not None:
            supervisor.on_zygote_exit(pid, status)

    zygote = ZygoteClient(zygote_pid, zygote_sock, on_exit)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        events = EventSink()
        memory = MemoryService(store, memory_grants(config), events=events)
        paths = daemon_paths(config, env)
        registry = SubagentRegistry(subagent_store, paths.state_dir / "revisions")
        hooks = DaemonHooks()
        router = Router(
            config,
            paths.runtime_dir,
            ctx,
            services={
                "memory": memory_service(memory),
                TURN_SERVICE: hooks.turn_request,
                SUBAGENT_SERVICE: hooks.subagent_request,
                ADAPTER_SERVICE: hooks.adapter_request,
            },
            hooks=hooks,
            events=events,
            # A sub-agent runtime posts its turn's events and nothing else (issue 12).
            confined_services=frozenset({TURN_SERVICE}),
        )
        supervisor = Supervisor(
            config,
            config_path,
            env,
            zygote,
            notifier,
            router,
            memory,
            events,
            registry,
            log_level=log_level,
            code_paths=code,
        )
        # One turn service for every way a conversation comes in (the CLI today, channels
        # next), and for the sub-agent runtimes' invocations.
        turns = TurnService(router, events=events)
        dispatch = DispatchService(
            registry,
            subagent_store,
            turns,
            supervisor,
            max_frame=lambda: supervisor.config.daemon.max_frame_bytes,
            events=events,
        )
        # Discovered adapters: scanned after start, admitted per call (issue 15).
        discovery = DiscoveryService(
            config, config_path, events, env, runner=adapter_runner(lambda: supervisor.specs, env)
        )
        hooks.bind(supervisor, turns, dispatch, discovery)
        # Webhook and serial channels: inbound messages routed from the config, their turns
        # through the same turn service (issue 13).
        # Approvals of outside origins wait for the operator here (ADR 0042).
        approvals = OperatorApprovals(events)
        channels = ChannelSupervisor(ChannelHost(turns, lambda: router.policy, approvals=approvals))
        # Subscribed to the sink from here on: every event of the daemon's life is counted.
        metrics = Metrics(daemon_metrics_sources(supervisor, channels), events)
        return await _serve(
            supervisor,
            ChatService(turns),
            dispatch,
            discovery,
            channels,
            metrics,
            notifier,
            control_listener,
            idle_timeout,
        )
    finally:
        ctx.term()


class DaemonHooks:
    """The router's hooks (RouterHooks) and the turn service's entry, in the daemon.

    The router needs them when it is built; the supervisor and the turn service behind them
    need the router when they are built. So this port is built first and told once, right
    after, whom it speaks for: before the router runs, so no hook fires unbound (ADR 0018).
    """

    supervisor: Supervisor
    turns: TurnService
    dispatch: DispatchService
    discovery: DiscoveryService

    def bind(
        self,
        supervisor: Supervisor,
        turns: TurnService,
        dispatch: DispatchService,
        discovery: DiscoveryService,
    ) -> None:
        self.supervisor = supervisor
        self.turns = turns
        self.dispatch = dispatch
        self.discovery = discovery

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        self.supervisor.agent_hello(alias, pid, sandbox, sandbox_in_force)

    def request_start(self, alias: str) -> bool:
        return self.supervisor.request_start(alias)

    def traffic(self, alias: str) -> None:
        self.supervisor.note_activity(alias)

    def agent_down(self, alias: str) -> None:
        self.turns.agent_down(alias)

    def turn_request(self, sender: str, request: BusRequest) -> None:
        self.turns.on_request(sender, request)

    def subagent_request(self, sender: str, request: BusRequest) -> Awaitable[Response]:
        return self.dispatch.serve(sender, request)

    def adapter_request(self, sender: str, request: BusRequest) -> Awaitable[Response]:
        return self.discovery.serve(sender, request)


def daemon_metrics_sources(supervisor: Supervisor, channels: ChannelSupervisor) -> MetricsSources:
    """The counters the daemon's components keep, read when metrics are scraped."""
    return MetricsSources(
        agent_states=supervisor.counts,
        router=supervisor.router.stats,
        channels_delivered=lambda: channels.host.delivered,
        channels_refused=lambda: channels.host.refused,
        memory_batches=lambda: supervisor.memory.batch_sizes,
        memory_growths=lambda: supervisor.memory.growths,
        memory_quota_refusals=lambda: supervisor.memory.quota_refusals,
        memory_turns_dropped=lambda: supervisor.memory.turns_dropped,
    )


def memory_service(memory: MemoryService) -> ServiceHandler:
    """Agents reach memory through the router; the router says who is asking."""

    async def serve(alias: str, request: BusRequest) -> Response:
        try:
            # The scope comes from the authenticated alias, never from the body.
            reply = await memory.handle(memory.scope_for(alias), request.op, request.body)
        except MemoryServiceError as exc:
            return Response(id=request.id, ok=False, error=exc.code, detail=exc.detail)
        return Response(id=request.id, ok=True, body=encode_body(reply))

    return serve


async def _serve(
    supervisor: Supervisor,
    chat: ChatService,
    dispatch: DispatchService,
    discovery: DiscoveryService,
    channels: ChannelSupervisor,
    metrics: Metrics,
    notifier: Notifier,
    control_listener: socket.socket,
    idle_timeout: float,
) -> int:
    paths = supervisor.paths
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_run_zygote_reader, supervisor, nursery)
        nursery.start_soon(metrics.run)

        def listen() -> MetricsListen:
            daemon = supervisor.config.daemon
            return metrics_listen(
                daemon.metrics_listen,
                daemon.metrics_token_env,
                http_bounds(daemon.metrics_limits),
                supervisor.env,
            )

        nursery.start_soon(metrics.keep_listener, listen, supervisor.events)
        control: ControlServer | None = None

        def control_stats() -> ControlStats | None:
            return control.stats() if control is not None else None

        control = ControlServer(
            control_listener,
            _command_table(
                supervisor, chat, dispatch, discovery, channels, metrics, nursery, control_stats
            ).dispatch,
            zygote_pid=supervisor.zygote.pid,
            idle_timeout=idle_timeout,
        )
        await nursery.start(control.serve)
        await nursery.start(supervisor.router.run)
        nursery.start_soon(supervisor.memory.run_committer)
        log.info(
            "zeroclaw daemon started",
            extra={
                "pid": os.getpid(),
                "config": str(supervisor.config_path),
                "runtime_dir": str(paths.runtime_dir),
            },
        )
        if (as_root := root_warning(os.geteuid())) is not None:
            log.warning("%s; %s", as_root, ROOT_FIX, extra={"euid": 0})
        if notifier.watchdog_interval:
            nursery.start_soon(_watchdog, notifier, notifier.watchdog_interval)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            await supervisor.run(nursery)
            # After the supervisor scanned the bundles and can start runtimes: recovery of
            # what the last daemon left, then the pipeline opens.
            await nursery.start(dispatch.run)
            await nursery.start(channels.run)
            nursery.start_soon(_keep_channels, supervisor, channels)
            nursery.start_soon(_keep_discovery, supervisor, discovery)
            nursery.start_soon(_signals, signals, supervisor, nursery)
            await supervisor.shutdown_requested.wait()
            await supervisor.shutdown()
            nursery.cancel_scope.cancel()
    log.info("zeroclaw daemon stopped")
    return 0


async def _keep_channels(supervisor: Supervisor, channels: ChannelSupervisor) -> None:
    """The channel adapters of the running config: built at start, rebuilt by a reload that
    changed a channel (and only then: a webhook keeps its listener across other reloads)."""
    settings = channel_settings(supervisor.config)
    with supervisor.events.subscribe() as reloads:
        channels.replace(channel_adapters(supervisor.config, supervisor.env))
        async for published in reloads:
            if not isinstance(published.event, ReloadApplied):
                continue
            if channel_settings(supervisor.config) != settings:
                settings = channel_settings(supervisor.config)
                channels.replace(channel_adapters(supervisor.config, supervisor.env))


async def _keep_discovery(supervisor: Supervisor, discovery: DiscoveryService) -> None:
    """Discovery's scans, none of which READY waits for: one after start (when
    `scan_on_startup`), one after each applied reload, and one whenever the project
    directories change. A failing scan is logged; the daemon goes on."""

    async def rescan() -> None:
        try:
            await discovery.rescan()
        except Exception:
            log.exception("discovery: a scan failed")

    with supervisor.events.subscribe() as reloads:
        async with trio.open_nursery() as nursery:
            # Not while the agents start: a scan (probing model servers, building an HTTP
            # client, walking project dirs) competes with them for the CPU and the event
            # loop, and READY waits for them (ADR 0036). Bounded: a start that never
            # settles does not hold discovery back for good.
            with trio.move_on_after(DISCOVERY_AFTER_START_SECS):
                await supervisor.ready.wait()
            if supervisor.config.discovery.scan_on_startup:
                nursery.start_soon(rescan)
            await nursery.start(discovery.watch)
            async for published in reloads:
                event = published.event
                if isinstance(event, ReloadApplied) and event.outcome != "reload_failed":
                    discovery.configure(supervisor.config)
                    nursery.start_soon(rescan)


def _idle_timeout(env: Mapping[str, str]) -> float:
    raw = env.get(IDLE_TIMEOUT_ENV)
    if raw is None:
        return IDLE_TIMEOUT_SECS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise DaemonError(f"{IDLE_TIMEOUT_ENV}={raw!r} must be a positive number of seconds", 2)
    return value


async def _run_zygote_reader(supervisor: Supervisor, nursery: trio.Nursery) -> None:
    await supervisor.zygote.run()
    if not supervisor.shutdown_requested.is_set():
        log.critical("zygote lost; shutting down so systemd can restart the daemon")
        supervisor.shutdown_requested.set()


async def _signals(
    signals: AsyncIterator[int], supervisor: Supervisor, nursery: trio.Nursery
) -> None:
    async for signum in signals:
        if signum == signal.SIGHUP:
            log.info("SIGHUP: reloading %s", supervisor.config_path)
            nursery.start_soon(_reload_guarded, supervisor, nursery)
        else:
            log.info("%s: shutting down", signal.Signals(signum).name)
            supervisor.shutdown_requested.set()


async def _reload_guarded(supervisor: Supervisor, nursery: trio.Nursery) -> None:
    """A reload that fails for an unexpected reason is reported, never fatal to the daemon."""
    try:
        await supervisor.reload(nursery)
    except Exception as exc:
        log.exception("reload failed unexpectedly; the running config is unchanged")
        supervisor.reload_state = ReloadState(
            "reload_failed", time.time(), [f"internal error: {exc}"]
        )


async def _watchdog(notifier: Notifier, interval: float) -> None:
    while True:
        notifier.watchdog()
        await trio.sleep(interval)


def _command_table(
    supervisor: Supervisor,
    chat: ChatService,
    dispatch: DispatchService,
    discovery: DiscoveryService,
    channels: ChannelSupervisor,
    metrics: Metrics,
    nursery: trio.Nursery,
    control_stats: Callable[[], ControlStats | None],
) -> CommandTable:
    """Every control command, by request type: the one table the control server uses."""
    known_agents = lambda: frozenset(supervisor.config.agents)  # noqa: E731
    table = CommandTable()
    # The channels' host asks it; the operator answers it here (ADR 0042).
    approvals = channels.host.approvals or OperatorApprovals(supervisor.events)
    table.register(
        Status,
        StatusCommand(supervisor, control_stats, channels.status, discovery.status, approvals),
    )
    table.register(AgentsList, AgentsListCommand(supervisor))
    table.register(AgentStart, AgentStartCommand(supervisor))
    table.register(AgentStop, AgentStopCommand(supervisor))
    table.register(AgentRestart, AgentRestartCommand(supervisor))
    table.register(RouteProbe, RouteProbeCommand(supervisor))
    table.register(MemoryCommand, MemoryControlCommand(supervisor.memory, known_agents))
    table.register(SessionsList, SessionsListCommand(supervisor.memory, known_agents))
    table.register(SessionShow, SessionShowCommand(supervisor.memory, known_agents))
    table.register(Chat, chat.run_turn)
    table.register(ChatOpen, ChatOpenCommand(chat))
    table.register(ChatCancel, NoChatTurnCommand())
    table.register(ChatApproval, NoChatTurnCommand())
    table.register(EventsRecent, EventsRecentCommand(supervisor.events))
    table.register(Reload, ReloadCommand(supervisor, nursery))
    table.register(Shutdown, ShutdownCommand(supervisor))
    table.register(EventsFollow, EventsFollowCommand(supervisor.events))
    table.register(MetricsRequest, MetricsCommand(metrics))
    table.register(ApprovalsList, ApprovalsListCommand(approvals))
    table.register(ApprovalApprove, ApprovalApproveCommand(approvals))
    table.register(ApprovalDeny, ApprovalDenyCommand(approvals))
    register_subagent_commands(table, dispatch)
    return table.require((*REQUEST_TYPES, *SUBAGENT_REQUEST_TYPES))
