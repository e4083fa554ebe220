"""Discovery inside the daemon: phase B (swap the adapter registry, publish what changed),
the `ADAPTER_SERVICE` agents call, and the watch that rescans when the project directories
change.

A scan never delays the daemon: it runs in the daemon's nursery after READY, and a slow or
failing source only shows in the events and the log. Registered is not authorised: every
call is admitted against the caller's `[agents.<alias>] adapters`, its risk profile and the
capability's side effect (twice: when the agent asks, and again when it invokes after the
operator's approval), and runs under the agent's own sandbox — or, for an adapter reached
over HTTP, is made by the daemon only to an endpoint the agent's risk profile lists (ADR
0054). It is counted in flight while it runs, so a removed adapter drains instead of
vanishing under a running call.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import trio

from .._ops import OpTable
from .._process import ProcessOutcome
from ..bus import Request, Response, answer, refusal, serve_op
from ..config import Config, daemon_paths, effective_risk_policy, subagents_dir
from ..control import DiscoveryStatus
from ..events import (
    DiscoveryCompleted,
    DiscoveryFailed,
    DiscoveryHealthChecked,
    DiscoveryItemFound,
    DiscoveryItemInvalid,
    DiscoveryStarted,
    EventSink,
    RegistrationDecided,
)
from ..turns import (
    ADAPTER_ADMIT,
    ADAPTER_INVOKE,
    ADAPTER_OPERATIONS,
    ADAPTER_SERVICE,
    AdapterAdmission,
    AdapterCall,
    AdapterInvoke,
    AdapterResult,
    ApprovalLedger,
    adapter_approval_question,
    adapter_retryable,
)
from ._cache import fingerprints, project_paths, tool_hashes
from ._context import ScanContext, scan_context
from ._diff import facts
from ._http_adapter import HttpOutcome, reach, request_body, shown_url
from ._model import DiscoveredItem
from ._redact import RedactingFilter, redact_text
from ._registry import (
    AdapterRegistry,
    CallAllowed,
    CallRefused,
    RegistryChange,
    admit_call,
    over_http,
)
from ._route import Alias, route
from ._run import Outcome, discover
from ._scan import Snapshot
from ._watch import Debounce

log = logging.getLogger("zeroclaw.discovery")
log.addFilter(RedactingFilter())  # the log is an output surface too (ADR 0047)

DEFAULT_OUTPUT_BYTES = 64 * 1024
DEFAULT_TIMEOUT_MS = 30_000


# How a run reaches its adapter: a program (the input its last argument), an MCP server
# started for the call (stdio) or reached at its endpoint (mcp_http), or an HTTP adapter's
# endpoint (one POST; ADR 0054).
AdapterTransport = Literal["cli", "mcp_stdio", "mcp_http", "http"]


@dataclass(frozen=True)
class AdapterRun:
    """One adapter call to make for an agent: for a program the whole argv (the input
    last) and the environment variable names its manifest declares; its bounds. With a
    `tool`, argv starts an MCP server (no input appended), or `endpoint` is its URL, and
    `arguments` are that tool's call. An HTTP adapter's run POSTs `body` to `endpoint`,
    with the value of the daemon's `api_key_env` as its bearer token."""

    argv: tuple[str, ...]
    env_names: tuple[str, ...]
    timeout_secs: float
    output_cap: int
    tool: str = ""
    arguments: dict[str, object] = field(default_factory=dict)
    server: str = ""  # the MCP server's (or HTTP adapter's) id, for its log lines
    transport: AdapterTransport = "cli"
    endpoint: str = ""  # over HTTP: the URL, already checked against the caller's profile
    api_key_env: str = ""  # http: the daemon's variable holding the bearer token ("": none)
    body: bytes = b""  # http: the request body (HttpAdapterRequest as JSON)


@dataclass(frozen=True)
class ToolOutcome:
    """How an MCP tool call ended: `error` an McpErrorCode ("" when the server answered
    without isError), `text` its result or its error text."""

    text: str
    error: str = ""
    detail: str = ""


RunOutcome = ProcessOutcome | ToolOutcome | HttpOutcome | str


class AdapterRunner(Protocol):
    """Runs `run` for `agent`: a program or stdio MCP server in the agent's workspace under
    that agent's sandbox (the daemon gives one built from the agent's spec), a request
    over HTTP from the daemon; the outcome, or why it never started."""

    async def __call__(self, agent: str, run: AdapterRun, /) -> RunOutcome: ...


async def _no_runner(agent: str, run: AdapterRun, /) -> RunOutcome:
    return "no adapter runner in this process"


WATCH_POLL_SECS = 1.0


class DiscoveryService:
    def __init__(
        self,
        config: Config,
        config_path: Path,
        events: EventSink,
        env: Mapping[str, str] | None = None,
        runner: AdapterRunner = _no_runner,
        approvals: ApprovalLedger | None = None,
    ) -> None:
        """`approvals`: the yes answers the daemon's turn service saw given (the
        composition root's one ledger); a run that needs approval takes one from it."""
        self.config = config
        self.config_path = config_path
        self.events = events
        self.env = dict(os.environ if env is None else env)
        self.registry = AdapterRegistry()
        self.snapshot: Snapshot | None = None
        self.runner = runner
        self.approvals = ApprovalLedger() if approvals is None else approvals
        self._lock = trio.Lock()  # one scan at a time

    def configure(self, config: Config) -> None:
        """A reload: the next scan uses `config` (its policy, commands, pins, grants)."""
        self.config = config

    # --- phase B -----------------------------------------------------------------------

    async def rescan(self, *, refresh: bool = False) -> RegistryChange | None:
        """Scan (or take the cache when nothing changed), swap the registry, publish."""
        if not self.config.discovery.enabled:
            return None
        async with self._lock:
            config = self.config
            ctx = scan_context(config, self.config_path, self.env)
            self.events.publish(DiscoveryStarted(refresh=refresh))
            try:
                outcome = await self._discover(ctx, config, refresh)
            except Exception as exc:
                self.events.publish(
                    DiscoveryFailed(redact_text(f"{type(exc).__name__}: {exc}")[:300])
                )
                raise
            previous = self.snapshot
            change = self.registry.apply(outcome.snapshot)
            self.snapshot = outcome.snapshot
            self._publish(outcome, previous, change)
            return change

    async def _discover(self, ctx: ScanContext, config: Config, refresh: bool) -> Outcome:
        data = await trio.to_thread.run_sync(self.config_path.read_bytes)
        return await discover(
            ctx,
            data,
            daemon_paths(config, self.env).state_dir,
            refresh=refresh,
            # what this daemon last probed: a cache another writer left with other tool
            # schemas is stale
            tools=tool_hashes(self.snapshot) if self.snapshot is not None else None,
        )

    def _publish(self, outcome: Outcome, previous: Snapshot | None, change: RegistryChange) -> None:
        snap = outcome.snapshot
        before = {
            (e.item.key, e.item.source.kind): e.decision
            for e in (previous.entries if previous else ())
        }
        self._publish_items(snap, previous)
        for entry in snap.entries:
            if entry.item.source.kind == "builtin_template":
                continue
            d = entry.decision
            if before.get((entry.item.key, entry.item.source.kind)) != d:
                self.events.publish(
                    RegistrationDecided(
                        redact_text(d.key),
                        d.action,
                        d.reason,
                        d.target,
                        redact_text(d.shadowed_by),
                    )
                )
        timed_out = tuple(r.name for r in snap.sources if r.status == "timeout")
        s = snap.summary
        self.events.publish(
            DiscoveryCompleted(
                s.found,
                s.registered,
                s.rejected,
                s.display_only,
                s.shadowed,
                from_cache=outcome.from_cache,
                added=_keys(change.added),
                removed=_keys(change.removed),
                kept_last_good=_keys(change.kept_last_good),
                degraded=_keys(snap.degraded),
                timed_out=timed_out,
            )
        )
        log.info(
            "discovery: %d found, %d registered, %d rejected, %d shown only, %d shadowed%s",
            s.found,
            s.registered,
            s.rejected,
            s.display_only,
            s.shadowed,
            " (from the cache)" if outcome.from_cache else "",
        )
        for key in change.kept_last_good:
            log.warning("discovery: %s is broken now; its last good registration stays", key)
        if snap.degraded:
            log.warning("discovery: required but not registered: %s", ", ".join(snap.degraded))
        for name in timed_out:
            log.warning("discovery: source %s timed out (global_scan_timeout_ms)", name)

    def _publish_items(self, snap: Snapshot, previous: Snapshot | None) -> None:
        """found / invalid / health_checked for each item that is new or changed since the
        last scan (a scan that changed nothing says only `completed`)."""
        before = {
            (e.item.key, e.item.source.kind): e.item for e in (previous.entries if previous else ())
        }
        for entry in snap.entries:
            item = entry.item
            if item.source.kind == "builtin_template":
                continue
            old = before.get((item.key, item.source.kind))
            key = redact_text(item.key)
            if old is None or facts(old) != facts(item):
                self.events.publish(DiscoveryItemFound(key, item.source.kind, item.capabilities))
                errors = [d for d in item.diagnostics if d.level == "error"]
                if errors:
                    self.events.publish(
                        DiscoveryItemInvalid(
                            key,
                            item.source.kind,
                            tuple(dict.fromkeys(d.kind for d in errors)),
                            redact_text(errors[0].message)[:300],
                        )
                    )
            health = item.health
            checked = health.status != "not_checked"
            if checked and (
                old is None or old.health.status != health.status or _tools(old) != _tools(item)
            ):
                self.events.publish(
                    DiscoveryHealthChecked(
                        key,
                        health.status,
                        redact_text(health.version),
                        redact_text(health.message)[:300],
                        _tools(item),
                    )
                )

    @property
    def degraded(self) -> tuple[str, ...]:
        return self.snapshot.degraded if self.snapshot is not None else ()

    def status(self) -> DiscoveryStatus | None:
        """What `zeroclaw status` shows: None while discovery is off."""
        if not self.config.discovery.enabled:
            return None
        snap = self.snapshot
        return DiscoveryStatus(
            scanned_at=snap.generated_at if snap is not None else None,
            registered_adapters=len(self.registry.active),
            degraded=list(self.degraded),
        )

    # --- the watch ---------------------------------------------------------------------

    def _project_state(self) -> dict[str, tuple[int, int, int]]:
        paths = project_paths(
            self.config_path.parent,
            subagents_dir(self.config, self.config_path),
            self.config.discovery.max_files_per_dir,
        )
        return fingerprints(paths)

    async def watch(
        self,
        poll_secs: float = WATCH_POLL_SECS,
        quiet_secs: float = 0.5,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Rescan when a project directory changes (adapters/, capabilities/, mcp/,
        subagents/), once the changes have stopped for `quiet_secs`. User directories are
        not watched. Started once it has taken its first look."""
        debounce = Debounce(quiet_secs)
        debounce.observe(await trio.to_thread.run_sync(self._project_state), trio.current_time())
        task_status.started()
        while True:
            await trio.sleep(poll_secs if not debounce.pending else quiet_secs / 2)
            state = await trio.to_thread.run_sync(self._project_state)
            if debounce.observe(state, trio.current_time()):
                try:
                    await self.rescan(refresh=True)
                except Exception:
                    log.exception("discovery: a rescan after a change failed")

    # --- the adapter service -------------------------------------------------------------

    async def serve(self, sender: str, request: Request) -> Response:
        """`ADAPTER_SERVICE` requests; `sender` is the router's identity of the agent."""
        return await serve_op(
            _TABLE, (self, sender, request), request, log=log, service="adapters", sender=sender
        )

    async def _admit_op(self, sender: str, request: Request, call: AdapterCall) -> Response:
        verdict = self._admit(sender, call.adapter, call.capability, call.tool)
        if isinstance(verdict, CallRefused):
            return _error(request, verdict.code, verdict.message)
        return answer(request, _admission(verdict))

    def _admit(
        self, sender: str, adapter: str, capability: str | None, tool: str | None = None
    ) -> CallAllowed | CallRefused:
        agent = self.config.agents.get(sender)
        if agent is None or agent.risk_profile is None:
            return CallRefused("adapter_not_granted", f"{sender} may call no adapter")
        if not adapter:  # `invoke for CAPABILITY`: an alias, or routed by source priority
            routed = route(
                self.registry,
                capability=capability,
                granted=agent.adapters,
                aliases={
                    name: Alias(a.adapter, a.capability, a.tool)
                    for name, a in self.config.discovery.aliases.items()
                },
            )
            if isinstance(routed, CallRefused):
                return routed
            adapter, capability, tool = routed.adapter, routed.capability, routed.tool
        verdict = admit_call(
            self.registry,
            agent=sender,
            granted=agent.adapters,
            level=effective_risk_policy(self.config, sender, self.env).level,
            adapter_id=adapter,
            capability=capability,
            tool=tool,
        )
        if isinstance(verdict, CallRefused) or not over_http(verdict.adapter.item):
            return verdict
        # Over HTTP the daemon connects, not the agent's sandbox: only to an endpoint the
        # agent's risk profile lists (ADR 0054), decided before anything is asked or sent.
        profile = agent.risk_profile
        reached = reach(
            verdict.adapter.item,
            agent=sender,
            profile=profile,
            allowed=self.config.risk_profiles[profile].allowed_endpoints,
            env=self.env,
        )
        if isinstance(reached, CallRefused):
            return reached
        return dataclasses.replace(verdict, endpoint=reached.url)

    async def _invoke(self, sender: str, request: Request, call: AdapterInvoke) -> Response:
        verdict = self._admit(sender, call.adapter, call.capability, call.tool)
        if isinstance(verdict, CallRefused):
            return _error(request, verdict.code, verdict.message)
        arguments: dict[str, object] = {}
        if verdict.tool:
            parsed = _arguments(call.input)
            if isinstance(parsed, str):
                return _error(request, "bad_arguments", parsed)
            arguments = parsed
        if verdict.needs_approval and not self.approvals.take(
            sender, call.turn, adapter_approval_question(_admission(verdict), call.input)
        ):
            # Only a yes the daemon itself saw given in that turn of this agent (ADR 0052).
            detail = "this call needs an approval given in the asking turn, and none was"
            return _error(request, "approval_denied", detail)
        ident = verdict.adapter.id  # the routed one when the call named none
        adapter = self.registry.acquire(ident)
        if adapter is None:
            return _error(request, "adapter_not_found", f"{ident!r} is gone")
        try:
            outcome = await self.runner(sender, self._run(adapter.item, verdict, call, arguments))
        finally:
            self.registry.release(ident)
        if isinstance(outcome, str):  # it never ran: why
            return _error(request, "exec_refused", outcome)
        return answer(request, _result(ident, verdict.capability, outcome))

    def _run(
        self,
        item: DiscoveredItem,
        verdict: CallAllowed,
        call: AdapterInvoke,
        arguments: dict[str, object],
    ) -> AdapterRun:
        """The run of an admitted call: its transport, bounds and what it sends."""
        descriptor = self.registry.capabilities.get(verdict.capability)
        timeout_ms = item.timeout_ms or (
            descriptor.default_timeout_ms if descriptor else DEFAULT_TIMEOUT_MS
        )
        bounds = AdapterRun(
            argv=(),
            env_names=item.env,
            timeout_secs=timeout_ms / 1000,
            output_cap=item.max_output_bytes or DEFAULT_OUTPUT_BYTES,
            server=item.id,
        )
        if item.kind == "http_adapter":
            return dataclasses.replace(
                bounds,
                env_names=(),
                transport="http",
                endpoint=verdict.endpoint,
                api_key_env=item.api_key_env,
                body=request_body(verdict.capability, call.input),
            )
        if verdict.tool:
            over = verdict.endpoint != ""
            return dataclasses.replace(
                bounds,
                argv=() if over else (item.command, *item.args),
                env_names=() if over else item.env,
                tool=verdict.tool,
                arguments=arguments,
                transport="mcp_http" if over else "mcp_stdio",
                endpoint=verdict.endpoint,
            )
        return dataclasses.replace(bounds, argv=(item.command, *item.args, call.input))


def _result(
    ident: str, capability: str, outcome: ProcessOutcome | ToolOutcome | HttpOutcome
) -> AdapterResult:
    """A run's outcome as the agent's tool reads it."""
    if isinstance(outcome, HttpOutcome):
        return AdapterResult(
            adapter=ident,
            capability=capability,
            exit_code=None if outcome.error else 0,
            output=outcome.output,
            truncated=outcome.truncated,
            timed_out=outcome.error == "http_timeout",
            error=outcome.error or "",
            retryable=outcome.retryable,
            status=outcome.status,
            detail=outcome.detail,
        )
    if isinstance(outcome, ToolOutcome):
        return AdapterResult(
            adapter=ident,
            capability=capability,
            exit_code=None if outcome.error else 0,
            output=outcome.text,
            truncated=outcome.error == "mcp_result_too_large",
            timed_out=outcome.error == "mcp_timeout",
            error=outcome.error,
            retryable=adapter_retryable(outcome.error or None),
            detail=outcome.detail if outcome.error else "",
        )
    return AdapterResult(
        adapter=ident,
        capability=capability,
        exit_code=outcome.exit_code,
        output=outcome.output,
        truncated=outcome.truncated,
        timed_out=outcome.timed_out,
    )


def _tools(item: DiscoveredItem) -> str:
    return item.mcp.tools_hash if item.mcp is not None else ""


def _keys(keys: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(redact_text(key) for key in keys)


def _admission(verdict: CallAllowed) -> AdapterAdmission:
    item = verdict.adapter.item
    command = item.command
    if verdict.endpoint:  # the approval names where it goes, never a query or a secret
        shown = shown_url(verdict.endpoint)
        command = f"POST {shown}" if item.kind == "http_adapter" else shown
    return AdapterAdmission(
        adapter=verdict.adapter.id,
        capability=verdict.capability,
        side_effect=verdict.side_effect,
        needs_approval=verdict.needs_approval,
        command=command,
        tool=verdict.tool,
    )


MAX_ARGUMENTS_BYTES = 256 * 1024


def _arguments(text: str) -> dict[str, object] | str:
    """An MCP tool call's input: a JSON object (empty input: no arguments); else why not."""
    if not text.strip():
        return {}
    if len(text) > MAX_ARGUMENTS_BYTES:
        return f"arguments over {MAX_ARGUMENTS_BYTES} characters"
    try:
        value: object = json.loads(text)
    except ValueError as exc:
        return f"an MCP tool's input is its arguments as a JSON object: {exc}"[:300]
    if not isinstance(value, dict):
        return "an MCP tool's input is its arguments as a JSON object"
    return {str(k): v for k, v in value.items()}


def _error(request: Request, code: str, detail: str) -> Response:
    return refusal(request, code, detail)


_Ctx = tuple[DiscoveryService, str, Request]  # the service, the sender, its request

# The adapter service's one table: op -> request struct -> handler.
_TABLE: OpTable[_Ctx, Awaitable[Response]] = (
    OpTable[_Ctx, Awaitable[Response]](ADAPTER_SERVICE)
    .on(ADAPTER_ADMIT, lambda ctx, call: ctx[0]._admit_op(ctx[1], ctx[2], call))
    .on(ADAPTER_INVOKE, lambda ctx, call: ctx[0]._invoke(ctx[1], ctx[2], call))
    .require(ADAPTER_OPERATIONS)
)
