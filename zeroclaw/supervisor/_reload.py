"""What a reload does to each agent, decided as pure code from the specs and the states.

`plan_reload` sorts every agent into exactly one of: add (a new runner), remove, restart
(its spec changed: the old process goes, a new runner starts), reconfigure (kept running;
only what it is told over its link changed) and leave. Kept agents that are fatal are
started again: a reload clears fatal. The supervisor applies the plan concurrently, with a
deadline from `reload_deadline`, so an agent that never stops cannot hang a reload.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..agent import AgentSpec
from ..config import Config, ConfigIssue, daemon_paths, daemon_refusals
from ..control import ReloadOutcome
from ._lifecycle import State
from ._spec import SpecDiff, diff_specs

RELOAD_CONCURRENCY = 16  # agents being replaced at once (each a stop, then a spawn)
RELOAD_MARGIN_SECS = 5.0  # past the grace: the SIGKILL's exit report and the respawn


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


@dataclass(frozen=True)
class ReloadPlan:
    add: tuple[str, ...]
    remove: tuple[str, ...]
    restart: tuple[str, ...]
    reconfigure: tuple[str, ...]
    leave: tuple[str, ...]
    clear_fatal: tuple[str, ...]  # among reconfigure and leave: fatal, started again
    diff: SpecDiff  # what the operator is told changed (the spec diff)

    @property
    def keep(self) -> tuple[str, ...]:
        return tuple(sorted((*self.reconfigure, *self.leave)))


def plan_reload(
    old: Mapping[str, AgentSpec], new: Mapping[str, AgentSpec], states: Mapping[str, State]
) -> ReloadPlan:
    """`states` holds the agents that have a runner now; one that lost its runner (a bug
    ended it) is added again if the new config still has it."""
    diff = diff_specs(old, new)
    changed = set(diff.changed)
    add, remove, restart, reconfigure, leave = [], [], [], [], []
    for alias in sorted(new.keys() | states.keys()):
        if alias not in states:
            add.append(alias)
        elif alias not in new:
            remove.append(alias)
        elif alias not in old or alias in changed:
            restart.append(alias)
        elif old[alias] != new[alias]:
            reconfigure.append(alias)
        else:
            leave.append(alias)
    kept = sorted((*reconfigure, *leave))
    return ReloadPlan(
        add=tuple(add),
        remove=tuple(remove),
        restart=tuple(restart),
        reconfigure=tuple(reconfigure),
        leave=tuple(leave),
        clear_fatal=tuple(a for a in kept if states[a] == State.FATAL),
        diff=diff,
    )


def reload_deadline(
    grace_secs: float, restarts: int, concurrency: int = RELOAD_CONCURRENCY
) -> float:
    """Seconds a reload may take to stop what it replaces: a grace per wave of at most
    `concurrency` agents (SIGKILL comes after the grace), plus a margin."""
    waves = max(1, math.ceil(restarts / concurrency))
    return grace_secs * waves + RELOAD_MARGIN_SECS
