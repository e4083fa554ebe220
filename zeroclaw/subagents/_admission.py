"""The dispatch pipeline's admission, in its order, as pure code (issue 12, Deliver 4).

idempotency -> the sub-agent exists -> caller policy -> input schema -> concurrency. The
first step that decides ends it: a repeated `(source, parent_run_id, idempotency_key)`
returns the existing invocation before anything else is looked at, so nothing runs twice.
The caller is the router's authenticated identity (an agent alias, `cli`, or
`internal-workflow`), never a field of the request body; `allowedCallers` is a default-deny
list. Concurrency is a hard refusal, not a queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .._schema_check import Invalid, Outcome, OutOfBound, Unusable
from ..turns import DispatchRefusalCode
from ._bundle import Bundle
from ._schema import check_instance

IdempotencyKey = tuple[str, str | None, str]  # (source, parent_run_id, idempotency_key)


@dataclass(frozen=True)
class DispatchRequest:
    agent_id: str
    caller: str  # who the router says is asking
    input: object
    source: str = ""
    parent_run_id: str | None = None
    idempotency_key: str | None = None

    @property
    def key(self) -> IdempotencyKey | None:
        if self.idempotency_key is None:
            return None
        return (self.source, self.parent_run_id, self.idempotency_key)


@dataclass(frozen=True)
class Existing:
    """The same request was dispatched before: its invocation, nothing new runs."""

    invocation_id: str


@dataclass(frozen=True)
class Refused:
    code: DispatchRefusalCode
    detail: str
    pointer: str | None = None  # a JSON pointer into the input, for schema failures


@dataclass(frozen=True)
class Admitted:
    bundle: Bundle


Admission = Existing | Refused | Admitted


def admit(
    request: DispatchRequest,
    *,
    bundles: Mapping[str, Bundle],
    invocations_by_key: Mapping[IdempotencyKey, str],
    running: Mapping[str, int],
    checked: Outcome | None = None,
) -> Admission:
    """Decide one dispatch. `running`: invocations now accepted or running, per sub-agent.
    `checked`: the input already validated against the input schema by a worker (the
    daemon's way, ADR 0046); without it the input is validated here."""
    key = request.key
    if key is not None and key in invocations_by_key:
        return Existing(invocations_by_key[key])
    bundle = bundles.get(request.agent_id)
    if bundle is None:
        return Refused("subagent_not_found", f"no sub-agent {request.agent_id!r}")
    policy = bundle.manifest.policy
    if request.caller not in policy.allowedCallers:
        return Refused(
            "subagent_caller_not_allowed",
            f"{request.caller!r} is not in {request.agent_id}'s allowedCallers",
        )
    if bundle.input_schema is not None:
        if checked is None:
            checked = check_instance(bundle.input_schema, request.input)
        if isinstance(checked, Invalid):
            return Refused("subagent_input_invalid", checked.message, checked.pointer)
        if isinstance(checked, Unusable):
            detail = f"the input schema cannot be applied: {checked.detail}"
            return Refused("subagent_input_invalid", detail)
        if isinstance(checked, OutOfBound):
            return Refused("subagent_validation_timeout", checked.detail)
    if running.get(request.agent_id, 0) >= policy.maxConcurrency:
        return Refused(
            "subagent_concurrency_limit",
            f"{request.agent_id} already runs {policy.maxConcurrency} invocation(s), its limit",
        )
    return Admitted(bundle)
