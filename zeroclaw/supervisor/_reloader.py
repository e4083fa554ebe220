"""Reload: read the file, plan (`_reload.plan_reload`, pure) and apply the plan to the fleet.

An invalid file changes nothing. Bounded: agents being replaced stop concurrently, and a
reload returns by its deadline even if some never do (their replacements start once they
have). One reload at a time; its outcome is published (ReloadApplied) and kept for status.
"""

from __future__ import annotations

import logging
import time

import trio

from ..bus import Router
from ..config import ConfigError, load_config
from ..events import EventSink, ReloadApplied
from ..memory import MemoryService, memory_grants
from ._fleet import Fleet
from ._lifecycle import Lifecycle, State
from ._notify import Notifier
from ._reload import (
    RELOAD_CONCURRENCY,
    ReloadPlan,
    ReloadState,
    plan_reload,
    reload_deadline,
    reload_refusals,
)
from ._runner import Command, Reconfigure
from ._running import Running
from ._runtimes import Runtimes

log = logging.getLogger("zeroclaw.supervisor")


def _first_start_settled(lifecycle: Lifecycle) -> bool:
    return lifecycle.starts > 0 and lifecycle.state != State.STARTING


class Reloader:
    def __init__(
        self,
        running: Running,
        fleet: Fleet,
        runtimes: Runtimes,
        *,
        router: Router,
        memory: MemoryService,
        notifier: Notifier,
        events: EventSink,
    ) -> None:
        self._running = running
        self._fleet = fleet
        self._runtimes = runtimes
        self._router = router
        self._memory = memory
        self._notifier = notifier
        self._events = events
        self.state = ReloadState()  # the last reload's, for status
        self._lock = trio.Lock()

    async def reload(self) -> ReloadState:
        async with self._lock:
            self._notifier.reloading()
            try:
                state = await self._reload()
            finally:
                self._notifier.ready(self._fleet.status_line())
            self.state = state
            self._publish(state)
            return state

    async def reload_guarded(self) -> None:
        """A reload that fails for an unexpected reason is reported, never fatal to the
        daemon (SIGHUP's)."""
        try:
            await self.reload()
        except Exception as exc:
            log.exception("reload failed unexpectedly; the running config is unchanged")
            self.state = ReloadState("reload_failed", time.time(), [f"internal error: {exc}"])

    async def _reload(self) -> ReloadState:
        running = self._running
        try:
            new = await trio.to_thread.run_sync(load_config, running.config_path)
            refusals = reload_refusals(
                running.config, new, running.env, running.config_path, running.code_paths
            )
            if refusals:
                raise ConfigError(str(running.config_path), refusals)
        except ConfigError as exc:
            for line in exc.lines():
                log.error("reload refused: %s", line)
            return ReloadState("reload_failed", time.time(), exc.lines(), self.state.diff)
        new_specs = await running.scan(new)
        self._router.update_config(new)
        self._memory.update_grants(memory_grants(new))
        states = {alias: r.lifecycle.state for alias, r in self._fleet.runners.items()}
        plan = plan_reload(running.specs, new_specs, states)
        running.replace(new, new_specs)
        unsettled, bound = await self._apply(plan)
        self._runtimes.retire_stale_runtimes()
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

    async def _apply(self, plan: ReloadPlan) -> tuple[list[str], float]:
        """Carry out a plan; the agents that did not stop within the bound, and the bound."""
        fleet, running = self._fleet, self._running
        grace = running.config.daemon.shutdown_grace_secs
        bound = reload_deadline(grace, len(plan.restart))
        deadline = trio.current_time() + bound
        limiter = trio.CapacityLimiter(RELOAD_CONCURRENCY)
        waits: dict[str, trio.Event] = {}
        for alias in plan.remove:
            runner = fleet.runners[alias]
            runner.post(Command("remove", "removed from config"))
            waits[alias] = runner.removed
        for alias in plan.restart:
            waits[alias] = trio.Event()
            fleet.replace_soon(fleet.runners[alias], limiter, waits[alias])
        for alias in plan.add:
            fleet.add(running.specs[alias])
        with trio.move_on_at(deadline):
            async with trio.open_nursery() as told:
                for alias in plan.reconfigure:
                    told.start_soon(fleet.runners[alias].update_neighbours, running.specs[alias])
        for alias in plan.keep:
            fleet.runners[alias].post(Reconfigure(running.policy(alias), grace))
        for alias in plan.clear_fatal:
            fleet.runners[alias].post(Command("start", "operator"))  # a reload clears fatal
        with trio.move_on_at(deadline):
            for done in waits.values():
                await done.wait()
        unsettled = sorted(alias for alias, done in waits.items() if not done.is_set())
        # What the reload started is up (or its first start has failed) before the reload
        # answers, as at the daemon's start before READY: `zeroclaw reload` and then a chat
        # with an added agent finds it running.
        for alias in (*plan.add, *plan.restart):
            started = fleet.runners.get(alias)
            if started is None or started.spec.activation != "always" or alias in unsettled:
                continue
            left = max(0.0, deadline - trio.current_time())
            await started.wait_until(_first_start_settled, left)
        return unsettled, bound

    def _publish(self, state: ReloadState) -> None:
        if state.state == "never":
            return
        # A refused file changed nothing: its diff is the previous reload's.
        diff = {} if state.state == "reload_failed" else state.diff
        self._events.publish(
            ReloadApplied(
                outcome=state.state,
                added=tuple(diff.get("added", ())),
                removed=tuple(diff.get("removed", ())),
                changed=tuple(diff.get("changed", ())),
                errors=tuple(state.errors),
            )
        )
