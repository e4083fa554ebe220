"""The sub-agent tools (issue 12): `agent_catalog` renders what a caller may know,
`agent_dispatch` and the facade tools hand a task over `Reach.subagent` and read the ended
invocation (a result, or a refusal with its code), and an agent's toolset has them exactly
when its spec grants them.

The Reach here is a test double scripted with what the daemon's service answers: the tool is
the unit under test; `tests/agent/test_subagent_reach.py` runs `BusReach` over a real router.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import msgspec
import pytest

from tests.agent.helpers import agent_spec, local_engine
from zeroclaw._ops import Operation
from zeroclaw.agent import AgentSpec, SubagentRuntime
from zeroclaw.agent._process import toolset_for
from zeroclaw.agent._turn import TurnEngine
from zeroclaw.cli._local_reach import LocalReach
from zeroclaw.policy import rules_for
from zeroclaw.providers import Conversation, OnDelta, Step, ToolCall
from zeroclaw.tools import (
    AGENT_CATALOG,
    AGENT_DISPATCH,
    DEFAULT_TOOLSET,
    DISPATCH_TOOL_NAMES,
    ERROR_CODES,
    BadArguments,
    ShellSettings,
    ToolContext,
    ToolResult,
    agent_toolset,
    facade_tool,
    schema_summary,
)
from zeroclaw.turns import (
    CatalogAnswer,
    CatalogCall,
    CatalogEntry,
    DispatchAnswer,
    DispatchCall,
)

INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to analyse."},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["text"],
}
CATALOG = CatalogAnswer(
    [
        CatalogEntry("summarizer", "Summarise a text.", output_schema={"type": "object"}),
        CatalogEntry("content-analyst", "Analyse content.", input_schema=INPUT_SCHEMA),
    ]
)


def answered(answer: msgspec.Struct) -> ToolResult:
    """What BusReach returns for a service answer it decoded."""
    return ToolResult(True, data=msgspec.to_builtins(answer))


Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)


class ScriptedSubagents:
    """A Reach whose sub-agent service answers from a script; it records every call."""

    def __init__(self, *answers: ToolResult) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, CatalogCall | DispatchCall]] = []

    async def memory(self, op: Operation[Req, Ans], request: Req) -> Ans:
        # no history, and every append lands (a session's and an append's answer)
        return msgspec.convert({"turns": [], "seq": 0}, op.answer)

    async def message_peer(
        self,
        to: str,
        text: str,
        *,
        delegate: bool,
        depth: int,
        session: str = "default",
        turn: str | None = None,
    ) -> ToolResult:
        return ToolResult.refused("unavailable", "no peers here")

    async def subagent(
        self, op: Literal["catalog", "dispatch"], body: CatalogCall | DispatchCall
    ) -> ToolResult:
        self.calls.append((op, body))
        return self.answers.pop(0)


def context(tmp_path: Path, reach: ScriptedSubagents) -> ToolContext:
    return ToolContext(
        rules=rules_for(str(tmp_path), workspace_only=True, may_write=False),
        shell=ShellSettings(frozenset(), False, True, 1.0, {}),
        reach=reach,
        asks_approval=False,
    )


# --------------------------------------------------------------------------- catalog


async def test_the_catalog_lists_ids_descriptions_and_input_requirements(
    tmp_path: Path,
) -> None:
    reach = ScriptedSubagents(answered(CATALOG))
    result = await AGENT_CATALOG.run(context(tmp_path, reach), AGENT_CATALOG.decode({}))
    assert reach.calls == [("catalog", CatalogCall())]
    assert result.ok and result.data == msgspec.to_builtins(CATALOG)
    assert result.output.splitlines() == [
        "summarizer: Summarise a text.",
        "  input: none (the task text is all it takes)",
        "  returns: JSON matching its output schema",
        "content-analyst: Analyse content.",
        "  input: object {text: string (required) - The text to analyse.; tags: array of string}",
    ]


async def test_an_empty_catalog_says_so_and_a_refusal_passes_through(tmp_path: Path) -> None:
    reach = ScriptedSubagents(
        answered(CatalogAnswer([])), ToolResult.refused("unknown_service", "no subagent")
    )
    ctx = context(tmp_path, reach)
    empty = await AGENT_CATALOG.run(ctx, AGENT_CATALOG.decode({}))
    assert empty.ok and empty.output == "no sub-agent is available to this agent"
    refused = await AGENT_CATALOG.run(ctx, AGENT_CATALOG.decode({}))
    assert refused == ToolResult.refused("unknown_service", "no subagent")


def test_a_schema_summary_is_bounded_for_schemas_it_cannot_describe() -> None:
    assert schema_summary({"type": "object"}) == 'JSON matching {"type":"object"}'
    huge = {"anyOf": [{"const": "x" * 50} for _ in range(40)]}
    summary = schema_summary(huge)
    assert summary.startswith("JSON matching {") and summary.endswith("...")
    assert len(summary) < 700
    assert schema_summary({"type": "object", "properties": {"k": {"enum": [1, "a"]}}}) == (
        'object {k: one of 1, "a"}'
    )


# --------------------------------------------------------------------------- dispatch


def test_dispatch_arguments_are_agent_id_task_and_an_optional_object() -> None:
    params = AGENT_DISPATCH.spec.parameters
    assert list(params["properties"]) == ["agentId", "task", "input"]
    assert params["required"] == ["agentId", "task"] and params["additionalProperties"] is False
    args = AGENT_DISPATCH.decode({"agentId": "summarizer", "task": "t", "extra": 1})
    assert (args.agent_id, args.task, args.input) == ("summarizer", "t", None)
    assert AGENT_DISPATCH.decode({"agentId": "a", "task": "t", "input": {"k": 1}}).input == {"k": 1}
    for bad in ({"task": "t"}, {"agentId": "a"}, {"agentId": "a", "task": "t", "input": [1]}):
        with pytest.raises(BadArguments, match="agent_dispatch"):
            AGENT_DISPATCH.decode(bad)
    assert AGENT_CATALOG.spec.parameters["properties"] == {}


async def test_a_succeeded_dispatch_is_its_output_as_compact_json(tmp_path: Path) -> None:
    answer = DispatchAnswer("inv-1", "succeeded", output={"summary": "short", "n": 2})
    reach = ScriptedSubagents(answered(answer))
    args = AGENT_DISPATCH.decode(
        {"agentId": "content-analyst", "task": "analyse", "input": {"text": "hello"}}
    )
    result = await AGENT_DISPATCH.run(context(tmp_path, reach), args)
    assert reach.calls == [
        ("dispatch", DispatchCall("content-analyst", "analyse", {"text": "hello"}))
    ]
    assert result.ok and result.output == '{"summary":"short","n":2}'
    assert json.loads(result.output) == answer.output
    assert result.data == msgspec.to_builtins(answer)


async def test_a_succeeded_dispatch_without_output_schema_is_its_reply(tmp_path: Path) -> None:
    reach = ScriptedSubagents(answered(DispatchAnswer("inv-2", "succeeded", reply="In short: x")))
    args = AGENT_DISPATCH.decode({"agentId": "summarizer", "task": "sum up"})
    result = await AGENT_DISPATCH.run(context(tmp_path, reach), args)
    assert result.ok and result.output == "In short: x"


@pytest.mark.parametrize(
    ("answer", "code", "detail"),
    [
        (
            DispatchAnswer(
                "inv-3",
                "failed",
                error_code="subagent_output_invalid",
                error_detail="'n' is a required property",
                error_pointer="/result",
            ),
            "subagent_output_invalid",
            "inv-3: 'n' is a required property (at /result)",
        ),
        (
            DispatchAnswer(
                "inv-4", "timed_out", error_code="subagent_timed_out", error_detail="60s"
            ),
            "subagent_timed_out",
            "inv-4: 60s",
        ),
        # No code (or one this agent does not know): the state says which it is.
        (
            DispatchAnswer("inv-5", "timed_out"),
            "subagent_timed_out",
            "inv-5: the invocation ended timed_out",
        ),
        (
            DispatchAnswer("inv-6", "cancelled"),
            "subagent_cancelled",
            "inv-6: the invocation ended cancelled",
        ),
        (
            DispatchAnswer("inv-7", "interrupted", error_code="new_code"),
            "daemon_restarted",
            "inv-7: the invocation ended interrupted",
        ),
        (
            DispatchAnswer("inv-8", "failed"),
            "subagent_runtime_failed",
            "inv-8: the invocation ended failed",
        ),
        (
            DispatchAnswer("inv-9", "running"),
            "malformed",
            "the daemon answered while the invocation was running",
        ),
    ],
)
async def test_an_invocation_that_did_not_succeed_is_refused_with_its_code(
    tmp_path: Path, answer: DispatchAnswer, code: str, detail: str
) -> None:
    reach = ScriptedSubagents(answered(answer))
    args = AGENT_DISPATCH.decode({"agentId": "content-analyst", "task": "t"})
    result = await AGENT_DISPATCH.run(context(tmp_path, reach), args)
    assert not result.ok and result.output == ""
    assert (result.error_code, result.detail) == (code, detail)


@pytest.mark.parametrize(
    "code",
    [
        "subagent_not_found",
        "subagent_caller_not_allowed",
        "subagent_input_invalid",
        "subagent_concurrency_limit",
        "timeout",
    ],
)
async def test_a_refused_dispatch_passes_the_services_code_on(tmp_path: Path, code: str) -> None:
    refusal = ToolResult.refused(code, "detail /text")  # type: ignore[arg-type]
    reach = ScriptedSubagents(refusal)
    args = AGENT_DISPATCH.decode({"agentId": "x", "task": "t"})
    assert await AGENT_DISPATCH.run(context(tmp_path, reach), args) == refusal


def test_every_dispatch_refusal_and_invocation_code_is_a_tool_error_code() -> None:
    from zeroclaw.subagents import DispatchRefusalCode
    from zeroclaw.turns import InvocationErrorCode

    assert set(get_args(DispatchRefusalCode)) <= set(ERROR_CODES)
    assert set(get_args(InvocationErrorCode)) <= set(ERROR_CODES)


# --------------------------------------------------------------------------- facades


async def test_a_facade_is_a_dispatch_with_a_fixed_target(tmp_path: Path) -> None:
    tool = facade_tool("summarize", "summarizer")
    assert tool.name == "summarize" and "'summarizer'" in tool.description
    params = tool.spec.parameters
    assert list(params["properties"]) == ["task", "input"] and params["required"] == ["task"]
    reach = ScriptedSubagents(answered(DispatchAnswer("inv-1", "succeeded", output={"s": 1})))
    # A model's agentId is ignored: the facade's target is fixed.
    args = tool.decode({"task": "sum up", "agentId": "content-analyst"})
    result = await tool.run(context(tmp_path, reach), args)
    assert reach.calls == [("dispatch", DispatchCall("summarizer", "sum up"))]
    assert result.ok and result.output == '{"s":1}'


# --------------------------------------------------------------------------- toolsets


def spec_with(**fields: Any) -> AgentSpec:
    return msgspec.structs.replace(agent_spec(Path("/srv/ws")), **fields)


def test_an_agent_without_dispatch_rights_offers_neither_tool() -> None:
    toolset = toolset_for(spec_with())
    assert toolset is DEFAULT_TOOLSET
    assert not set(DISPATCH_TOOL_NAMES) & set(toolset.names())


def test_dispatch_rights_add_catalog_dispatch_then_facades_by_name() -> None:
    toolset = toolset_for(
        spec_with(dispatch_tools=True, facades={"summarize": "summarizer", "analyse": "a"})
    )
    assert toolset.names() == (
        *DEFAULT_TOOLSET.names(),
        "agent_catalog",
        "agent_dispatch",
        "analyse",
        "summarize",
    )
    assert [s.name for s in toolset.specs] == list(toolset.names())
    only_catalog = toolset_for(spec_with(dispatch_tools=True))
    assert only_catalog.names()[-2:] == DISPATCH_TOOL_NAMES


def test_a_subagent_runtime_never_gets_the_dispatch_tools() -> None:
    runtime = SubagentRuntime("summarizer", "d" * 64, "/srv/rev", 2, 60.0)
    spec = spec_with(dispatch_tools=True, facades={"summarize": "summarizer"}, subagent=runtime)
    assert toolset_for(spec) is DEFAULT_TOOLSET


def test_a_facade_named_like_another_tool_cannot_make_a_toolset() -> None:
    with pytest.raises(ValueError, match="twice"):
        agent_toolset(DEFAULT_TOOLSET, dispatch_tools=False, facades={"shell": "summarizer"})


# --------------------------------------------------------------------------- in the engine


class ScriptedProvider:
    """Each turn: asks for the next of the given tool calls, then answers with its result
    as `error_code|output`."""

    name = "scripted"

    def __init__(self, *calls: ToolCall) -> None:
        self.calls = list(calls)

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        self.offered = [spec.name for spec in conversation.tools]
        if not conversation.rounds and self.calls:
            return Step(tool_calls=(self.calls.pop(0),))
        last = conversation.rounds[-1].outcomes[0] if conversation.rounds else None
        return Step(text="" if last is None else f"{last.error_code}|{last.output}")

    async def aclose(self) -> None:
        return None


class LocalWithSubagents(LocalReach):
    """The in-process reach (real memory store), with a scripted sub-agent service."""

    script: ScriptedSubagents

    async def subagent(
        self, op: Literal["catalog", "dispatch"], body: CatalogCall | DispatchCall
    ) -> ToolResult:
        return await self.script.subagent(op, body)


async def test_dispatch_tools_count_as_actions_and_a_peer_gets_them_only_if_granted(
    tmp_path: Path,
) -> None:
    call = ToolCall("summarize", {"task": "sum up"})
    provider = ScriptedProvider(call, call)
    spec = spec_with(dispatch_tools=True, facades={"summarize": "summarizer"})
    async with local_engine(
        provider, tmp_path, runtime={"max_actions_per_hour": 1}, toolset=toolset_for(spec)
    ) as (engine, reach):
        engine.reach = local = LocalWithSubagents(reach.service, "alpha")
        local.script = ScriptedSubagents(answered(DispatchAnswer("i", "succeeded", reply="ok")))
        first = await engine.run_turn("go")
        assert "summarize" in provider.offered and "agent_dispatch" in provider.offered
        assert first.reply == "None|ok" and first.tool_calls[0].ok
        # The hourly budget of 1 is spent: the next dispatch is refused before it is made.
        second = await engine.run_turn("again")
        assert second.tool_calls[0].error_code == "rate_limited"
        assert len(local.script.calls) == 1
        # alpha's spec grants peers nothing: a peer's turn is not even told of the tools.
        assert not {"summarize", *DISPATCH_TOOL_NAMES} & set(engine.peer_toolset.names())


async def test_a_peer_turn_gets_a_facade_only_when_listed_in_peer_tools(tmp_path: Path) -> None:
    spec = spec_with(
        workspace=str(tmp_path),
        dispatch_tools=True,
        facades={"summarize": "summarizer"},
        peer_tools=("summarize",),
    )
    provider = ScriptedProvider(
        ToolCall("summarize", {"task": "sum up"}),
        ToolCall("agent_dispatch", {"agentId": "summarizer", "task": "t"}),
    )
    reach = ScriptedSubagents(answered(DispatchAnswer("i", "succeeded", reply="done")))
    engine = TurnEngine(spec, reach, provider, agent_env={}, toolset=toolset_for(spec))
    assert engine.peer_toolset.names() == ("summarize",)
    granted = await engine.run_turn("go", depth=1, toolset=engine.peer_toolset)
    assert provider.offered == ["summarize"] and granted.tool_calls[0].ok
    refused = await engine.run_turn("go", depth=1, toolset=engine.peer_toolset)
    assert refused.tool_calls[0].error_code == "tool_not_granted"
    assert reach.calls == [("dispatch", DispatchCall("summarizer", "sum up"))]


async def test_without_a_daemon_sub_agents_are_unavailable(tmp_path: Path) -> None:
    async with local_engine(ScriptedProvider(), tmp_path) as (_, reach):
        result = await reach.subagent("dispatch", DispatchCall("summarizer", "t"))
    assert result.error_code == "unavailable" and "only through the daemon" in result.detail
