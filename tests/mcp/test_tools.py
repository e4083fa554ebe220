"""Which MCP tools are offered, how a result reads, and the Tool each becomes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.mcp import ListedTool, McpTool, offered_tools, render_result
from zeroclaw.mcp._tools import (
    MAX_PINNED_TOOLS,
    MAX_TOOL_SPEC_BYTES,
    mcp_tool,
    oversized,
    pin_order,
    spec_bytes,
)
from zeroclaw.tools import BadArguments, ToolResult
from zeroclaw.turns import tool_digest

SCHEMA = {"type": "object", "properties": {"timezone": {"type": "string"}}}
LISTED = (
    ListedTool("get_current_time", "Now.", SCHEMA, read_only=True),
    ListedTool("convert_time", "Convert.", SCHEMA, read_only=False),
    ListedTool("secret", "Not allowed.", SCHEMA, read_only=True),
)


def names(tools: tuple[ListedTool, ...]) -> list[str]:
    return [t.name for t in tools]


def test_offered_is_the_allowlist_and_the_pin_and_for_readonly_the_read_only_ones() -> None:
    allow = ("get_current_time", "convert_time")
    assert names(offered_tools(LISTED, allowlist=allow, pinned=None, readonly_agent=False)) == [
        "get_current_time",
        "convert_time",
    ]
    assert names(offered_tools(LISTED, allowlist=allow, pinned=None, readonly_agent=True)) == [
        "get_current_time"
    ]
    pinned = frozenset({"convert_time", "secret"})
    assert names(offered_tools(LISTED, allowlist=allow, pinned=pinned, readonly_agent=False)) == [
        "convert_time"
    ]
    assert offered_tools(LISTED, allowlist=(), pinned=None, readonly_agent=False) == ()


def test_an_allowed_tool_over_the_size_bound_is_not_offered_and_is_named() -> None:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}}
    listed = (
        *LISTED,
        ListedTool("bloat", "x" * MAX_TOOL_SPEC_BYTES, {"type": "object"}, read_only=True),
        ListedTool("wide", "", wide, read_only=True),
        ListedTool("edge", "y" * (MAX_TOOL_SPEC_BYTES - 2), {}, read_only=True),  # "{}": 2
    )
    allow = ("get_current_time", "bloat", "wide", "edge")
    offered = offered_tools(listed, allowlist=allow, pinned=None, readonly_agent=False)
    assert names(offered) == ["get_current_time", "edge"]
    assert spec_bytes(listed[-1]) == MAX_TOOL_SPEC_BYTES
    assert oversized(listed, allow) == {
        "bloat": MAX_TOOL_SPEC_BYTES + len('{"type":"object"}'),
        "wide": spec_bytes(listed[-2]),
    }
    assert oversized(listed, ("get_current_time",)) == {}  # not allowed: nobody's business


def test_the_allowed_tools_are_pinned_first_however_many_the_server_lists() -> None:
    fillers = [ListedTool(f"f{i}", "", {}, read_only=False) for i in range(1000)]
    listed = (*fillers, *LISTED)
    pinned = pin_order(listed, ("secret", "get_current_time"))
    assert len(pinned) == MAX_PINNED_TOOLS
    assert names(pinned[:3]) == ["get_current_time", "secret", "f0"]  # the server's order
    assert names(pin_order(LISTED, ())) == names(LISTED)


def test_what_the_daemon_is_told_of_a_tool_is_its_digest() -> None:
    seen = LISTED[0].seen()
    assert seen.digest == tool_digest("get_current_time", "Now.", SCHEMA)
    assert (seen.name, seen.read_only, seen.description) == ("get_current_time", True, "Now.")


def test_a_result_is_its_texts_then_its_structured_content_as_json() -> None:
    assert render_result(["a", "b"], {"k": [1, 2]}, 100) == ('a\nb\n{"k":[1,2]}', False)
    assert render_result(["a"], None, 100) == ("a", False)
    assert render_result(["é" * 60], None, 100) == ("é" * 60, True)  # bytes, not characters


def test_a_text_that_restates_the_structured_content_is_read_once() -> None:
    weather = {"temperature": 36, "conditions": "drizzle", "humidity": 82}
    # server-everything's get-structured-content: the same object as text, and structured
    restated = '{"temperature":36,"conditions":"drizzle","humidity":82}'
    assert render_result([restated], weather, 1000) == (restated, False)
    # other spacing or key order restates it too; a text that says more stays
    spaced = '{ "humidity": 82, "temperature": 36,\n "conditions": "drizzle" }'
    assert render_result(["Chicago:", spaced], weather, 1000) == (f"Chicago:\n{restated}", False)
    other = '{"temperature": 37}'
    assert render_result([other], weather, 1000)[0] == f"{other}\n{restated}"
    assert render_result(["[1, 2]"], [1, 2], 100) == ("[1,2]", False)
    assert render_result(["{not json"], {}, 100) == ("{not json\n{}", False)


@given(
    structured=st.dictionaries(
        st.text(max_size=5),
        st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none()),
        max_size=4,
    ),
    texts=st.lists(st.text(max_size=8), max_size=3),
    indent=st.sampled_from([None, 1, 2]),
)
def test_the_structured_content_is_never_returned_twice(
    structured: dict[str, object], texts: list[str], indent: int | None
) -> None:
    compact = json.dumps(structured, separators=(",", ":"), ensure_ascii=False)
    again = json.dumps(structured, indent=indent, sort_keys=True)
    out, _ = render_result([*texts, again], structured, 1 << 20)
    assert out.endswith(compact)
    kept = [t for t in texts if t.lstrip()[:1] not in ("{", "[")]
    assert out == "\n".join([*kept, compact]) or len(kept) < len(texts)
    assert out.split("\n").count(compact) == 1 + texts.count(compact)


async def _call(server: str, tool: str, arguments: dict[str, Any]) -> ToolResult:
    return ToolResult(True, f"{server}/{tool}/{arguments}")


def test_the_tool_is_named_after_its_server_and_takes_the_servers_schema() -> None:
    tool = mcp_tool("time", LISTED[0], _call, readonly_agent=False)
    assert isinstance(tool, McpTool)
    assert tool.name == "mcp__time__get_current_time"
    assert tool.spec.parameters == SCHEMA
    assert tool.spec.description.startswith("[MCP time] Now.")
    assert tool.decode({"timezone": "UTC"}).arguments == {"timezone": "UTC"}
    try:
        tool.decode(["not", "an", "object"])
    except BadArguments as exc:
        assert "object" in str(exc)
    else:
        raise AssertionError("a list decoded")


def test_a_schema_that_is_not_an_object_is_offered_as_an_empty_object() -> None:
    odd = ListedTool("odd", "", {"type": "string"}, read_only=True)
    tool = mcp_tool("s", odd, _call, readonly_agent=False)
    assert tool.spec.parameters == {"type": "object", "properties": {}}


def test_the_engine_knows_the_config_s_mcp_tool_prefix() -> None:
    from zeroclaw.agent._turn import MCP_TOOL_PREFIX
    from zeroclaw.config import MCP_TOOL_PREFIX as CONFIGURED

    assert MCP_TOOL_PREFIX == CONFIGURED


def test_an_approval_question_shows_that_long_arguments_were_cut_and_their_digest() -> None:
    """Attack pass (issue 26): a model padding the start of its arguments must not push the
    dangerous part out of the operator's view unseen."""
    import hashlib
    import json

    from zeroclaw.mcp._tools import APPROVAL_ARGS_CHARS, approval_question

    short = approval_question("mcp__git__commit", {"message": "hi"})
    assert short == 'call mcp__git__commit {"message": "hi"}'
    padded = {"a_padding": "x" * 500, "z_command": "rm -rf /"}
    question = approval_question("mcp__sh__run", padded)
    whole = json.dumps(padded, ensure_ascii=True, sort_keys=True)
    assert "rm -rf" not in question  # cut off, and therefore said to be
    assert f"cut: {len(whole)} characters" in question
    assert hashlib.sha256(whole.encode()).hexdigest() in question
    assert len(question) < APPROVAL_ARGS_CHARS + 200
    # Bidi and control characters reach the operator escaped, never raw.
    sneaky = approval_question("mcp__t__x", {"p": "\u202eevil\x1b[2J"})
    assert "\u202e" not in sneaky and "\x1b" not in sneaky
