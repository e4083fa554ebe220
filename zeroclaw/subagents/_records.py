"""What the daemon persists about sub-agents, and what `zeroclaw invocations` shows: one
record per invocation, its timeline of numbered events, and one record per revision.

msgspec structs: they cross the control socket as JSON and live in LMDB as msgpack.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..turns import InvocationState

SCHEMA_VERSION = 1  # of every listing the CLI prints (`schema_version`)

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

# Who may be a caller besides an agent alias (allowedCallers).
CLI_CALLER = "cli"
WORKFLOW_CALLER = "internal-workflow"


class RevisionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One immutable revision of a sub-agent: same digest, same revision."""

    agent_id: str
    digest: str
    snapshot: str  # <state_dir>/revisions/<digest>
    first_seen: float
    description: str = ""


class Invocation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One dispatch, from `accepted` to its terminal state."""

    id: str
    agent_id: str
    digest: str  # the revision it runs, fixed at acceptance
    caller: str  # the router's (or control socket's) authenticated identity
    source: str  # idempotency scope: "agent:<alias>", "cli", "internal-workflow"
    task: str
    input: Any = None
    parent_run_id: str | None = None
    idempotency_key: str | None = None
    state: InvocationState = "accepted"
    created_at: float
    updated_at: float
    attempt: int = 1
    retry_of: str | None = None  # the interrupted invocation this one re-runs
    retried_by: str | None = None  # the invocation that re-ran this one
    output: Any = None
    reply: str = ""  # the runtime's free text (kept, but never the result of a schema)
    error_code: InvocationErrorCode | None = None
    error_detail: str = ""
    error_pointer: str | None = None  # a JSON pointer into the output, for schema failures
    last_seq: int = 0  # the newest event's sequence number


# --- the timeline: one tagged union, numbered per invocation ------------------------------


class _Body(msgspec.Struct, frozen=True, tag_field="kind", omit_defaults=True):
    pass


class StateEntered(_Body, tag="state", frozen=True):
    state: InvocationState
    error_code: InvocationErrorCode | None = None
    detail: str = ""


class TextDelta(_Body, tag="delta", frozen=True):
    text: str


class ToolCalled(_Body, tag="tool", frozen=True):
    name: str
    args: dict[str, Any]
    ok: bool
    error_code: str | None = None


EventBody = StateEntered | TextDelta | ToolCalled


class InvocationEvent(msgspec.Struct, frozen=True):
    invocation_id: str
    seq: int  # 1, 2, ... per invocation, in the order persisted
    at: float
    body: EventBody
