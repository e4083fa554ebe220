"""The runners of sub-agent revision runtimes (issue 12): made on a revision's first
invocation, started by the router at the first message (on demand), stopped when idle or
when their revision is replaced; kept out of the agents' status and readiness. This is the
dispatch service's `RuntimeHost`."""

from __future__ import annotations

from collections.abc import Callable

import trio

from ..bus import Router
from ..config import RestartPolicy
from ..control import AgentStatus
from ..subagents import LoadedRevision, SubagentRegistry
from ._fleet import RunnerFactory, TransitionReport, run_guarded
from ._lifecycle import State, Transition
from ._runner import AgentRunner, Command
from ._running import Running


class Runtimes:
    def __init__(
        self,
        running: Running,
        factory: RunnerFactory,
        report: TransitionReport,
        router: Router,
        subagents: SubagentRegistry,
        changed: Callable[[], None],
    ) -> None:
        self._running = running
        self._factory = factory
        self._report = report
        self._router = router
        self._subagents = subagents
        self._changed = changed  # after each transition (the fleet's STATUS= line)
        self.runners: dict[str, AgentRunner] = {}  # by identity
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def ensure_runtime(self, revision: LoadedRevision) -> None:
        """Two revisions never share a runtime: the identity is derived from the digest."""
        identity = revision.identity
        if identity in self.runners:
            return
        assert self._nursery is not None, "Runtimes.run has not started"
        spec = self._running.runtime_spec(revision)
        runner = self._factory.make(spec, RestartPolicy(), self._transitioned)
        self.runners[identity] = runner
        self._router.confine(identity)
        self._nursery.start_soon(self._run_runtime, runner, name=f"runtime:{identity}")

    def runtime_running(self, identity: str) -> bool:
        runner = self.runners.get(identity)
        return runner is not None and runner.lifecycle.state == State.RUNNING

    def retire_stale_runtimes(self) -> None:
        """Stop the runtimes of replaced revisions that run nothing (a burst of bundle
        edits must not leave one idle process per old revision)."""
        for identity in self._subagents.stale(self.runners):
            self.runners[identity].post(Command("remove", "its revision was replaced"))

    def statuses(self) -> list[AgentStatus]:
        return [self.runners[i].status() for i in sorted(self.runners)]

    def _transitioned(self, t: Transition) -> None:
        self._report(t)
        self._changed()

    async def _run_runtime(self, runner: AgentRunner) -> None:
        try:
            await run_guarded(runner, self._report.agent_down)
        finally:
            if self.runners.get(runner.alias) is runner:
                del self.runners[runner.alias]
                self._router.release(runner.alias)
