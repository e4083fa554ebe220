"""Dispatch admission decides in its order, each step pure: idempotency, existence, caller
policy, input schema, concurrency."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.subagents import (
    Admitted,
    Bundle,
    DispatchRequest,
    Existing,
    Refused,
    admit,
    load_bundle,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "etc" / "subagents"
_analyst = load_bundle(EXAMPLES / "content-analyst", providers=frozenset({"offline.default"}))
assert isinstance(_analyst, Bundle)
ANALYST: Bundle = _analyst  # allowedCallers [alpha, cli], maxConcurrency 4, input: material
BUNDLES = {"content-analyst": ANALYST}
GOOD = {"material": "the sky is green"}


def request(**overrides: object) -> DispatchRequest:
    fields: dict[str, object] = {"agent_id": "content-analyst", "caller": "alpha", "input": GOOD}
    fields.update(overrides)
    return DispatchRequest(**fields)  # type: ignore[arg-type]


def decide(req: DispatchRequest, running: int = 0, known: str | None = None) -> object:
    keys = {} if known is None else {("agent", "run-1", "k1"): known}
    return admit(
        req, bundles=BUNDLES, invocations_by_key=keys, running={"content-analyst": running}
    )


def test_a_well_formed_dispatch_from_an_allowed_caller_is_admitted() -> None:
    assert decide(request()) == Admitted(ANALYST)
    assert decide(request(caller="cli"), running=3) == Admitted(ANALYST)


def test_each_refusal_has_its_code() -> None:
    codes = {
        "subagent_not_found": request(agent_id="nope"),
        "subagent_caller_not_allowed": request(caller="beta"),
        "subagent_input_invalid": request(input={"material": 42}),
    }
    for code, req in codes.items():
        result = decide(req)
        assert isinstance(result, Refused) and result.code == code, (code, result)
    full = decide(request(), running=4)
    assert isinstance(full, Refused) and full.code == "subagent_concurrency_limit"


def test_a_schema_failure_names_the_place_in_the_input() -> None:
    result = decide(request(input={"material": "x", "extra": 1}))
    assert isinstance(result, Refused) and result.pointer == ""
    result = decide(request(input={"material": ["not", "text"]}))
    assert isinstance(result, Refused) and result.pointer == "/material"


def test_a_repeated_idempotency_key_returns_the_existing_invocation_before_anything() -> None:
    again = request(
        source="agent",
        parent_run_id="run-1",
        idempotency_key="k1",
        caller="beta",  # even a caller that is now refused, at the limit, with bad input
        input=None,
    )
    assert decide(again, running=4, known="inv-7") == Existing("inv-7")
    other_run = request(source="agent", parent_run_id="run-2", idempotency_key="k1")
    assert decide(other_run, known="inv-7") == Admitted(ANALYST)


@given(
    agent=st.sampled_from(["content-analyst", "nope"]),
    caller=st.sampled_from(["alpha", "beta", "cli", "internal-workflow"]),
    good_input=st.booleans(),
    running=st.integers(0, 6),
    repeated=st.booleans(),
)
def test_the_first_failing_step_decides(
    agent: str, caller: str, good_input: bool, running: int, repeated: bool
) -> None:
    req = request(
        agent_id=agent,
        caller=caller,
        input=GOOD if good_input else {"material": 1},
        source="agent",
        parent_run_id="run-1",
        idempotency_key="k1" if repeated else "fresh",
    )
    result = decide(req, running=running, known="inv-1")
    if repeated:
        expected: object = Existing("inv-1")
    elif agent == "nope":
        expected = "subagent_not_found"
    elif caller not in ("alpha", "cli"):
        expected = "subagent_caller_not_allowed"
    elif not good_input:
        expected = "subagent_input_invalid"
    elif running >= 4:
        expected = "subagent_concurrency_limit"
    else:
        expected = Admitted(ANALYST)
    if isinstance(expected, str):
        assert isinstance(result, Refused) and result.code == expected
    else:
        assert result == expected
