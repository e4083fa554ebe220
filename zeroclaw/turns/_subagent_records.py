"""What the daemon persists about sub-agents and what the control socket carries of them: one
record per invocation, its timeline of numbered events, one record per revision, and a
manifest's policy and MCP bindings.

One definition for both sides (issue 25): the daemon's sub-agent store keeps these in LMDB
as msgpack, and the control replies carry them as JSON, the same structs. Neutral (this
package loads no bus and no daemon code), so the control package and the CLI import them
without loading the sub-agent store or dispatch. Every field is encoded, defaults included:
`zeroclaw invocations --json` shows each one.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ._dispatch import InvocationState

# Why the daemon refuses a dispatch before anything runs (stable: the README lists them).
DispatchRefusalCode = Literal[
    "subagent_not_found",
    "subagent_caller_not_allowed",
    "subagent_input_invalid",
    "subagent_concurrency_limit",
    "subagent_idempotency_conflict",  # the key was used for another sub-agent, task or input
    "subagent_validation_timeout",  # validating the input outlived its bound; it was stopped
]

# Why an invocation did not succeed (stable: the README's error table lists them).
InvocationErrorCode = Literal[
    "subagent_output_invalid",  # the submitted result fails the output schema (with a pointer)
    "subagent_no_result",  # an output schema, and nothing submitted (free text does not count)
    "subagent_provider_error",  # the runtime's model request failed
    "subagent_runtime_failed",  # the runtime process exited, or could not start
    "subagent_timed_out",  # policy.timeoutSeconds passed; the runtime's turn was cancelled
    "subagent_cancelled",  # `zeroclaw invocations cancel`
    "daemon_restarted",  # the daemon stopped while it was accepted or running
    "subagent_validation_timeout",  # validating the result outlived its bound; it was stopped
    "subagent_internal_error",  # the daemon could not judge or record it (logged, with why)
]


class Policy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A sub-agent manifest's `policy` (ADR 0023), as the bundle declares it."""

    allowedCallers: tuple[str, ...] = ()  # default deny
    maxConcurrency: int = 1
    timeoutSeconds: float = 120.0
    maxToolCalls: int = 8


class McpBinding(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    server: str
    tools: tuple[str, ...] = ()


class RevisionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One immutable revision of a sub-agent: same digest, same revision."""

    agent_id: str
    digest: str
    snapshot: str  # <state_dir>/revisions/<digest>
    first_seen: float
    description: str = ""


class Invocation(msgspec.Struct, frozen=True, kw_only=True):
    """One dispatch, from `accepted` to its terminal state."""

    id: str
    agent_id: str
    digest: str  # the revision it runs, fixed at acceptance
    caller: str  # the router's (or control socket's) authenticated identity
    source: str  # idempotency scope: "agent:<alias>", "cli", "internal-workflow"
    task: str
    input: object = None  # the caller's JSON value, checked against the input schema
    parent_run_id: str | None = None
    idempotency_key: str | None = None
    state: InvocationState = "accepted"
    created_at: float
    updated_at: float
    attempt: int = 1
    retry_of: str | None = None  # the interrupted invocation this one re-runs
    retried_by: str | None = None  # the invocation that re-ran this one
    output: object = None  # the runtime's JSON result, checked against the output schema
    reply: str = ""  # the runtime's free text (kept, but never the result of a schema)
    error_code: InvocationErrorCode | None = None
    error_detail: str = ""
    error_pointer: str | None = None  # a JSON pointer into the output, for schema failures
    last_seq: int = 0  # the newest event's sequence number


# --- the timeline: one tagged union, numbered per invocation ------------------------------


class _Body(msgspec.Struct, frozen=True, tag_field="kind"):
    pass


class StateEntered(_Body, tag="state", frozen=True):
    state: InvocationState
    error_code: InvocationErrorCode | None = None
    detail: str = ""


class TextDelta(_Body, tag="delta", frozen=True):
    text: str


class ToolCalled(_Body, tag="tool", frozen=True):
    name: str
    args: dict[str, object]  # the model's JSON arguments, as it sent them (ToolUsed.args)
    ok: bool
    error_code: str | None = None


EventBody = StateEntered | TextDelta | ToolCalled


class InvocationEvent(msgspec.Struct, frozen=True):
    invocation_id: str
    seq: int  # 1, 2, ... per invocation, in the order persisted
    at: float
    body: EventBody
