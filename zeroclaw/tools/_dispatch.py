"""The tools that reach sub-agents (issue 12): `agent_catalog`, `agent_dispatch`, and the
facade tools an agent's config names (a dispatch with a fixed target).

The tools only speak to `Reach.subagent`; the daemon's dispatch service decides who may call
whom, checks the input against the sub-agent's schema and enforces its timeout. What a tool
adds is how the model reads the answer: the catalog as text, a result as compact JSON, and a
sub-agent that did not succeed as a refusal with the invocation's error code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import msgspec

from ..turns import (
    TERMINAL_STATES,
    CatalogAnswer,
    CatalogCall,
    CatalogEntry,
    DispatchAnswer,
    DispatchCall,
)
from ._adapter import INVOKE_ADAPTER
from ._base import ToolErrorCode, ToolResult, as_tool_error
from ._reminders import REMINDER_TOOLS
from ._skills import skill_tool
from ._toolset import Tool, ToolContext, Toolset

CATALOG_TOOL = "agent_catalog"
DISPATCH_TOOL = "agent_dispatch"
DISPATCH_TOOL_NAMES = (CATALOG_TOOL, DISPATCH_TOOL)

SCHEMA_SUMMARY_CHARS = 600  # an input schema the summary cannot describe, shown this far

Task = Annotated[str, msgspec.Meta(description="What the sub-agent should do.")]
Input = Annotated[
    dict[str, Any] | None,
    msgspec.Meta(
        description="Structured input, when the sub-agent's catalog entry asks for some "
        "(it is checked against the sub-agent's input schema)."
    ),
]


class CatalogArgs(msgspec.Struct, frozen=True):
    pass


AgentId = Annotated[str, msgspec.Meta(description="The sub-agent's id (see agent_catalog).")]


class DispatchArgs(msgspec.Struct, frozen=True):
    agent_id: AgentId = msgspec.field(name="agentId")
    task: Task
    input: Input = None


class FacadeArgs(msgspec.Struct, frozen=True):
    task: Task
    input: Input = None


# --------------------------------------------------------------------------- rendering


def _type_of(schema: object) -> str:
    if not isinstance(schema, dict):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if isinstance(kind, str):
        if kind == "array":
            return f"array of {_type_of(schema.get('items'))}"
        return kind
    if "enum" in schema and isinstance(schema["enum"], list):
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    return "any"


def schema_summary(schema: Mapping[str, Any] | None) -> str:
    """What a caller must pass as `input`, in one line a model reads at a glance: the
    properties of an object schema with their types and which are required; any other
    schema as its compact JSON, bounded."""
    if schema is None:
        return "none (the task text is all it takes)"
    properties = schema.get("properties")
    if schema.get("type") == "object" and isinstance(properties, dict):
        required = schema.get("required")
        needed = set(required) if isinstance(required, list) else set()
        fields = []
        for name, prop in properties.items():
            text = f"{name}: {_type_of(prop)}"
            if name in needed:
                text += " (required)"
            if isinstance(prop, dict) and isinstance(prop.get("description"), str):
                text += f" - {prop['description']}"
            fields.append(text)
        return "object {" + "; ".join(fields) + "}" if fields else "an object"
    text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    if len(text) > SCHEMA_SUMMARY_CHARS:
        text = text[:SCHEMA_SUMMARY_CHARS] + "..."
    return f"JSON matching {text}"


def render_catalog(entries: Iterable[CatalogEntry]) -> str:
    lines = []
    for entry in entries:
        lines.append(f"{entry.id}: {entry.description}")
        lines.append(f"  input: {schema_summary(entry.input_schema)}")
        if entry.output_schema is not None:
            lines.append("  returns: JSON matching its output schema")
    return "\n".join(lines) if lines else "no sub-agent is available to this agent"


def compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# The invocation's own code when the daemon gave none, by how it ended.
_STATE_CODES: dict[str, ToolErrorCode] = {
    "failed": "subagent_runtime_failed",
    "timed_out": "subagent_timed_out",
    "cancelled": "subagent_cancelled",
    "interrupted": "daemon_restarted",
}


def dispatch_result(answer: DispatchAnswer) -> ToolResult:
    """How an ended invocation reads to the model: the result, or a refusal with why."""
    data = msgspec.to_builtins(answer)
    if answer.state == "succeeded":
        # A sub-agent without an output schema answers in free text.
        output = answer.reply if answer.output is None else compact_json(answer.output)
        return ToolResult(True, output, data=data)
    if answer.state not in TERMINAL_STATES:
        return ToolResult(
            False, "", "malformed", f"the daemon answered while the invocation was {answer.state}"
        )
    code = as_tool_error(answer.error_code, _STATE_CODES[answer.state])
    detail = answer.error_detail or f"the invocation ended {answer.state}"
    if answer.error_pointer is not None:
        detail += f" (at {answer.error_pointer or '/'})"
    return ToolResult(False, "", code, f"{answer.invocation_id}: {detail}", data)


# --------------------------------------------------------------------------- tools


def _answer(result: ToolResult, kind: type[msgspec.Struct]) -> Any:
    """The Reach's decoded answer (its `data`) as its struct."""
    return msgspec.convert(result.data, kind)


async def _catalog(ctx: ToolContext, args: CatalogArgs) -> ToolResult:
    result = await ctx.reach.subagent("catalog", CatalogCall())
    if not result.ok:
        return result
    answer: CatalogAnswer = _answer(result, CatalogAnswer)
    return ToolResult(True, render_catalog(answer.entries), data=result.data)


async def dispatch(ctx: ToolContext, agent_id: str, task: str, input: object) -> ToolResult:
    """Hand `agent_id` a task and wait until its invocation ended."""
    result = await ctx.reach.subagent("dispatch", DispatchCall(agent_id, task, input))
    if not result.ok:
        return result
    return dispatch_result(_answer(result, DispatchAnswer))


async def _dispatch(ctx: ToolContext, args: DispatchArgs) -> ToolResult:
    return await dispatch(ctx, args.agent_id, args.task, args.input)


AGENT_CATALOG = Tool(
    CATALOG_TOOL,
    "List the sub-agents this agent may dispatch tasks to: id, what each does, and the "
    "input each needs.",
    CatalogArgs,
    _catalog,
)
AGENT_DISPATCH = Tool(
    DISPATCH_TOOL,
    "Hand a task (and input, if the sub-agent needs some) to a sub-agent and wait for its result.",
    DispatchArgs,
    _dispatch,
)


def facade_tool(name: str, agent_id: str) -> Tool[FacadeArgs]:
    """A one-purpose tool: `agent_dispatch` with `agentId` fixed to `agent_id`."""

    async def run(ctx: ToolContext, args: FacadeArgs) -> ToolResult:
        return await dispatch(ctx, agent_id, args.task, args.input)

    return Tool(
        name,
        f"Hand a task to the sub-agent {agent_id!r} and wait for its result "
        f"(a dispatch to {agent_id}).",
        FacadeArgs,
        run,
    )


def agent_toolset(
    base: Toolset,
    *,
    dispatch_tools: bool,
    facades: Mapping[str, str],
    adapters: bool = False,
    skills: Sequence[tuple[str, str]] = (),
    reminders: bool = False,
    name: str = "agent",
) -> Toolset:
    """`base`, then `agent_catalog`/`agent_dispatch` when the agent may dispatch, then one
    facade tool per entry (by name), then `invoke_adapter` when it lists adapters, then
    `skill_read` over its loaded `skills` ((name, folder) pairs) when it has any, then the
    reminder tools when its risk profile grants them. A
    facade's name is never a tool of `base`, a dispatch tool, invoke_adapter or
    skill_read: the config refuses that, and `Toolset` raises if it happened anyway."""
    extra: list[Tool[Any]] = [AGENT_CATALOG, AGENT_DISPATCH] if dispatch_tools else []
    extra.extend(facade_tool(tool, target) for tool, target in sorted(facades.items()))
    if adapters:
        extra.append(INVOKE_ADAPTER)
    if skills:
        extra.append(skill_tool(skills))
    if reminders:  # its risk profile grants `reminders` (issue 28)
        extra.extend(REMINDER_TOOLS)
    if not extra:
        return base
    return Toolset(name, (*base, *extra))
