"""Discovery inside the daemon: phase B (swap the adapter registry, publish what changed),
the `ADAPTER_SERVICE` agents call, and the watch that rescans when the project directories
change.

A scan never delays the daemon: it runs in the daemon's nursery after READY, and a slow or
failing source only shows in the events and the log. Registered is not authorised: every
call is admitted against the caller's `[agents.<alias>] adapters`, its risk profile and the
capability's side effect, and counted in flight until the agent releases it (or its process
is gone), so a removed adapter drains instead of vanishing under a running call.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

import msgspec
import trio

from ..bus import Request, Response
from ..config import Config, daemon_paths, effective_risk_policy
from ..events import DiscoveryCompleted, EventSink, RegistrationDecided
from ..turns import AdapterCall, AdapterLease, LeaseRelease
from ._cache import fingerprints
from ._context import scan_context
from ._registry import AdapterRegistry, CallRefused, RegistryChange, admit_call
from ._run import Outcome, discover
from ._scan import Snapshot
from ._watch import Debounce

log = logging.getLogger("zeroclaw.discovery")

DEFAULT_OUTPUT_BYTES = 64 * 1024
WATCH_POLL_SECS = 1.0
WATCHED_DIRS = ("adapters", "capabilities", "mcp")


class DiscoveryService:
    def __init__(
        self,
        config: Config,
        config_path: Path,
        events: EventSink,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.events = events
        self.env = dict(os.environ if env is None else env)
        self.registry = AdapterRegistry()
        self.snapshot: Snapshot | None = None
        self._leases: dict[str, tuple[str, str]] = {}  # lease -> (agent, adapter)
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
            data = await trio.to_thread.run_sync(self.config_path.read_bytes)
            outcome = await discover(
                ctx, data, daemon_paths(config, self.env).state_dir, refresh=refresh
            )
            previous = self.snapshot
            change = self.registry.apply(outcome.snapshot)
            self.snapshot = outcome.snapshot
            self._publish(outcome, previous, change)
            return change

    def _publish(self, outcome: Outcome, previous: Snapshot | None, change: RegistryChange) -> None:
        snap = outcome.snapshot
        before = {
            (e.item.key, e.item.source.kind): e.decision
            for e in (previous.entries if previous else ())
        }
        for entry in snap.entries:
            if entry.item.source.kind == "builtin_template":
                continue
            d = entry.decision
            if before.get((entry.item.key, entry.item.source.kind)) != d:
                self.events.publish(
                    RegistrationDecided(d.key, d.action, d.reason, d.target, d.shadowed_by)
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
                added=change.added,
                removed=change.removed,
                kept_last_good=change.kept_last_good,
                degraded=snap.degraded,
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

    @property
    def degraded(self) -> tuple[str, ...]:
        return self.snapshot.degraded if self.snapshot is not None else ()

    # --- the watch ---------------------------------------------------------------------

    def _project_state(self) -> dict[str, tuple[int, int, int]]:
        base = self.config_path.parent
        paths: list[Path] = []
        subagents = self.config.subagents.dir or base / "subagents"
        for directory in (*(base / d for d in WATCHED_DIRS), subagents):
            paths.append(directory)
            try:
                for entry in os.scandir(directory):
                    paths.append(Path(entry.path))
                    if entry.is_dir(follow_symlinks=False):
                        paths.extend(Path(e.path) for e in os.scandir(entry.path))
            except OSError:
                continue
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
        try:
            if request.op == "admit":
                return self._admit(sender, request)
            if request.op == "release":
                release = msgspec.convert(request.body, LeaseRelease)
                holder = self._leases.get(release.lease)
                if holder is None or holder[0] != sender:
                    return _error(request, "bad_request", "no such lease of yours")
                self._release(release.lease)
                return Response(id=request.id, ok=True)
            return _error(request, "bad_request", f"unknown op {request.op!r}")
        except msgspec.ValidationError as exc:
            return _error(request, "bad_request", str(exc))
        except Exception as exc:  # this request's failure, never the router's
            log.exception("adapter service failed a request of %s", sender)
            return _error(request, "internal_error", repr(exc))

    def _admit(self, sender: str, request: Request) -> Response:
        call = msgspec.convert(request.body, AdapterCall)
        agent = self.config.agents.get(sender)
        if agent is None or agent.risk_profile is None:
            return _error(request, "adapter_not_granted", f"{sender} may call no adapter")
        level = effective_risk_policy(self.config, sender, self.env).level
        verdict = admit_call(
            self.registry,
            agent=sender,
            granted=agent.adapters,
            level=level,
            adapter_id=call.adapter,
            capability=call.capability,
        )
        if isinstance(verdict, CallRefused):
            return _error(request, verdict.code, verdict.message)
        adapter = self.registry.acquire(call.adapter)
        if adapter is None:  # cannot happen after admit_call, but never hand out a ghost
            return _error(request, "adapter_not_found", f"{call.adapter!r} is gone")
        lease = secrets.token_hex(8)
        self._leases[lease] = (sender, call.adapter)
        descriptor = self.registry.capabilities.get(verdict.capability)
        item = adapter.item
        timeout_ms = item.timeout_ms or (descriptor.default_timeout_ms if descriptor else 30_000)
        return Response(
            id=request.id,
            ok=True,
            body=AdapterLease(
                lease=lease,
                adapter=call.adapter,
                capability=verdict.capability,
                side_effect=verdict.side_effect,
                needs_approval=verdict.needs_approval,
                command=item.command,
                args=item.args,
                timeout_secs=timeout_ms / 1000,
                max_output_bytes=item.max_output_bytes or DEFAULT_OUTPUT_BYTES,
            ),
        )

    def _release(self, lease: str) -> None:
        holder = self._leases.pop(lease, None)
        if holder is not None:
            self.registry.release(holder[1])

    def agent_down(self, alias: str) -> None:
        """The agent's process is gone: its calls are over."""
        for lease in [k for k, (agent, _) in self._leases.items() if agent == alias]:
            self._release(lease)

    def leases(self) -> int:
        return len(self._leases)


def _error(request: Request, code: str, detail: str) -> Response:
    return Response(id=request.id, ok=False, error=code, detail=detail)
