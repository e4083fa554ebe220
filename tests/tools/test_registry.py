"""The tool registry: each tool is one object (spec, argument struct, run), a toolset is a
value, providers render exactly the specs of the toolset a turn runs with, and the offline
grammar maps to tools of the default toolset."""

from __future__ import annotations

import typing
from pathlib import Path

import msgspec
import pytest

from tests.agent.helpers import local_engine
from tests.providers.protocol_server import TEXT, TOOL_CALL, ScriptedServer
from tests.providers.test_network import make
from zeroclaw.providers import GRAMMAR_TOOLS, OfflineProvider, grammar_help, parse
from zeroclaw.providers._anthropic import anthropic_tools
from zeroclaw.providers._openai import openai_tools
from zeroclaw.tools import (
    DEFAULT_TOOLSET,
    BadArguments,
    Tool,
    ToolContext,
    ToolResult,
    Toolset,
)

TOOL_NAMES = [t.name for t in DEFAULT_TOOLSET]


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_default_tool_has_a_spec_matching_its_argument_struct(name: str) -> None:
    tool = DEFAULT_TOOLSET.get(name)
    assert tool is not None and tool.spec.name == name and tool.spec.description
    assert issubclass(tool.args, msgspec.Struct)
    fields = msgspec.structs.fields(tool.args)
    schema = tool.spec.parameters
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert list(schema["properties"]) == [f.name for f in fields]
    # Optional arguments (memory_recall's namespaces, memory_forget's key or id) have a default.
    assert schema.get("required", []) == [f.name for f in fields if f.required]
    for prop in schema["properties"].values():
        kinds = [prop] if "type" in prop else prop["anyOf"]
        assert {k["type"] for k in kinds} <= {"string", "array", "null"}
        assert prop.get("description") or kinds[0].get("description"), prop


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_default_tool_decodes_good_arguments_and_refuses_bad_ones(name: str) -> None:
    tool = DEFAULT_TOOLSET.get(name)
    assert tool is not None
    params = tool.spec.parameters
    good = {field: "x" for field in params.get("required", [])} or {
        next(iter(params["properties"])): "x"  # memory_forget: a key or an id
    }
    decoded = msgspec.structs.asdict(tool.decode({**good, "extra": 1}))
    assert {k: v for k, v in decoded.items() if v is not None} == good  # extras ignored
    for bad in ({}, [], "x", {**good, next(iter(good)): 7}, {"_unparsed": "{"}):
        with pytest.raises(BadArguments, match=name):
            tool.decode(bad)


def test_both_network_providers_render_every_spec_of_a_toolset() -> None:
    specs = DEFAULT_TOOLSET.specs
    openai = openai_tools(specs)
    anthropic = anthropic_tools(specs)
    assert [t["function"]["name"] for t in openai] == TOOL_NAMES
    assert [t["name"] for t in anthropic] == TOOL_NAMES
    for spec, o, a in zip(specs, openai, anthropic, strict=True):
        assert o == {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        assert a == {
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.parameters,
        }


def test_the_offline_grammar_names_only_tools_of_the_default_toolset() -> None:
    assert set(GRAMMAR_TOOLS) <= set(TOOL_NAMES)
    assert set(GRAMMAR_TOOLS) == set(TOOL_NAMES)  # every tool is reachable offline


def test_the_offline_help_offers_only_the_tools_of_the_toolset() -> None:
    offered = grammar_help({"file_read", "memory_recall"})
    assert offered == (
        "I understand: 'recall from ALIAS,ALIAS: QUERY', 'recall QUERY', 'read PATH', "
        "'history', 'context'."
    )
    assert grammar_help(()) == "I understand: 'history', 'context'."
    # Every form the help offers parses to its own tool (the last two call none).
    for tool in TOOL_NAMES:
        forms = grammar_help({tool}).removeprefix("I understand: ").split(", ")[:-2]
        for form in forms:
            example = form.strip("'").replace("[PATH]", "x").replace("ALIAS", "beta")
            example = example.replace("TEXT", "t").replace("QUERY", "q").replace("KEY", "k")
            example = example.replace("PATH", "p").replace("COMMAND", "ls")
            call = parse(example)
            assert call is not None and call.name == tool, (tool, form)


def test_a_toolset_is_a_value_with_its_own_order_and_subsets() -> None:
    peer = DEFAULT_TOOLSET.only({"memory_recall", "file_read", "no_such_tool"}, "peer_tools")
    assert peer.names() == ("file_read", "memory_recall")  # the set's order, known tools only
    assert peer.name == "peer_tools" and len(DEFAULT_TOOLSET) == len(TOOL_NAMES)
    assert [s.name for s in peer.specs] == ["file_read", "memory_recall"]
    with pytest.raises(ValueError, match="twice"):
        Toolset("dup", [*DEFAULT_TOOLSET, DEFAULT_TOOLSET.get("shell")])  # type: ignore[list-item]


def test_the_config_names_exactly_the_default_tools() -> None:
    from zeroclaw.config._models import ToolName

    assert set(typing.get_args(ToolName)) == set(TOOL_NAMES)


class EchoArgs(msgspec.Struct, frozen=True):
    text: typing.Annotated[str, msgspec.Meta(description="What to echo.")]


async def _echo(ctx: ToolContext, args: EchoArgs) -> ToolResult:
    return ToolResult(True, f"echo: {args.text} (depth {ctx.depth})")


ECHO = Tool("echo", "Say it back.", EchoArgs, _echo)


async def test_a_runtime_given_its_own_toolset_offers_and_runs_only_those_tools(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """A new tool is one object in a toolset: no engine or provider change."""
    server.answers += [
        TOOL_CALL["openai"]("c1", "echo", {"text": "hi"}),
        TEXT["openai"]("said"),
        TOOL_CALL["openai"]("c2", "file_read", {"path": "notes.txt"}),
        TEXT["openai"]("no"),
        TOOL_CALL["openai"]("c3", "no_such_tool", {}),
        TEXT["openai"]("no"),
    ]
    async with local_engine(
        make("openai", server.url), tmp_path, toolset=Toolset("custom", [ECHO])
    ) as (engine, _):
        echoed = await engine.run_turn("echo hi")
        # A tool outside every toolset of this engine is unknown, not "not granted".
        unknown_read = await engine.run_turn("read my notes")
        unknown = await engine.run_turn("anything")
    assert [t["function"]["name"] for t in server.seen[0].body["tools"]] == ["echo"]
    assert echoed.tool_calls[0].ok
    assert server.seen[1].body["messages"][-1]["content"] == "echo: hi (depth 0)"
    assert unknown_read.tool_calls[0].error_code == "bad_arguments"
    assert unknown.tool_calls[0].error_code == "bad_arguments"


async def test_a_peer_toolset_is_all_the_provider_is_told_of(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers += [TEXT["openai"]("hello"), TEXT["openai"]("hello")]
    async with local_engine(make("openai", server.url), tmp_path) as (engine, _):
        await engine.run_turn("hi", toolset=engine.toolset.only({"file_read"}, "peer_tools"))
        await engine.run_turn("hi", toolset=engine.toolset.only((), "peer_tools"))
    assert [t["function"]["name"] for t in server.seen[0].body["tools"]] == ["file_read"]
    assert "tools" not in server.seen[1].body  # nothing to offer: no `tools` at all


async def test_the_offline_help_in_a_turn_lists_the_turns_tools(tmp_path: Path) -> None:
    async with local_engine(OfflineProvider(), tmp_path) as (engine, _):
        full = await engine.run_turn("help")
        peer = await engine.run_turn("help", toolset=engine.toolset.only({"file_read"}, "p"))
    assert "'run COMMAND'" in full.reply and "'read PATH'" in full.reply
    assert peer.reply == "I understand: 'read PATH', 'history', 'context'."
