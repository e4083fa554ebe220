"""The set of agent runners: start-up, readiness, reload, shutdown, status."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import trio

from .._logging import resolve_format
from .._version import __version__
from ..agent import AgentSpec
from ..bus import Router
from ..config import (
    Config,
    ConfigError,
    ConfigIssue,
    RestartPolicy,
    daemon_paths,
    daemon_refusals,
    load_config,
)
from ..control import (
    AgentStatus,
    DaemonStatus,
    ReloadOutcome,
    ReloadStatus,
    StatusReply,
)
from ..events import AgentExited, AgentTransition, EventSink, ReloadApplied
from ..memory import MemoryService, memory_grants
from ..subagents import LoadedRevision, SubagentRegistry
from ._lifecycle import ExitStatus, State, Transition, exit_cause
from ._notify import Notifier
from ._reload import RELOAD_CONCURRENCY, ReloadPlan, plan_reload, reload_deadline
from ._runner import (
    AgentRunner,
    Command,
    ProcessExited,
    ProcessReady,
    Reconfigure,
    SandboxReport,
)
from ._spec import build_specs, subagent_runtime_spec
from ._zygote_client import ZygoteClient

log = logging.getLogger("zeroclaw.supervisor")


@dataclass
class ReloadState:
    # never; ok; reload_failed (the file was refused, the running config kept); incomplete
    # (applied, but some agent did not stop within the reload's deadline)
    state: ReloadOutcome = "never"
    at: float | None = None
    errors: list[str] = field(default_factory=list)
    diff: dict[str, list[str]] = field(default_factory=dict)


def reload_refusals(
    running: Config,
    new: Config,
    env: Mapping[str, str],
    config_path: Path,
    code_paths: Sequence[str] = (),
) -> list[ConfigIssue]:
    """Why a valid file cannot replace the running config: what the daemon refuses to run
    at all, and a move of the state or runtime dir, which the running daemon keeps open
    (memory store, sockets, lock) and so cannot apply without a restart."""
    issues = daemon_refusals(new, env, config_path, code_paths)
    old_paths, new_paths = daemon_paths(running, env), daemon_paths(new, env)
    for key in ("state_dir", "runtime_dir"):
        before, after = getattr(old_paths, key), getattr(new_paths, key)
        if before != after:
            issues.append(
                ConfigIssue(
                    ("daemon", key),
                    f"changed from {before} to {after}: this needs a restart of the daemon "
                    "(zeroclaw stop, then start it); kept the running config",
                )
            )
    return issues


class Supervisor:
    def __init__(
        self,
        config: Config,
        config_path: Path,
        env: Mapping[str, str],
        zygote: ZygoteClient,
        notifier: Notifier,
        router: Router,
        memory: MemoryService,
        events: EventSink,
        subagents: SubagentRegistry,
        *,
        log_level: str | None = None,
        code_paths: tuple[str, ...] = (),
    ) -> None:
        self.config = config
        # The daemon's own code (ADR 0044), gathered once at its start: read-only to agents.
        self.code_paths = code_paths
        # `zeroclaw --log-level`: every agent's level, whatever the config says (None: its).
        self.log_level = log_level
        self.config_path = config_path
        self.env = env
        self.zygote = zygote
        self.notifier = notifier
        self.router = router
        self.memory = memory
        self.events = events
        self.subagents = subagents
        self.paths = daemon_paths(config, env)
        self.specs: dict[str, AgentSpec] = {}
        self.runners: dict[str, AgentRunner] = {}
        # Sub-agent revision runtimes by identity: started on demand, kept out of the
        # agents' status and readiness (issue 12).
        self.runtimes: dict[str, AgentRunner] = {}
        self.reload_state = ReloadState()
        self.started_wall = time.time()
        self.started_mono = 0.0
        self.ready_sent = False
        self.ready = trio.Event()  # set with READY=1: every always-on agent has settled
        self._by_pid: dict[int, AgentRunner] = {}
        self._early_exits: dict[int, int] = {}
        self._reload_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.shutdown_requested = trio.Event()

    # --- wiring ------------------------------------------------------------------------

    def on_zygote_exit(self, pid: int, status: int) -> None:
        """Called by the zygote reader for every agent exit."""
        runner = self._by_pid.pop(pid, None)
        if runner is None:
            self._early_exits[pid] = status  # reported before the runner saw its pid
            return
        runner.post(ProcessExited(pid, ExitStatus.from_wait_status(status)))

    def _register_pid(self, pid: int, runner: AgentRunner) -> None:
        status = self._early_exits.pop(pid, None)
        if status is not None:
            runner.post(ProcessExited(pid, ExitStatus.from_wait_status(status)))
        else:
            self._by_pid[pid] = runner

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        """An agent said hello on the bus: it is reachable, so it is running. With it comes
        its own account of its sandbox (what the agent claims: for the operator's eyes)."""
        runner = self.runners.get(alias) or self.runtimes.get(alias)
        if runner is not None:
            if not sandbox_in_force:
                log.info(
                    "agent %s runs without an OS sandbox: %s",
                    alias,
                    sandbox or "it did not say why",
                    extra={"alias": alias, "pid": pid, "sandbox": sandbox},
                )
            runner.post(ProcessReady(pid, SandboxReport(sandbox, sandbox_in_force)))

    def request_start(self, alias: str) -> bool:
        """A message arrived for an on-demand agent that is not on the bus yet."""
        runner = self.runners.get(alias) or self.runtimes.get(alias)
        if runner is None or runner.lifecycle.state == State.FATAL:
            return False
        if runner.lifecycle.state == State.STOPPED:
            runner.post(Command("start"))
        return True

    def note_activity(self, alias: str) -> None:
        runner = self.runners.get(alias) or self.runtimes.get(alias)
        if runner is not None:
            runner.note_traffic()

    def _on_transition(self, t: Transition) -> None:
        if t.old in (State.STARTING, State.RUNNING, State.STOPPING) and t.new in (
            State.BACKOFF,
            State.FATAL,
            State.STOPPED,
        ):
            # The process is gone: its key dies with it, and what was in flight to it is refused.
            self.router.revoke(t.alias)
            self.router.agent_down(t.alias)
        if t.new == State.FATAL:
            self.router.start_failed(t.alias, "the agent is fatal")
        self.events.publish(AgentTransition(t.alias, t.old.value, t.new.value, t.reason))
        if t.exit is not None and (cause := exit_cause(t)) is not None:
            self.events.publish(AgentExited(t.alias, cause, t.exit.describe()))
        fields: dict[str, object] = {
            "alias": t.alias,
            "from_state": t.old.value,
            "to_state": t.new.value,
            "pid": t.pid,
        }
        if t.exit is not None:
            fields["exit"] = t.exit.describe()
        if t.delay is not None:
            fields["next_delay_secs"] = t.delay
        if t.failures_in_window:
            fields["failures_in_window"] = t.failures_in_window
        level = logging.ERROR if t.new == State.FATAL else logging.INFO
        detail = f"; next start in {t.delay:g}s" if t.delay is not None else ""
        exit_text = f" after {t.exit.describe()}" if t.exit else ""
        log.log(
            level,
            "agent %s: %s -> %s%s (%s)%s",
            t.alias,
            t.old.value,
            t.new.value,
            exit_text,
            t.reason,
            detail,
            extra=fields,
        )
        self._update_status()

    def _specs_of(self, config: Config) -> dict[str, AgentSpec]:
        specs = build_specs(
            config,
            self.env,
            self.config_path.parent,
            config_path=self.config_path,
            daemon_pids=(os.getpid(), self.zygote.pid),
            # Agents some loaded sub-agent allows get agent_catalog/agent_dispatch.
            dispatch_callers=self.subagents.callers(),
            code_paths=self.code_paths,
        )
        return {alias: self._logging_of(spec) for alias, spec in specs.items()}

    def _logging_of(self, spec: AgentSpec) -> AgentSpec:
        """The spec with the daemon's effective logging: the format resolved on the stderr
        the agent shares with us (it cannot see JOURNAL_STREAM, we can), and the level
        `--log-level` asked for, if any."""
        return msgspec.structs.replace(
            spec,
            log_format=resolve_format(spec.log_format, sys.stderr, self.env),
            log_level=self.log_level or spec.log_level,
        )

    def _policy(self, alias: str) -> RestartPolicy:
        if alias in self.runtimes:
            return RestartPolicy()
        profile = self.config.agents[alias].runtime_profile
        assert profile is not None
        return self.config.runtime_profiles[profile].restart

    def _make_runner(self, spec: AgentSpec, policy: RestartPolicy | None = None) -> AgentRunner:
        return AgentRunner(
            spec,
            policy or self._policy(spec.alias),
            self.zygote,
            self.env,
            self.config.daemon.shutdown_grace_secs,
            self._register_pid,
            self._on_transition,
            self.router.mint_keys,
            self.config.daemon.max_frame_bytes,
        )

    # --- life --------------------------------------------------------------------------

    def ensure_runtime(self, revision: LoadedRevision) -> None:
        """The runner of a sub-agent revision's runtime, made on its first invocation; the
        router starts its process at the first message (on demand), and it stops when idle.
        Two revisions never share one: the identity is derived from the digest."""
        identity = revision.identity
        if identity in self.runtimes:
            return
        assert self._nursery is not None, "Supervisor.run has not started"
        spec = self._logging_of(
            subagent_runtime_spec(
                self.config,
                self.env,
                revision,
                config_path=self.config_path,
                daemon_pids=(os.getpid(), self.zygote.pid),
                code_paths=self.code_paths,
            )
        )
        runner = self._make_runner(spec, RestartPolicy())
        self.runtimes[identity] = runner
        self.router.confine(identity)
        self._nursery.start_soon(self._run_runtime, runner, name=f"runtime:{identity}")

    def runtime_running(self, identity: str) -> bool:
        runner = self.runtimes.get(identity)
        return runner is not None and runner.lifecycle.state == State.RUNNING

    def retire_stale_runtimes(self) -> None:
        """Stop the runtimes of replaced revisions that run nothing (a burst of bundle
        edits must not leave one idle process per old revision)."""
        for identity in self.subagents.stale(self.runtimes):
            self.runtimes[identity].post(Command("remove", "its revision was replaced"))

    async def _run_runtime(self, runner: AgentRunner) -> None:
        try:
            await self._run_runner(runner)
        finally:
            if self.runtimes.get(runner.alias) is runner:
                del self.runtimes[runner.alias]
                self.router.release(runner.alias)

    async def run(self, nursery: trio.Nursery) -> None:
        """Start a runner per enabled agent; `always` agents start now."""
        self._nursery = nursery
        self.started_mono = trio.current_time()
        await self.subagents.rescan(self.config, self.config_path)
        self.specs = self._specs_of(self.config)
        for spec in self.specs.values():
            self._add(nursery, spec)
        self._update_status()

    def _add(self, nursery: trio.Nursery, spec: AgentSpec) -> None:
        runner = self._make_runner(spec)
        self.runners[spec.alias] = runner
        nursery.start_soon(self._run_runner, runner, name=f"agent:{spec.alias}")
        if spec.activation == "always":
            runner.post(Command("start"))

    async def _run_runner(self, runner: AgentRunner) -> None:
        try:
            await runner.run()
        except Exception:
            # A bug in one agent's runner must not take the daemon and every other agent
            # down. Its process is killed; the agent is gone until a reload or restart.
            log.exception("supervisor bug while handling agent %s; stopping it", runner.alias)
            pid = runner.lifecycle.pid
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            self.router.agent_down(runner.alias)
        if self.runners.get(runner.alias) is runner:
            del self.runners[runner.alias]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for runner in self.runners.values():
            counts[runner.lifecycle.state.value] = counts.get(runner.lifecycle.state.value, 0) + 1
        return counts

    def status_line(self) -> str:
        counts = self.counts()
        parts = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        return f"{len(self.runners)} agents: {parts or 'none'}"

    def _update_status(self) -> None:
        always = [r for r in self.runners.values() if r.spec.activation == "always"]
        settled = all(r.lifecycle.state in (State.RUNNING, State.FATAL) for r in always)
        if not self.ready_sent and settled and not self.shutdown_requested.is_set():
            self.ready_sent = True
            fatal = [r.alias for r in always if r.lifecycle.state == State.FATAL]
            if fatal:
                log.error("daemon ready, but these agents are fatal: %s", ", ".join(fatal))
            else:
                log.info("daemon ready: %s", self.status_line())
            self.notifier.ready(self.status_line())
            self.ready.set()
        elif self.ready_sent:
            self.notifier.status(self.status_line())

    async def shutdown(self) -> None:
        """Stop every agent (SIGTERM, grace, SIGKILL to its group) and wait for them."""
        self.shutdown_requested.set()
        self.notifier.stopping()
        runners = [*self.runners.values(), *self.runtimes.values()]
        for runner in runners:
            runner.post(Command("remove", "daemon shutting down"))
        with trio.move_on_after(self.config.daemon.shutdown_grace_secs + 5):
            for runner in runners:
                await runner.removed.wait()

    # --- operator commands ---------------------------------------------------------------

    def runner(self, alias: str) -> AgentRunner | None:
        return self.runners.get(alias)

    async def start_agent(self, alias: str, wait_secs: float) -> bool:
        """Start (or clear fatal); wait until that start has settled as running or fatal."""
        runner = self.runners[alias]
        if runner.lifecycle.state in (State.RUNNING, State.STARTING):
            return await runner.wait_until(lambda lc: lc.state != State.STARTING, wait_secs)
        return await self._settle_new_start(runner, Command("start", "operator"), wait_secs)

    async def stop_agent(self, alias: str, wait_secs: float) -> bool:
        runner = self.runners[alias]
        runner.post(Command("stop", "operator stop"))
        return await runner.wait_until(lambda lc: lc.state == State.STOPPED, wait_secs)

    async def restart_agent(self, alias: str, wait_secs: float) -> bool:
        runner = self.runners[alias]
        command = Command("restart", "operator restart")
        return await self._settle_new_start(runner, command, wait_secs)

    @staticmethod
    async def _settle_new_start(runner: AgentRunner, command: Command, wait_secs: float) -> bool:
        before = runner.lifecycle.starts
        runner.post(command)
        return await runner.wait_until(
            lambda lc: lc.starts > before and lc.state in (State.RUNNING, State.FATAL), wait_secs
        )

    # --- reload --------------------------------------------------------------------------

    async def reload(self, nursery: trio.Nursery) -> ReloadState:
        """Validate the file first; apply only what changed. An invalid file changes nothing.
        Bounded: agents being replaced stop concurrently, and the reload returns by its
        deadline even if some never do (their replacements start once they have)."""
        async with self._reload_lock:
            self.notifier.reloading()
            try:
                state = await self._reload(nursery)
            finally:
                self.notifier.ready(self.status_line())
            self.reload_state = state
            self._publish_reload(state)
            return state

    async def _reload(self, nursery: trio.Nursery) -> ReloadState:
        try:
            new = await trio.to_thread.run_sync(load_config, self.config_path)
            refusals = reload_refusals(
                self.config, new, self.env, self.config_path, self.code_paths
            )
            if refusals:
                raise ConfigError(str(self.config_path), refusals)
        except ConfigError as exc:
            for line in exc.lines():
                log.error("reload refused: %s", line)
            return ReloadState("reload_failed", time.time(), exc.lines(), self.reload_state.diff)
        await self.subagents.rescan(new, self.config_path)
        new_specs = self._specs_of(new)
        self.router.update_config(new)
        if self.memory is not None:
            self.memory.update_grants(memory_grants(new))
        states = {alias: r.lifecycle.state for alias, r in self.runners.items()}
        plan = plan_reload(self.specs, new_specs, states)
        self.config = new
        self.specs = new_specs
        unsettled, bound = await self._apply(nursery, plan)
        self.retire_stale_runtimes()
        diff = {
            "added": list(plan.diff.added),
            "removed": list(plan.diff.removed),
            "changed": list(plan.diff.changed),
        }
        log.info(
            "reloaded: added %s, removed %s, changed %s",
            diff["added"],
            diff["removed"],
            diff["changed"],
        )
        if unsettled:
            errors = [
                f"agent {alias} did not stop within {bound:g}s; its new process starts once "
                "it has (is the zygote alive?)"
                for alias in unsettled
            ]
            for line in errors:
                log.error("reload incomplete: %s", line)
            return ReloadState("incomplete", time.time(), errors, diff)
        return ReloadState("ok", time.time(), [], diff)

    async def _apply(self, nursery: trio.Nursery, plan: ReloadPlan) -> tuple[list[str], float]:
        """Carry out a plan; the agents that did not stop within the bound, and the bound.

        Replacements run in the daemon's nursery, not the reload's: one that outlives the
        deadline still finishes (its new runner starts when the old one is gone)."""
        bound = reload_deadline(self.config.daemon.shutdown_grace_secs, len(plan.restart))
        deadline = trio.current_time() + bound
        limiter = trio.CapacityLimiter(RELOAD_CONCURRENCY)
        waits: dict[str, trio.Event] = {}
        for alias in plan.remove:
            runner = self.runners[alias]
            runner.post(Command("remove", "removed from config"))
            waits[alias] = runner.removed
        for alias in plan.restart:
            waits[alias] = trio.Event()
            nursery.start_soon(self._replace, nursery, self.runners[alias], limiter, waits[alias])
        for alias in plan.add:
            self._add(nursery, self.specs[alias])
        grace = self.config.daemon.shutdown_grace_secs
        with trio.move_on_at(deadline):
            async with trio.open_nursery() as told:
                for alias in plan.reconfigure:
                    told.start_soon(self.runners[alias].update_neighbours, self.specs[alias])
        for alias in plan.keep:
            runner = self.runners[alias]
            runner.post(Reconfigure(self._policy(alias), grace))
        for alias in plan.clear_fatal:
            self.runners[alias].post(Command("start", "operator"))  # a reload clears fatal
        with trio.move_on_at(deadline):
            for done in waits.values():
                await done.wait()
        return sorted(alias for alias, done in waits.items() if not done.is_set()), bound

    async def _replace(
        self,
        nursery: trio.Nursery,
        old: AgentRunner,
        limiter: trio.CapacityLimiter,
        done: trio.Event,
    ) -> None:
        """Stop an agent whose spec changed; then start it with the spec it has now."""
        async with limiter:
            old.post(Command("remove", "config changed"))
            await old.removed.wait()
            spec = self.specs.get(old.alias)
            # A later reload may have removed it or replaced it already; a shutdown, stopped
            # everything.
            vacant = self.runners.get(old.alias) in (old, None)
            if spec is not None and vacant and not self.shutdown_requested.is_set():
                self._add(nursery, spec)
            done.set()

    def _publish_reload(self, state: ReloadState) -> None:
        if state.state == "never":
            return
        # A refused file changed nothing: its diff is the previous reload's.
        diff = {} if state.state == "reload_failed" else state.diff
        self.events.publish(
            ReloadApplied(
                outcome=state.state,
                added=tuple(diff.get("added", ())),
                removed=tuple(diff.get("removed", ())),
                changed=tuple(diff.get("changed", ())),
                errors=tuple(state.errors),
            )
        )

    # --- status --------------------------------------------------------------------------

    def status(self) -> StatusReply:
        now = trio.current_time()
        reload = self.reload_state
        return StatusReply(
            daemon=DaemonStatus(
                pid=os.getpid(),
                version=__version__,
                started_at=self.started_wall,
                uptime_secs=round(now - self.started_mono, 3),
                config=str(self.config_path),
                state_dir=str(self.paths.state_dir),
                runtime_dir=str(self.paths.runtime_dir),
                ready=self.ready_sent,
                reload=ReloadStatus(reload.state, reload.at, reload.errors, reload.diff),
            ),
            counts=self.counts(),
            router=self.router.stats(),
            agents=self.agents(),
            runtimes=[self.runtimes[i].status() for i in sorted(self.runtimes)],
        )

    def agents(self) -> list[AgentStatus]:
        return [self.runners[a].status() for a in sorted(self.runners)]
