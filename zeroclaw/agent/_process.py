"""The agent process's main: read this start's keys from the link, join the bus, serve.

The link carries the daemon's liveness pings and probe commands; the bus carries the
agent's work (see `_runtime`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import shutil
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from .._decode import DecodeFailure
from .._frame_stream import receive_frames
from .._framing import FrameDecoder, encode_frame
from .._logging import setup_logging
from .._ops import Nothing
from ..bus import AgentBus, BusCredentials
from ..policy import (
    ProcessConfinement,
    SandboxPlan,
    SandboxUnavailable,
    abi_version,
    apply_sandbox,
    cap_last_cap,
    drop_capabilities,
    forbid_user_namespaces,
)
from ..providers import ProviderChain, ProviderError, make_chain
from ..tools import (
    DEFAULT_TOOLSET,
    CommandReaper,
    Toolset,
    agent_toolset,
    become_subreaper,
)
from ..turns import (
    MCP_PIN,
    MCP_STATE,
    USAGE_PROVIDERS,
    McpPinAnswer,
    McpPinCall,
    ProviderHealth,
    ProvidersReport,
)
from ._link import (
    MAX_LINK_FRAME,
    Busy,
    Fatal,
    Keys,
    LinkMessage,
    Neighbours,
    Ping,
    Pong,
    ProbeCommand,
    ProbeResult,
    decode_link,
    encode_link,
)
from ._runtime import AgentInbox, AgentRuntime, BusMeter, BusReach

if TYPE_CHECKING:
    from ..mcp import McpTool
from ._sandbox import (
    agent_confinement,
    agent_plan,
    command_home_root,
    describe_sandbox,
    subagent_plan,
)
from ._spec import AgentSpec
from ._turn import TurnEngine

log = logging.getLogger("zeroclaw.agent")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class LinkSender:
    """Frames to the daemon on the private link, one at a time (several tasks send)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._lock = trio.Lock()
        self._busy, self._busy_queued = trio.open_memory_channel[int](math.inf)

    async def send(self, message: LinkMessage) -> None:
        async with self._lock:
            await self._stream.send_all(encode_frame(encode_link(message)))

    async def report_busy(self, turns: int) -> None:
        """Tell the daemon how many turns run: an on-demand agent is not idle while > 0.
        Queued for `send_busy_reports`, so a turn never waits for the link on its way in or
        out (ADR 0068); its traffic on the bus keeps the agent from idling meanwhile."""
        self._busy.send_nowait(turns)

    async def send_busy_reports(self) -> None:
        """Send what `report_busy` queued, in order."""
        async for turns in self._busy_queued:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self.send(Busy(turns))


BusHook = Callable[[AgentBus, trio.Nursery, LinkSender], None]


def toolset_for(spec: AgentSpec) -> Toolset:
    """The tools of this agent's chat: every built-in one, `agent_catalog`/`agent_dispatch`
    when some sub-agent lets it call (or it has facades), one tool per facade,
    `invoke_adapter` when its config lists adapters, and `skill_read` when it has skills.
    A peer's turn gets the part of it named in `peer_tools` (the engine does that). A
    sub-agent runtime never dispatches (issue 12: no nesting), whatever its spec says."""
    if spec.subagent is not None:
        return DEFAULT_TOOLSET
    return agent_toolset(
        DEFAULT_TOOLSET,
        dispatch_tools=spec.dispatch_tools,
        facades=spec.facades,
        adapters=bool(spec.adapters),
        skills=spec.skill_folders,
        reminders=spec.reminders,
    )


def start_mcp(
    spec: AgentSpec, engine: TurnEngine, bus: AgentBus, nursery: trio.Nursery, env: dict[str, str]
) -> None:
    """The agent's MCP servers (issue 26), in its nursery: their allowed tools join the
    engine's toolset as they become ready, and a turn waits for their first start."""
    from ..mcp import McpHost  # only an agent with servers loads the MCP code

    base = engine.toolset

    def on_tools(tools: tuple[McpTool, ...]) -> None:
        engine.set_toolset(Toolset(base.name, (*base, *tools)))

    async def pin(call: McpPinCall) -> McpPinAnswer:
        return await bus.call(MCP_PIN, call)

    host = McpHost(
        spec.mcp_servers,
        rules=lambda: engine.rules,
        agent_env=env,
        confine=engine.shell.confine,
        home_root=command_home_root(spec),
        readonly=not spec.risk.may_act,
        pin=pin,
        post_state=lambda state: bus.post_request(MCP_STATE, state),
        on_tools=on_tools,
        tracker=CommandReaper.instance(),
        # What its shell may run, its servers may (mcp-server-git runs git); a readonly
        # agent runs no command, nor do its servers.
        commands=spec.risk.allowed_commands if spec.risk.may_act else (),
    )
    engine.tools_pending = host.wait_settled
    engine.mcp_explain = host.explain
    nursery.start_soon(host.run)


def say_fatal(link_fd: int, reason: str) -> None:
    """Before exiting with EX_CONFIG: the reason, on the link, for the operator's `status`.
    Blocking and best effort (the daemon may be gone); the frame is small."""
    with contextlib.suppress(OSError):
        os.write(link_fd, encode_frame(encode_link(Fatal(reason))))


def agent_main(spec: AgentSpec, link_fd: int) -> int:
    """Entry point called in the forked child; returns the process exit code."""
    if spec.subagent is not None:  # a sub-agent revision's runtime (issue 12)
        from ._subagent import subagent_main

        return subagent_main(spec, link_fd)
    setup_logging(spec.log_format, spec.log_level)
    env = dict(os.environ)  # the zygote already scrubbed it to what this agent is bound to
    try:
        provider = make_chain(spec.provider_chain(), env)
    except ProviderError as exc:
        log.error("agent %s cannot start: %s", spec.alias, exc)
        say_fatal(link_fd, str(exc))
        return EX_CONFIG

    engines: list[TurnEngine] = []  # the one engine, once the bus is up

    inbox = AgentInbox()

    def start_runtime(bus: AgentBus, nursery: trio.Nursery, link: LinkSender) -> None:
        reach = BusReach(bus)
        engine = TurnEngine(
            spec,
            reach,
            provider,
            agent_env=env,
            toolset=toolset_for(spec),
            command_home_root=command_home_root(spec),
        )
        engine.meter = BusMeter(bus)
        if isinstance(provider, ProviderChain):  # its breakers, for the daemon's `status`

            def post_health(health: tuple[ProviderHealth, ...]) -> None:
                bus.post_request(USAGE_PROVIDERS, ProvidersReport(health))

            provider.on_health = post_health
            post_health(provider.health())
        engines.append(engine)
        if spec.mcp_servers:
            start_mcp(spec, engine, bus, nursery, env)
        runtime = AgentRuntime(bus, engine, reach, inbox, on_busy=link.report_busy)
        nursery.start_soon(runtime.run)

    def neighbours(workspaces: tuple[str, ...]) -> None:
        for engine in engines:
            engine.set_other_workspaces(workspaces)

    return trio.run(
        functools.partial(
            serve_agent,
            spec,
            link_fd,
            on_bus=start_runtime,
            on_neighbours=neighbours,
            inbox=inbox,
        )
    )


async def serve_agent(
    spec: AgentSpec,
    link_fd: int,
    *,
    stop_signals: Sequence[int] = STOP_SIGNALS,
    on_bus: BusHook | None = None,
    on_neighbours: Callable[[tuple[str, ...]], None] | None = None,
    inbox: AgentInbox | None = None,
) -> int:
    """Run until the daemon closes the link or a stop signal arrives.

    `on_bus` lets a caller (the agent runtime, or a test agent) start its own tasks once
    the bus is up; `inbox` receives what the bus delivers from its very first frame.
    """
    link = trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=link_fd)))
    decoder = FrameDecoder(MAX_LINK_FRAME)
    keys = await _read_keys(link, decoder)
    if keys is None:
        log.error("agent %s: the daemon closed the link before sending keys", spec.alias)
        return 1
    # Orphans of shell commands come to this process, which kills them (ADR 0012).
    become_subreaper()
    prepare_command_homes(spec)
    confinement = confine(spec)
    if confinement.problem is not None:
        say_fatal(link_fd, confinement.problem)
        return EX_CONFIG
    creds = BusCredentials(
        spec.alias, keys.endpoint, keys.server_public, keys.public, keys.secret, keys.max_frame
    )
    sandbox = (confinement.summary, confinement.in_force)
    bus = (
        AgentBus(creds, sandbox=sandbox)
        if inbox is None
        else AgentBus(
            creds,
            on_message=inbox.message,
            on_late_refusal=inbox.late_refusal,
            sandbox=sandbox,
        )
    )
    sender = LinkSender(link)
    receiver = trio.open_signal_receiver(*stop_signals) if stop_signals else nullcontext()
    with receiver as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(bus.run)
            nursery.start_soon(sender.send_busy_reports)
            if on_bus is not None:
                on_bus(bus, nursery, sender)
            nursery.start_soon(
                _serve_link, link, sender, decoder, bus, nursery.cancel_scope, on_neighbours
            )
            if signals is not None:
                nursery.start_soon(_stop_on_signal, signals, nursery.cancel_scope, spec.alias)
    await link.aclose()
    return 0


EX_CONFIG = 78  # sysexits: a configuration the machine cannot honour


@dataclass(frozen=True)
class Confinement:
    """How `confine` left this process: `problem` if a required sandbox cannot be had (the
    agent must not run), else what confines it, as told to the daemon in the Hello."""

    summary: str
    in_force: bool
    problem: str | None = None


def confine(spec: AgentSpec) -> Confinement:
    """Apply the OS sandbox the risk profile asks for, with the signal and abstract-socket
    scopes and TCP rules of this kernel, then drop every capability whatever the profile
    (ADR 0043); say (once, at info) whether the sandbox is in force."""
    confinement = agent_confinement(spec, abi_version(), cap_last_cap())
    outcome = _apply_landlock(spec, confinement)
    try:
        drop_capabilities(confinement.drop_caps)
        if confinement.no_user_namespaces:
            forbid_user_namespaces(no_inet=confinement.no_inet_sockets)
    except OSError as exc:  # never seen: dropping is always allowed; fail closed anyway
        log.error("agent %s: cannot drop its capabilities: %s", spec.alias, exc)
        return Confinement(outcome.summary, False, f"cannot drop capabilities: {exc}")
    return outcome


def _apply_landlock(spec: AgentSpec, confinement: ProcessConfinement) -> Confinement:
    mode = spec.risk.sandbox
    if mode == "none":
        summary = 'not confined: sandbox = "none"'
        # The file rules are off, not the process confinement: without the scopes this
        # agent could signal the daemon, the zygote and its siblings, and reach any
        # abstract socket (another daemon's control socket) and any TCP port (ADR 0043).
        try:
            apply_sandbox(SandboxPlan(()), confinement, files=False)
        except SandboxUnavailable as exc:
            log.warning("agent %s: no process scopes: %s", spec.alias, exc)
        log.info("agent %s: %s; tool checks still apply", spec.alias, summary)
        return Confinement(summary, False)
    # A sub-agent reads its snapshot and the system and writes nothing (but its MCP servers'
    # private homes); an agent's is the same builder as the in-process chat's (ADR 0039).
    plan = subagent_plan(spec) if spec.subagent is not None else agent_plan(spec)
    try:
        abi = apply_sandbox(plan, confinement)
    except SandboxUnavailable as exc:
        if mode == "landlock":
            log.error('agent %s: sandbox = "landlock" but %s', spec.alias, exc)
            problem = f'sandbox = "landlock" but {exc}'
            return Confinement(f"not confined: {exc}", False, problem)
        summary = f"not confined: {exc}"
        log.warning("agent %s: %s; tool checks still apply", spec.alias, summary)
        return Confinement(summary, False)
    summary = describe_sandbox(abi, len(plan.rules), confinement)
    log.info(
        "agent %s: sandbox in force: %s",
        spec.alias,
        summary,
        extra={
            "alias": spec.alias,
            "landlock_abi": abi,
            "rules": len(plan.rules),
            "tcp_ports": list(confinement.connect_ports),
        },
    )
    return Confinement(summary, True)


def prepare_command_homes(spec: AgentSpec) -> None:
    """Create the homes' root (0700), emptied of what a killed predecessor left."""
    if spec.subagent is not None and not spec.mcp_servers:
        return  # a sub-agent runtime runs no shell command, and here no MCP server
    root = command_home_root(spec)
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        for name in os.listdir(root):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    except OSError as exc:  # the shell tool then answers io_error; the agent still serves
        log.error("agent %s: cannot prepare %s for shell commands: %s", spec.alias, root, exc)


async def _read_keys(link: trio.SocketStream, decoder: FrameDecoder) -> Keys | None:
    while (frames := await receive_frames(link, decoder)) is not None:
        for frame in frames:
            message = _decode_or_none(frame)
            if isinstance(message, Keys):
                return message
    return None


def _decode_or_none(frame: bytes) -> LinkMessage | None:
    """A bad frame from the daemon is a bug there; this process drops it and goes on."""
    try:
        return decode_link(frame)
    except DecodeFailure as exc:
        log.warning("dropped a bad link frame from the daemon: %s", exc)
        return None


async def _stop_on_signal(signals: AsyncIterator[int], scope: trio.CancelScope, alias: str) -> None:
    async for signum in signals:
        log.info("agent %s stopping on %s", alias, signal.Signals(signum).name)
        scope.cancel()
        return


async def _serve_link(
    link: trio.SocketStream,
    sender: LinkSender,
    decoder: FrameDecoder,
    bus: AgentBus,
    scope: trio.CancelScope,
    on_neighbours: Callable[[tuple[str, ...]], None] | None,
) -> None:
    send = sender.send

    async def probe(command: ProbeCommand) -> None:
        started = time.perf_counter()
        outcome = await bus.send(command.to, command.channel, Nothing(), kind="probe")
        rtt = (time.perf_counter() - started) * 1000
        await send(ProbeResult(command.seq, outcome.label, outcome.detail, rtt))

    async with trio.open_nursery() as nursery:
        while (frames := await receive_frames(link, decoder)) is not None:
            for frame in frames:
                message = _decode_or_none(frame)
                if isinstance(message, Ping):
                    await send(Pong(message.seq))
                elif isinstance(message, ProbeCommand):
                    nursery.start_soon(probe, message)
                elif isinstance(message, Neighbours) and on_neighbours is not None:
                    on_neighbours(message.workspaces)
        scope.cancel()  # the daemon closed the link: stop
