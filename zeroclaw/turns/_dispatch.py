"""What an agent and the daemon say to each other about sub-agents, as typed bus bodies.

Agent -> daemon: requests to the `SUBAGENT_SERVICE` service. The caller is the router's
authenticated identity of the sending agent, never a field here (issue 12).
  op "catalog"   body `CatalogCall`   -> `CatalogAnswer` (ids, descriptions, input schemas)
  op "dispatch"  body `DispatchCall`  -> `DispatchAnswer` once the invocation ended (or was
                                          refused: `ok=False`, `error` = a refusal code)
The sub-agent runtime itself speaks the turn service's wire (`TurnInput` in, `TurnEventPost`
out, its result in `TurnDone.result`); these bodies are for the agents that call it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .._ops import Operation

SUBAGENT_SERVICE = "subagent"

# The life of one invocation (persisted by the daemon; see zeroclaw.subagents).
InvocationState = Literal[
    "accepted", "running", "succeeded", "failed", "timed_out", "cancelled", "interrupted"
]
TERMINAL_STATES: frozenset[str] = frozenset(
    {"succeeded", "failed", "timed_out", "cancelled", "interrupted"}
)


class CatalogCall(msgspec.Struct, frozen=True):
    """The body of op "catalog" (nothing to say: the caller is who the router says)."""


class CatalogEntry(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a caller may know of a sub-agent: never its prompt, skills or anything secret."""

    id: str
    description: str
    input_schema: dict[str, object] | None = None  # a JSON Schema document
    output_schema: dict[str, object] | None = None  # a JSON Schema document


class CatalogAnswer(msgspec.Struct, frozen=True):
    entries: list[CatalogEntry]


class DispatchCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """The body of op "dispatch": hand `agent_id` a task, wait for its result."""

    agent_id: str
    task: str
    input: object = None  # a JSON value
    idempotency_key: str | None = None


class DispatchAnswer(msgspec.Struct, frozen=True, omit_defaults=True):
    """How the invocation ended. `output` is the schema-valid result of a `succeeded` one."""

    invocation_id: str
    state: InvocationState
    output: object = None  # a JSON value
    reply: str = ""
    error_code: str | None = None
    error_detail: str = ""
    error_pointer: str | None = None


# The sub-agent service's operations. Refusal codes: the dispatch pipeline's
# (zeroclaw.subagents.DispatchRefusalCode), "bad_request" and "internal_error".
SUBAGENT_CATALOG = Operation(SUBAGENT_SERVICE, "catalog", CatalogCall, CatalogAnswer)
SUBAGENT_DISPATCH = Operation(SUBAGENT_SERVICE, "dispatch", DispatchCall, DispatchAnswer)
SUBAGENT_OPERATIONS = (SUBAGENT_CATALOG, SUBAGENT_DISPATCH)
