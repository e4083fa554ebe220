"""`invoke_adapter`: run a discovered adapter for one of its capabilities (issue 15): a CLI
program, an MCP server's tool, or an HTTP adapter's endpoint (ADR 0054).

The daemon decides whether this agent may (its `[agents.<alias>] adapters`, its risk
profile, the capability's side effect); when the capability has side effects under a
supervised profile, the tool asks on the turn's channel first, and the daemon runs it only
if its own turn service saw that question answered yes (ADR 0052). The daemon admits the
call again and runs the program: in this agent's workspace, with a scrubbed
environment and a private home, under a Landlock ruleset built from this agent's own path
rules (`adapter_ruleset`: the program, its loader and its interpreters executable; the
workspace read-only for a readonly agent), with the adapter's timeout and output cap. The
input is the program's last argument, never through a shell. An HTTP adapter is called by
the daemon (one POST of the capability and the input as JSON, only to an endpoint this
agent's risk profile lists in `allowed_endpoints`, its credential never in this process);
its reply is the output, a status other than 2xx an `http_status` failure with the status.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..policy import PathRules, program_executables
from ..turns import (
    AdapterAdmission,
    AdapterCall,
    AdapterInvoke,
    AdapterResult,
    adapter_approval_question,
    adapter_retryable,
)
from ._base import ToolResult, as_tool_error
from ._shell import program_ruleset
from ._toolset import Tool, ToolContext

ADAPTER_TOOL = "invoke_adapter"
MAX_INPUT_CHARS = 32 * 1024


class InvokeAdapterArgs(msgspec.Struct, frozen=True):
    adapter: Annotated[
        str,
        msgspec.Meta(
            description="The adapter's id; empty to let the daemon pick one for `capability` "
            "(a business alias such as github.issue.create, or a side-effect-free capability)."
        ),
    ]
    input: Annotated[
        str,
        msgspec.Meta(
            description="What to ask it: a program's last argument, an HTTP adapter's `input`."
        ),
    ]
    capability: Annotated[
        str | None,
        msgspec.Meta(description="Which of its capabilities (needed when it has several)."),
    ] = None
    tool: Annotated[
        str | None,
        msgspec.Meta(
            description="For an MCP server adapter: the tool to call; `input` is then its "
            "arguments as a JSON object."
        ),
    ] = None


def adapter_ruleset(rules: PathRules, program: str, path: str, home: str) -> int:
    """A Landlock ruleset fd for one adapter program run for an agent with these rules:
    like its shell commands' (ADR 0012), with the program's interpreters executable."""
    return program_ruleset(rules, program_executables(program, path), home)


async def invoke_adapter(ctx: ToolContext, args: InvokeAdapterArgs) -> ToolResult:
    if len(args.input) > MAX_INPUT_CHARS:
        return ToolResult.refused("bad_arguments", f"input over {MAX_INPUT_CHARS} characters")
    if "\x00" in args.input:
        return ToolResult.refused("bad_arguments", "input contains a NUL character")
    admitted = await ctx.reach.adapter(
        "admit", AdapterCall(args.adapter, args.capability, args.tool)
    )
    if not admitted.ok:
        return _with_retryable(admitted)
    admission = msgspec.convert(admitted.data, AdapterAdmission)
    # The daemon runs it only if it saw this turn's question answered yes (ADR 0052); a
    # no here saves the round trip.
    question = adapter_approval_question(admission, args.input)
    if admission.needs_approval and not await ctx.approved(question):
        return ToolResult.refused("approval_denied", "the operator did not approve")
    ran = await ctx.reach.adapter(
        "invoke",
        AdapterInvoke(
            admission.adapter, args.input, admission.capability, ctx.turn, admission.tool or None
        ),
    )
    if not ran.ok:
        return _with_retryable(ran)
    result = msgspec.convert(ran.data, AdapterResult)
    data: dict[str, object] = {
        "adapter": result.adapter,
        "capability": result.capability,
        "exit_code": result.exit_code,
        "truncated": result.truncated,
    }
    if admission.tool:
        data["tool"] = admission.tool
    if result.status:
        data["status"] = result.status
    if result.error:
        data["retryable"] = result.retryable
        code = as_tool_error(result.error, "mcp_tool_error")
        detail = result.detail[:500] or result.output[:500] or code
        return ToolResult(False, result.output, code, detail, data)
    if result.timed_out:
        data["retryable"] = True
        return ToolResult(
            False, result.output, "timeout", "the adapter was killed on its timeout", data
        )
    if result.exit_code != 0:
        data["retryable"] = False
        return ToolResult(
            False, result.output, "exit_status", f"exit code {result.exit_code}", data
        )
    return ToolResult(True, result.output, data=data)


def _with_retryable(result: ToolResult) -> ToolResult:
    """A refusal or failure of the daemon's, with whether asking again may help."""
    return ToolResult(
        result.ok,
        result.output,
        result.error_code,
        result.detail,
        {**result.data, "retryable": adapter_retryable(result.error_code)},
    )


INVOKE_ADAPTER: Tool[InvokeAdapterArgs] = Tool(
    ADAPTER_TOOL,
    "Run a discovered adapter (a local program such as codex, or an HTTP service) for one of "
    "its capabilities, with your text as its input, or call a tool of a registered MCP "
    "server (name the tool; the input is its arguments as a JSON object). Only adapters "
    "your config lists; the daemon may refuse, and side effects may need the operator's "
    "approval. A failure says whether it is retryable.",
    InvokeAdapterArgs,
    invoke_adapter,
)
