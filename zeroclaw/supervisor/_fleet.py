"""The fleet of the configured agents' runners: start, stop, restart, replace, their states.

Its parts, each built by the composition root with what it uses (ADR 0050):

- `ExitRoutes`: which runner an exit the zygote reports belongs to. Built before the zygote's
  client, which reports to it, and before the runners, which register with it: no cycle.
- `RunnerFactory`: a runner for a spec, with what every runner is given.
- `TransitionReport`: what every transition of a runner tells the router, the event sink
  and the log.
- `Readiness`: READY=1 once every always-on agent has settled; STATUS= after.
- `Fleet`: the runners of the configured agents (the sub-agent runtimes are `Runtimes`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterable

import trio

from ..agent import AgentSpec
from ..bus import AgentKeys, Router
from ..config import RestartPolicy
from ..control import AgentStatus
from ..events import AgentExited, AgentTransition, EventSink
from ._lifecycle import ExitStatus, State, Transition, exit_cause
from ._notify import Notifier
from ._runner import AgentRunner, Command, ProcessExited
from ._running import Running
from ._zygote_client import ZygoteClient

log = logging.getLogger("zeroclaw.supervisor")


class ExitRoutes:
    """Agent exits, as the zygote reports them, to the runner of that pid."""

    def __init__(self) -> None:
        self._by_pid: dict[int, AgentRunner] = {}
        self._early: dict[int, int] = {}  # reported before the runner saw its pid

    def exited(self, pid: int, status: int) -> None:
        """Called by the zygote reader for every agent exit."""
        runner = self._by_pid.pop(pid, None)
        if runner is None:
            self._early[pid] = status
            return
        runner.post(ProcessExited(pid, ExitStatus.from_wait_status(status)))

    def register(self, pid: int, runner: AgentRunner) -> None:
        status = self._early.pop(pid, None)
        if status is not None:
            runner.post(ProcessExited(pid, ExitStatus.from_wait_status(status)))
        else:
            self._by_pid[pid] = runner


class TransitionReport:
    """A runner's transition, told to the router (a process gone loses its key and what was
    in flight to it), to the event sink and to the log."""

    def __init__(self, router: Router, events: EventSink) -> None:
        self._router = router
        self._events = events

    def __call__(self, t: Transition) -> None:
        if t.old in (State.STARTING, State.RUNNING, State.STOPPING) and t.new in (
            State.BACKOFF,
            State.FATAL,
            State.STOPPED,
        ):
            self._router.revoke(t.alias)
            self._router.agent_down(t.alias)
        if t.new == State.FATAL:
            self._router.start_failed(t.alias, "the agent is fatal")
        self._events.publish(AgentTransition(t.alias, t.old.value, t.new.value, t.reason))
        if t.exit is not None and (cause := exit_cause(t)) is not None:
            self._events.publish(AgentExited(t.alias, cause, t.exit.describe()))
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

    def agent_down(self, alias: str) -> None:
        """A runner ended without a transition (a bug in it): what it held is refused."""
        self._router.agent_down(alias)


class RunnerFactory:
    """A runner for a spec: the zygote, the environment and the running config's limits
    (read when the runner is made: a reload changes them for the runners it makes)."""

    def __init__(
        self,
        running: Running,
        zygote: ZygoteClient,
        exits: ExitRoutes,
        mint_keys: Callable[[str], AgentKeys],
    ) -> None:
        self._running = running
        self._zygote = zygote
        self._exits = exits
        self._mint_keys = mint_keys

    def make(
        self, spec: AgentSpec, policy: RestartPolicy, on_transition: Callable[[Transition], None]
    ) -> AgentRunner:
        daemon = self._running.config.daemon
        return AgentRunner(
            spec,
            policy,
            self._zygote,
            self._running.env,
            daemon.shutdown_grace_secs,
            self._exits.register,
            on_transition,
            self._mint_keys,
            daemon.max_frame_bytes,
        )


class Readiness:
    """READY=1 (once every always-on agent has settled, running or fatal), then STATUS=."""

    def __init__(self, notifier: Notifier, stop: trio.Event) -> None:
        self._notifier = notifier
        self._stop = stop
        self.sent = False
        self.ready = trio.Event()  # set with READY=1

    def update(self, always: list[AgentRunner], line: str) -> None:
        settled = all(r.lifecycle.state in (State.RUNNING, State.FATAL) for r in always)
        if not self.sent and settled and not self._stop.is_set():
            self.sent = True
            fatal = [r.alias for r in always if r.lifecycle.state == State.FATAL]
            if fatal:
                log.error("daemon ready, but these agents are fatal: %s", ", ".join(fatal))
            else:
                log.info("daemon ready: %s", line)
            self._notifier.ready(line)
            self.ready.set()
        elif self.sent:
            self._notifier.status(line)

    def stopping(self) -> None:
        self._notifier.stopping()


class Fleet:
    """The runners of the configured agents, in a nursery of their own (`run`)."""

    def __init__(
        self,
        running: Running,
        factory: RunnerFactory,
        report: TransitionReport,
        readiness: Readiness,
        stop: trio.Event,
    ) -> None:
        self._running = running
        self._factory = factory
        self._report = report
        self._readiness = readiness
        self._stop = stop
        self.runners: dict[str, AgentRunner] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Scan the sub-agent bundles (some agents' tools depend on them), make the specs,
        start a runner per enabled agent (`always` agents start now); then hold them."""
        running = self._running
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            running.replace(running.config, await running.scan(running.config, running.skills))
            for spec in running.specs.values():
                self.add(spec)
            self.update_status()
            task_status.started()
            await trio.sleep_forever()

    def add(self, spec: AgentSpec) -> None:
        assert self._nursery is not None, "Fleet.run has not started"
        runner = self._factory.make(spec, self._running.policy(spec.alias), self._transitioned)
        self.runners[spec.alias] = runner
        self._nursery.start_soon(self._run_runner, runner, name=f"agent:{spec.alias}")
        if spec.activation == "always":
            runner.post(Command("start"))

    def replace_soon(
        self, old: AgentRunner, limiter: trio.CapacityLimiter, done: trio.Event
    ) -> None:
        """Stop an agent whose spec changed; then start it with the spec it has now; `done`
        is set when it has. In the fleet's nursery, not the caller's: a replacement that
        outlives a reload's deadline still finishes."""
        assert self._nursery is not None, "Fleet.run has not started"

        async def replace() -> None:
            async with limiter:
                old.post(Command("remove", "config changed"))
                await old.removed.wait()
                spec = self._running.specs.get(old.alias)
                # A later reload may have removed it or replaced it already; a shutdown,
                # stopped everything.
                vacant = self.runners.get(old.alias) in (old, None)
                if spec is not None and vacant and not self._stop.is_set():
                    self.add(spec)
                done.set()

        self._nursery.start_soon(replace, name=f"replace:{old.alias}")

    async def _run_runner(self, runner: AgentRunner) -> None:
        await run_guarded(runner, self._report.agent_down)
        if self.runners.get(runner.alias) is runner:
            del self.runners[runner.alias]

    def _transitioned(self, t: Transition) -> None:
        self._report(t)
        self.update_status()

    def update_status(self) -> None:
        always = [r for r in self.runners.values() if r.spec.activation == "always"]
        self._readiness.update(always, self.status_line())

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for runner in self.runners.values():
            counts[runner.lifecycle.state.value] = counts.get(runner.lifecycle.state.value, 0) + 1
        return counts

    def status_line(self) -> str:
        parts = ", ".join(f"{n} {state}" for state, n in sorted(self.counts().items()))
        return f"{len(self.runners)} agents: {parts or 'none'}"

    def agents(self) -> list[AgentStatus]:
        return [self.runners[a].status() for a in sorted(self.runners)]

    # --- the operator's commands -----------------------------------------------------------

    async def start_agent(self, alias: str, wait_secs: float) -> bool:
        """Start (or clear fatal); wait until that start has settled as running or fatal."""
        runner = self.runners[alias]
        if runner.lifecycle.state in (State.RUNNING, State.STARTING):
            return await runner.wait_until(lambda lc: lc.state != State.STARTING, wait_secs)
        return await settle_new_start(runner, Command("start", "operator"), wait_secs)

    async def stop_agent(self, alias: str, wait_secs: float) -> bool:
        runner = self.runners[alias]
        runner.post(Command("stop", "operator stop"))
        return await runner.wait_until(lambda lc: lc.state == State.STOPPED, wait_secs)

    async def restart_agent(self, alias: str, wait_secs: float) -> bool:
        command = Command("restart", "operator restart")
        return await settle_new_start(self.runners[alias], command, wait_secs)


async def settle_new_start(runner: AgentRunner, command: Command, wait_secs: float) -> bool:
    before = runner.lifecycle.starts
    runner.post(command)
    return await runner.wait_until(
        lambda lc: lc.starts > before and lc.state in (State.RUNNING, State.FATAL), wait_secs
    )


async def run_guarded(runner: AgentRunner, agent_down: Callable[[str], None]) -> None:
    """A runner's task. A bug in one agent's runner must not take the daemon and every other
    agent down: its process is killed; the agent is gone until a reload or restart."""
    try:
        await runner.run()
    except Exception:
        log.exception("supervisor bug while handling agent %s; stopping it", runner.alias)
        pid = runner.lifecycle.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        agent_down(runner.alias)


async def stop_every_agent(runners: Iterable[AgentRunner], grace_secs: float) -> None:
    """Stop every agent (SIGTERM, grace, SIGKILL to its group) and wait for them, at most
    the grace and a margin."""
    runners = list(runners)
    for runner in runners:
        runner.post(Command("remove", "daemon shutting down"))
    with trio.move_on_after(grace_secs + 5):
        for runner in runners:
            await runner.removed.wait()
