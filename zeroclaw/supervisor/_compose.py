"""The composition root (ADR 0050): `run_composed` reads and checks the config, acquires
the process's resources, each onto one exit stack, and tells the zygote (started before
all this, by `_daemon`) what the providers need; `_main` builds every service the config
uses with what it uses and hands them to the service table (`_services`), which starts
them in order and stops them in reverse. What the config does not use is not imported
(ADR 0067).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import trio
import zmq

from .._http_guard import descriptor_reserve, http_bounds
from .._logging import resolve_format, setup_logging
from .._ops import encode_body
from ..agent import AgentSpec
from ..bus import Request as BusRequest
from ..bus import Response, Router, ServiceHandler
from ..channels import (
    ChannelAdapter,
    ChannelHost,
    ChannelSupervisor,
    channel_adapters,
    channel_settings,
)
from ..config import (
    Config,
    ConfigError,
    DaemonPaths,
    daemon_paths,
    daemon_refusals,
    load_config,
    workspace_path,
)
from ..control import (
    MCP_REQUEST_TYPES,
    REQUEST_TYPES,
    SCHEDULE_REQUEST_TYPES,
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
    EventsFollow,
    EventsRecent,
    MemoryCommand,
    NextFire,
    Reload,
    RouteProbe,
    SessionShow,
    SessionsList,
    Shutdown,
    Status,
    UsageQuery,
)
from ..control import Metrics as MetricsRequest
from ..conversations import ContextReader, OperatorApprovals, TurnService
from ..discovery import AdapterRun, AdapterRunner, DiscoveryService, RunOutcome
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
from ..pins import PinService, PinStore, pins_path, register_pin_commands
from ..policy import ROOT_FIX, code_roots, daemon_code_paths, root_warning
from ..schedules import ScheduleStore, ScheduleStoreError
from ..skills import SkillCatalogue, load_catalogue
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
    MCP_SERVICE,
    SCHEDULE_SERVICE,
    SUBAGENT_SERVICE,
    TURN_SERVICE,
    USAGE_SERVICE,
    ApprovalLedger,
    MemoryContext,
    PrefetchedContext,
    context_args,
)
from ..usage import LedgerError, UsageLedger, UsageQueryCommand, UsageService
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
from ._daemon import DaemonError, DescriptorLimit
from ._fleet import ExitRoutes, Fleet, Readiness, RunnerFactory, TransitionReport, stop_every_agent
from ._gateway import gateway_adapters
from ._hooks import Behind, DaemonHooks
from ._lock import AlreadyRunning, PidLock
from ._notify import SYSTEMD_VARIABLES, Notifier
from ._reloader import Reloader
from ._route_probe import RouteProbeCommand
from ._running import Running
from ._runtimes import Runtimes
from ._schedules import Schedules
from ._services import Background, Services, Started
from ._status import DaemonStatusReport
from ._zygote import StartedZygote, daemon_title, preload_kinds, send_preload, set_title
from ._zygote_client import ZygoteClient

log = logging.getLogger("zeroclaw.daemon")

# Discovery's first scan and watch wait for READY=1, or this long at most.
DISCOVERY_AFTER_START_SECS = 30.0


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


@dataclass(frozen=True)
class DaemonParts:
    """What `run_daemon` acquired for the trio part (and releases after it)."""

    config: Config
    config_path: Path  # absolute
    env: dict[str, str]
    zygote: StartedZygote
    notifier: Notifier
    store: MemoryStore
    subagent_store: SubagentStore
    schedule_store: ScheduleStore
    ledger: UsageLedger
    control_listener: socket.socket
    idle_timeout: float
    log_level: str | None
    code: tuple[str, ...]
    skills: SkillCatalogue  # the agents' skills, loaded and checked before anything started


def run_composed(
    zygote: StartedZygote,
    config_path: Path,
    env: dict[str, str],
    *,
    log_level: str | None,
    limit: DescriptorLimit,
) -> int:
    """The daemon from its config on: `zygote` is running already (`run_daemon`)."""
    config = load_config(config_path, env)  # ConfigError → the CLI prints it, exit 2
    # The daemon's own code (ADR 0044), once: agents may read it and never write it.
    code = code_roots(daemon_code_paths())
    absolute = Path(os.path.abspath(config_path))
    refusals = daemon_refusals(config, env, absolute, code)
    # Each agent's skills (ADR 0056): a refused one refuses the start, like a bad key.
    skills = load_catalogue(config, absolute)
    refusals += skills.issues()
    if refusals:
        raise ConfigError(str(config_path), refusals)
    setup_logging(
        resolve_format(config.daemon.log_format, sys.stderr, env),
        log_level or config.daemon.log_level,
    )
    set_title(daemon_title(config_path))
    _log_descriptor_limit(limit)
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
    # One exit path: each resource is pushed once, as it is acquired, and released in the
    # reverse order on any exit, a refusal half-way through as much as a normal stop.
    with contextlib.ExitStack() as held:
        parts = _acquire(
            held,
            config,
            absolute,
            env,
            paths,
            zygote,
            idle_timeout=idle_timeout,
            log_level=log_level,
            code=code,
            skills=skills,
        )
        return trio.run(_main, parts)


def _log_descriptor_limit(limit: DescriptorLimit) -> None:
    """Say what `raise_descriptor_limit` did, and what the HTTP listeners keep in reserve
    for the control socket (ADR 0045)."""
    if limit.error is not None:
        log.warning("cannot raise the descriptor limit from %d %s", limit.soft, limit.error)
    log.info(
        "descriptor limit %d (was %d); HTTP listeners stop admitting %d short of it, kept "
        "for the control socket",
        limit.target,
        limit.soft,
        descriptor_reserve(limit.target),
        extra={"nofile_soft": limit.target, "nofile_hard": limit.hard},
    )


def _acquire(
    held: contextlib.ExitStack,
    config: Config,
    config_path: Path,
    env: dict[str, str],
    paths: DaemonPaths,
    zygote: StartedZygote,
    *,
    idle_timeout: float,
    log_level: str | None,
    code: tuple[str, ...],
    skills: SkillCatalogue,
) -> DaemonParts:
    """The pid lock, the control socket, the notifier, the memory lock, the zygote (started
    before, told now what to preload), the memory store, the sub-agent store, the schedule
    store and the usage ledger, in this order, each onto `held`."""
    lock = PidLock(paths.runtime_dir / "zeroclaw.lock")
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        raise DaemonError(str(exc), 1) from None
    held.callback(lock.release)
    try:
        control_listener = bind_control_socket(paths.runtime_dir)
    except ControlNameTaken as exc:
        raise DaemonError(str(exc), 1) from None
    held.callback(control_listener.close)
    notifier = Notifier(env)
    held.callback(notifier.close)
    # Never let systemd's variables reach anything we start, whatever the allowlist says.
    for name in SYSTEMD_VARIABLES:
        os.environ.pop(name, None)
        env.pop(name, None)
    memory_lock = MemoryLock(paths.state_dir / "memory.lock")
    try:
        memory_lock.acquire()
    except MemoryLocked as exc:
        raise DaemonError(f"{exc}; is a 'zeroclaw memory' command still writing?", 1) from None
    held.callback(memory_lock.release)
    zygote.hold_on(held)
    send_preload(zygote.sock, preload_kinds(config))
    # Opened after the zygote exists (which is exec'd, not forked) and never forked after:
    # an LMDB environment must not cross a fork.
    try:
        store = MemoryStore.open_verified(
            paths.state_dir / "memory", map_size=config.daemon.memory_map_size
        )
    except StoreCorrupt as exc:
        raise DaemonError(str(exc), 1) from None
    held.callback(store.close)
    try:
        subagent_store = SubagentStore.open_verified(paths.state_dir / "subagents")
    except (SubagentStoreCorrupt, SubagentStoreLocked) as exc:
        raise DaemonError(str(exc), 1) from None
    held.callback(subagent_store.close)
    try:
        schedule_store = ScheduleStore.open_verified(paths.state_dir / "schedules")
    except ScheduleStoreError as exc:
        raise DaemonError(str(exc), 1) from None
    held.callback(schedule_store.close)
    try:
        ledger = UsageLedger.open_verified(paths.state_dir / "usage")
    except LedgerError as exc:
        raise DaemonError(str(exc), 1) from None
    held.callback(ledger.close)
    if store.reindexed:
        log.warning(
            "memory store upgraded to the current format: reindexed %d namespaces", store.reindexed
        )
    if store.stale_readers_cleared:
        log.warning(
            "cleared %d stale memory readers left by a killed process", store.stale_readers_cleared
        )
    return DaemonParts(
        config=config,
        config_path=config_path,
        env=env,
        zygote=zygote,
        notifier=notifier,
        store=store,
        subagent_store=subagent_store,
        schedule_store=schedule_store,
        ledger=ledger,
        control_listener=control_listener,
        idle_timeout=idle_timeout,
        log_level=log_level,
        code=code,
        skills=skills,
    )


async def _main(parts: DaemonParts) -> int:
    """The composition root's trio part: every service built here with what it uses."""
    config, config_path, env, notifier = parts.config, parts.config_path, parts.env, parts.notifier
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        stop = trio.Event()  # set once: the daemon stops (a signal, `stop`, the zygote lost)
        exits = ExitRoutes()
        zygote = ZygoteClient(parts.zygote.pid, parts.zygote.sock, exits.exited)
        events = EventSink()
        memory = MemoryService(parts.store, memory_grants(config), events=events)
        paths = daemon_paths(config, env)
        registry = SubagentRegistry(parts.subagent_store, paths.state_dir / "revisions")
        running = Running(
            config,
            config_path,
            env,
            registry,
            zygote_pid=zygote.pid,
            log_level=parts.log_level,
            code_paths=parts.code,
            skills=parts.skills,
        )
        # What agents spend, and the budgets that admit and end their turns (issue 27).
        usage = UsageService(
            parts.ledger,
            lambda: running.config,
            events,
            cancel_turn=lambda agent, turn: turns.cancel_turn(agent, turn),
        )
        hooks = DaemonHooks()
        # The agents' MCP tool schemas, pinned (issue 26): the agent is the MCP client, the
        # daemon keeps what it saw and what the operator trusts.
        pins = PinService(
            PinStore(pins_path(paths.state_dir)),
            lambda: running.config,
            events,
            bound=registry.bound_servers,
        )
        router = Router(
            config,
            paths.runtime_dir,
            ctx,
            services={
                "memory": memory_service(memory),
                TURN_SERVICE: hooks.turn_request,
                SUBAGENT_SERVICE: hooks.subagent_request,
                ADAPTER_SERVICE: hooks.adapter_request,
                MCP_SERVICE: pins.serve,
                SCHEDULE_SERVICE: hooks.schedule_request,
                USAGE_SERVICE: usage.serve,
            },
            hooks=hooks,
            events=events,
            admission=usage.admit_question,
            # A sub-agent runtime posts its turn's events and nothing else (issue 12), but
            # for the pins and states of the MCP servers its bundle binds (issue 26) and
            # what its provider steps used (issue 27).
            confined_services=frozenset({TURN_SERVICE, MCP_SERVICE, USAGE_SERVICE}),
        )
        report = TransitionReport(router, events)
        factory = RunnerFactory(running, zygote, exits, router.mint_keys)
        readiness = Readiness(notifier, stop)
        fleet = Fleet(running, factory, report, readiness, stop)
        runtimes = Runtimes(running, factory, report, router, registry, fleet.update_status)
        reloader = Reloader(
            running, fleet, runtimes, router=router, memory=memory, notifier=notifier, events=events
        )
        # One turn service for every way a conversation comes in (the CLI, the channels),
        # and for the sub-agent runtimes' invocations. The approvals its turns were given
        # are the daemon's own record, which the adapter service takes from (ADR 0052).
        approval_ledger = ApprovalLedger()
        turns = TurnService(
            router,
            events=events,
            approvals=approval_ledger,
            admission=usage,
            context=context_reader(memory, running),
        )
        dispatch = DispatchService(
            registry,
            parts.subagent_store,
            turns,
            runtimes,
            max_frame=lambda: running.config.daemon.max_frame_bytes,
            events=events,
        )
        # Discovered adapters: scanned after start, admitted per call (issue 15).
        discovery = DiscoveryService(
            config,
            config_path,
            events,
            env,
            runner=lazy_adapter_runner(lambda: running.specs, env),
            approvals=approval_ledger,
        )
        # Webhook and serial channels: inbound messages routed from the config, their turns
        # through the same turn service (issue 13). Approvals of outside origins wait for
        # the operator here (ADR 0042).
        approvals = OperatorApprovals(events)
        host = ChannelHost(turns, lambda: router.policy, approvals=approvals)
        channels = ChannelSupervisor(host)
        # Scheduled turns and agents' reminders (issue 28), once the config has any (ADR
        # 0067): each a turn of its own origin through the same host, its reply out through
        # the channel adapters (or the log).
        schedules = Schedules(
            parts.schedule_store,
            config=lambda: running.config,
            host=host,
            push=channels.push,
            events=events,
            workspace=lambda alias: workspace_path(running.config, alias, running.paths),
            ready=readiness.ready,
            turn_of=lambda turn_id: (
                None if (t := turns.turns.get(turn_id)) is None else (t.agent, t.origin)
            ),
            # The tools the daemon grants that origin's turns now (ADR 0042, 0052).
            grant=lambda agent, origin: router.policy.origin_grant(agent, origin).tool_names(),
            approvals=approval_ledger,
        )
        hooks.bind(Behind(fleet, runtimes, turns, dispatch, discovery, pins, schedules, usage))
        # Subscribed to the sink from here on: every event of the daemon's life is counted.
        metrics = Metrics(
            daemon_metrics_sources(fleet, router, host, memory, usage, schedules), events
        )
        # The table is filled, and checked complete, before the server serves a request.
        table = CommandTable()
        control = ControlServer(
            parts.control_listener,
            table.dispatch,
            zygote_pid=zygote.pid,
            idle_timeout=parts.idle_timeout,
            limits=lambda: running.config.daemon.control_limits,
        )
        status = DaemonStatusReport(running, fleet, runtimes, reloader, readiness, router)
        table.register(
            Status,
            StatusCommand(
                status.status,
                control.stats,
                channels.status,
                discovery.status,
                approvals,
                pins.status,
                usage.provider_status,
                usage.budget_status,
                lambda: [
                    NextFire(agent, name, at)
                    for agent, (name, at) in sorted(schedules.next_fires().items())
                ],
            ),
        )
        table.register(AgentsList, AgentsListCommand(fleet))
        table.register(AgentStart, AgentStartCommand(fleet))
        table.register(AgentStop, AgentStopCommand(fleet))
        table.register(AgentRestart, AgentRestartCommand(fleet))
        table.register(RouteProbe, RouteProbeCommand(router, fleet))
        table.register(Reload, ReloadCommand(reloader))
        table.register(Shutdown, ShutdownCommand(stop))
        register_commands(table, running, memory, ChatService(turns), events, metrics, approvals)
        register_subagent_commands(table, dispatch)
        register_pin_commands(table, pins)
        schedules.register_commands(table)
        table.register(UsageQuery, UsageQueryCommand(usage))
        table.require(
            (*REQUEST_TYPES, *SUBAGENT_REQUEST_TYPES, *MCP_REQUEST_TYPES, *SCHEDULE_REQUEST_TYPES)
        )

        services = Services()
        services.register(Background("zygote", functools.partial(_watch_zygote, zygote, stop)))
        services.register(Background("metrics", metrics.run))

        def listen() -> MetricsListen:
            daemon = running.config.daemon
            return metrics_listen(
                daemon.metrics_listen,
                daemon.metrics_token_env,
                http_bounds(daemon.metrics_limits),
                env,
            )

        listener = functools.partial(metrics.keep_listener, listen, events)
        services.register(Background("metrics listener", listener))
        services.register(
            Started("control", functools.partial(_serve_control, control, parts.control_listener))
        )
        services.register(Started("router", router.run))
        services.register(Background("memory", memory.run_committer))
        services.register(Started("usage", usage.run))
        if notifier.watchdog_interval:
            interval = notifier.watchdog_interval
            services.register(
                Background("watchdog", functools.partial(_watchdog, notifier, interval))
            )
        services.register(Started("agents", fleet.run))
        # After the fleet scanned the bundles; recovery of what the last daemon left (which
        # may start runtimes), then the pipeline opens.
        services.register(Started("runtimes", runtimes.run))
        services.register(Started("subagents", dispatch.run))
        services.register(Started("channels", channels.run))
        gateway = gateway_adapters(running, table, events, env)  # issue 29, when configured
        keep = functools.partial(_keep_channels, running, channels, events, gateway)
        services.register(Background("channel adapters", keep))
        found = functools.partial(_keep_discovery, running, readiness, discovery, events)
        services.register(Background("discovery", found))
        services.register(schedules)
        return await _serve(services, stop, reloader, readiness, [fleet, runtimes], running)
    finally:
        ctx.term()  # every socket closed by its owner by now


async def _serve(
    services: Services,
    stop: trio.Event,
    reloader: Reloader,
    readiness: Readiness,
    agents: list[Fleet | Runtimes],
    running: Running,
) -> int:
    # Opened before any service starts: a signal during the start waits for its end.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with services.running(), trio.open_nursery() as nursery:
            log.info(
                "zeroclaw daemon started",
                extra={
                    "pid": os.getpid(),
                    "config": str(running.config_path),
                    "runtime_dir": str(running.paths.runtime_dir),
                },
            )
            if (as_root := root_warning(os.geteuid())) is not None:
                log.warning("%s; %s", as_root, ROOT_FIX, extra={"euid": 0})
            nursery.start_soon(_signals, signals, stop, reloader, running.config_path)
            await stop.wait()
            # The agents first, while every service still runs (they end their turns and
            # the zygote reports their exits); then the services stop in reverse.
            readiness.stopping()
            await stop_every_agent(
                [r for part in agents for r in part.runners.values()],
                running.config.daemon.shutdown_grace_secs,
            )
            nursery.cancel_scope.cancel()
    log.info("zeroclaw daemon stopped")
    return 0


def register_commands(
    table: CommandTable,
    running: Running,
    memory: MemoryService,
    chat: ChatService,
    events: EventSink,
    metrics: Metrics,
    approvals: OperatorApprovals,
) -> None:
    """The control commands of memory, sessions, chat, events, metrics and approvals."""
    known_agents = lambda: frozenset(running.config.agents)  # noqa: E731
    table.register(MemoryCommand, MemoryControlCommand(memory, known_agents))
    table.register(SessionsList, SessionsListCommand(memory, known_agents))
    table.register(SessionShow, SessionShowCommand(memory, known_agents))
    table.register(Chat, chat.run_turn)
    table.register(ChatOpen, ChatOpenCommand(chat))
    table.register(ChatCancel, NoChatTurnCommand())
    table.register(ChatApproval, NoChatTurnCommand())
    table.register(EventsRecent, EventsRecentCommand(events))
    table.register(EventsFollow, EventsFollowCommand(events))
    table.register(MetricsRequest, MetricsCommand(metrics))
    table.register(ApprovalsList, ApprovalsListCommand(approvals))
    table.register(ApprovalApprove, ApprovalApproveCommand(approvals))
    table.register(ApprovalDeny, ApprovalDenyCommand(approvals))


async def _serve_control(
    control: ControlServer,
    listener: socket.socket,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    try:
        await control.serve(task_status=task_status)
    finally:
        # Refused from the moment the control service stops, not once the zygote is gone
        # (the exit stack closes it again, harmlessly).
        listener.close()


def daemon_metrics_sources(
    fleet: Fleet,
    router: Router,
    host: ChannelHost,
    memory: MemoryService,
    usage: UsageService,
    schedules: Schedules | None = None,
) -> MetricsSources:
    """The counters the daemon's components keep, read when metrics are scraped."""
    return MetricsSources(
        agent_states=fleet.counts,
        router=router.stats,
        channels_delivered=lambda: host.delivered,
        channels_refused=lambda: host.refused,
        memory_batches=lambda: memory.batch_sizes,
        memory_growths=lambda: memory.growths,
        memory_quota_refusals=lambda: memory.quota_refusals,
        memory_turns_dropped=lambda: memory.turns_dropped,
        tokens=lambda: usage.counts.tokens,
        cost=lambda: usage.counts.cost,
        budget_refusals=lambda: usage.counts.refusals,
        budget_stops=lambda: usage.counts.stopped,
        provider_failovers=lambda: usage.counts.failovers,
        schedule_runs=lambda: {} if schedules is None else schedules.counts(),
        schedules=lambda: {} if schedules is None else schedules.per_agent(),
    )


def lazy_adapter_runner(
    specs: Callable[[], Mapping[str, AgentSpec]], env: Mapping[str, str]
) -> AdapterRunner:
    """The adapter runner (`_adapters`), loaded at the first adapter call: a daemon whose
    agents call no adapter never imports the tools, the MCP client or the HTTP adapter."""

    async def run(agent: str, job: AdapterRun, /) -> RunOutcome:
        from ._adapters import adapter_runner

        return await adapter_runner(specs, env)(agent, job)

    return run


def context_reader(memory: MemoryService, running: Running) -> ContextReader:
    """A chat turn's context, read while its message travels and sent behind it (ADR
    0068): the request the agent would make, from the settings its process runs with
    (recall when the agent recalls and the turn's grant holds `memory_recall`). None for an
    identity that is not a running agent's (a sub-agent runtime), and when memory refuses:
    the agent asks then."""

    async def read(
        agent: str, session: str, text: str, tools: tuple[str, ...] | None
    ) -> PrefetchedContext | None:
        spec = running.specs.get(agent)
        if spec is None or spec.subagent is not None:
            return None
        settings = spec.memory
        args = context_args(
            session,
            text,
            history_tokens=settings.history_budget_tokens,
            compact=settings.compact,
            recall=settings.recall and (tools is None or "memory_recall" in tools),
            recall_k=settings.recall_k,
            recall_tokens=settings.recall_budget_tokens,
        )
        try:
            found = await memory.run(memory.scope_for(agent), args)
        except MemoryServiceError:
            return None
        return PrefetchedContext(args, found) if isinstance(found, MemoryContext) else None

    return read


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


async def _keep_channels(
    running: Running,
    channels: ChannelSupervisor,
    events: EventSink,
    more: Callable[[Config], list[ChannelAdapter]],
) -> None:
    """The channel adapters of the running config (and `more` of it: the gateway): built at
    start, rebuilt by a reload that changed a channel or the gateway (and only then: a
    webhook keeps its listener across other reloads)."""

    def settings() -> object:
        return (channel_settings(running.config), running.config.gateway)

    def adapters() -> list[ChannelAdapter]:
        return [*channel_adapters(running.config, running.env), *more(running.config)]

    built = settings()
    with events.subscribe(kinds=(ReloadApplied,)) as reloads:
        channels.replace(adapters())
        async for published in reloads:
            if not isinstance(published.event, ReloadApplied):
                continue
            if settings() != built:
                built = settings()
                channels.replace(adapters())


async def _keep_discovery(
    running: Running, readiness: Readiness, discovery: DiscoveryService, events: EventSink
) -> None:
    """Discovery's scans, none of which READY waits for: one after start (when
    `scan_on_startup`), one after each applied reload, and one whenever the project
    directories change. A failing scan is logged; the daemon goes on."""

    async def rescan() -> None:
        try:
            await discovery.rescan()
        except Exception:
            log.exception("discovery: a scan failed")

    with events.subscribe(kinds=(ReloadApplied,)) as reloads:
        async with trio.open_nursery() as nursery:
            # Not while the agents start: a scan (probing model servers, building an HTTP
            # client, walking project dirs) competes with them for the CPU and the event
            # loop, and READY waits for them (ADR 0036). Bounded: a start that never
            # settles does not hold discovery back for good.
            with trio.move_on_after(DISCOVERY_AFTER_START_SECS):
                await readiness.ready.wait()
            if running.config.discovery.scan_on_startup:
                nursery.start_soon(rescan)
            await nursery.start(discovery.watch)
            async for published in reloads:
                event = published.event
                if isinstance(event, ReloadApplied) and event.outcome != "reload_failed":
                    discovery.configure(running.config)
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


async def _watch_zygote(zygote: ZygoteClient, stop: trio.Event) -> None:
    await zygote.run()
    if not stop.is_set():
        log.critical("zygote lost; shutting down so systemd can restart the daemon")
        stop.set()


async def _signals(
    signals: AsyncIterator[int], stop: trio.Event, reloader: Reloader, config_path: Path
) -> None:
    async with trio.open_nursery() as reloads:
        async for signum in signals:
            if signum == signal.SIGHUP:
                log.info("SIGHUP: reloading %s", config_path)
                reloads.start_soon(reloader.reload_guarded)
            else:
                log.info("%s: shutting down", signal.Signals(signum).name)
                stop.set()


async def _watchdog(notifier: Notifier, interval: float) -> None:
    while True:
        notifier.watchdog()
        await trio.sleep(interval)
