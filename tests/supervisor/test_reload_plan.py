"""The reload plan, pure: every agent lands in exactly one group, and the right one."""

from __future__ import annotations

import copy
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import VALID_DOC
from zeroclaw.agent import AgentSpec
from zeroclaw.config import validate_document
from zeroclaw.supervisor._lifecycle import State
from zeroclaw.supervisor._reload import (
    RELOAD_CONCURRENCY,
    RELOAD_MARGIN_SECS,
    plan_reload,
    reload_deadline,
)
from zeroclaw.supervisor._spec import build_specs

BASE: AgentSpec = build_specs(
    validate_document(copy.deepcopy(VALID_DOC), base_dir=Path("/srv"), env={}), {}, Path("/srv")
)["alpha"]
ALIASES = ("a", "b", "c", "d", "e", "f")

# One agent's spec in each config: absent, or one of three variants. Variant 1 differs from
# 0 only in its neighbours (told in place); variant 2 changes what the process runs.
variant = st.sampled_from([None, 0, 1, 2])
states = st.sampled_from(list(State))


def spec(alias: str, which: int) -> AgentSpec:
    neighbours = ("/srv/other",) if which == 1 else ()
    # A change of what the process runs: another log level.
    return msgspec.structs.replace(
        BASE,
        alias=alias,
        other_workspaces=neighbours,
        log_level="debug" if which == 2 else BASE.log_level,
    )


@given(
    st.fixed_dictionaries({a: variant for a in ALIASES}),
    st.fixed_dictionaries({a: variant for a in ALIASES}),
    st.fixed_dictionaries({a: st.one_of(st.none(), states) for a in ALIASES}),
)
def test_every_agent_lands_in_exactly_one_group(
    before: dict[str, int | None], after: dict[str, int | None], running: dict[str, State | None]
) -> None:
    old = {a: spec(a, v) for a, v in before.items() if v is not None}
    new = {a: spec(a, v) for a, v in after.items() if v is not None}
    # A runner exists for every old agent, unless a bug ended it (None).
    state_of = {a: s for a, s in running.items() if a in old and s is not None}
    plan = plan_reload(old, new, state_of)
    groups = [plan.add, plan.remove, plan.restart, plan.reconfigure, plan.leave]
    placed = [a for group in groups for a in group]
    assert sorted(placed) == sorted(new.keys() | state_of.keys())
    assert len(placed) == len(set(placed))
    for alias in placed:
        if alias not in state_of:
            assert alias in plan.add  # new, or its runner is gone: a fresh runner
        elif alias not in new:
            assert alias in plan.remove
        elif before[alias] == after[alias]:
            assert alias in plan.leave
        elif {before[alias], after[alias]} == {0, 1}:
            assert alias in plan.reconfigure  # neighbours only: no restart
        else:
            assert alias in plan.restart
    assert set(plan.clear_fatal) == {a for a in plan.keep if state_of[a] == State.FATAL}
    # What the operator is told is the spec diff, whatever the runners are doing.
    assert set(plan.diff.added) == new.keys() - old.keys()
    assert set(plan.diff.removed) == old.keys() - new.keys()


def test_an_identical_config_leaves_everything() -> None:
    specs = {a: spec(a, 0) for a in ALIASES}
    plan = plan_reload(specs, specs, dict.fromkeys(ALIASES, State.RUNNING))
    assert plan.leave == ALIASES
    assert plan.add == plan.remove == plan.restart == plan.reconfigure == plan.clear_fatal == ()


def test_a_fatal_agent_kept_as_it_is_is_started_again() -> None:
    specs = {"a": spec("a", 0), "b": spec("b", 0)}
    plan = plan_reload(specs, specs, {"a": State.FATAL, "b": State.BACKOFF})
    assert plan.clear_fatal == ("a",)


@given(
    st.floats(min_value=0.1, max_value=600),
    st.integers(min_value=0, max_value=1000),
)
def test_the_deadline_allows_a_grace_per_wave_and_no_more(grace: float, restarts: int) -> None:
    bound = reload_deadline(grace, restarts)
    waves = max(1, -(-restarts // RELOAD_CONCURRENCY))
    assert bound == grace * waves + RELOAD_MARGIN_SECS
    # Bounded well below replacing one agent after another.
    if restarts > RELOAD_CONCURRENCY:
        assert bound < grace * restarts + RELOAD_MARGIN_SECS
