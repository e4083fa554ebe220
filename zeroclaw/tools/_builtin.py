"""The agent's built-in tools, each one `Tool`, and the default toolset made of them.

Every tool gets its arguments already decoded into its struct, and the turn's
`ToolContext`; each checks its own policy (paths, commands, approvals, delegation) and
returns a typed result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

import msgspec
import trio

from .. import turns as memory_wire  # the memory service's wire (its ops share tool names)
from .._delegation import MAX_DELEGATION_DEPTH
from .._ops import CallRefused, Operation
from ..policy import check_path
from ._base import ToolResult, as_tool_error
from ._files import file_list, file_read, file_write
from ._shell import run_shell
from ._toolset import Tool, ToolContext, Toolset

RelativePath = Annotated[str, msgspec.Meta(description="Relative path.")]


class ReadArgs(msgspec.Struct, frozen=True):
    path: RelativePath


class WriteArgs(msgspec.Struct, frozen=True):
    path: RelativePath
    content: Annotated[str, msgspec.Meta(description="The whole new content.")]


class ListArgs(msgspec.Struct, frozen=True):
    path: RelativePath


class ShellArgs(msgspec.Struct, frozen=True):
    command: Annotated[str, msgspec.Meta(description="The command line, e.g. 'ls -l'.")]


class StoreArgs(msgspec.Struct, frozen=True):
    key: Annotated[str, msgspec.Meta(description="Short stable key.")]
    content: Annotated[str, msgspec.Meta(description="The fact.")]


class RecallArgs(msgspec.Struct, frozen=True):
    query: Annotated[str, msgspec.Meta(description="Keywords.")]
    namespaces: (
        Annotated[
            list[str],
            msgspec.Meta(
                description="Other agents' memories to search too (granted by their "
                "read_memory_from); absent: only your own."
            ),
        ]
        | None
    ) = None


class ForgetArgs(msgspec.Struct, frozen=True):
    key: Annotated[str, msgspec.Meta(description="The key.")] | None = None
    id: Annotated[str, msgspec.Meta(description="Or the record's id.")] | None = None

    def __post_init__(self) -> None:
        if (self.key is None) == (self.id is None):
            raise ValueError("memory_forget takes a key or an id (one of them)")


class AskArgs(msgspec.Struct, frozen=True):
    to: Annotated[str, msgspec.Meta(description="The peer's alias.")]
    text: Annotated[str, msgspec.Meta(description="The message.")]


class DelegateArgs(msgspec.Struct, frozen=True):
    to: Annotated[str, msgspec.Meta(description="The agent's alias.")]
    text: Annotated[str, msgspec.Meta(description="The task.")]


async def _read(ctx: ToolContext, args: ReadArgs) -> ToolResult:
    return await trio.to_thread.run_sync(file_read, ctx.rules, args.path)


async def _list(ctx: ToolContext, args: ListArgs) -> ToolResult:
    return await trio.to_thread.run_sync(file_list, ctx.rules, args.path)


async def _write(ctx: ToolContext, args: WriteArgs) -> ToolResult:
    # The policy first: nobody is asked to approve what would be refused anyway.
    decision = check_path(ctx.rules, args.path, "write")
    if not decision.allowed:
        return ToolResult.refused(decision.code or "path_not_allowed", decision.reason)
    # Writing is a medium-risk action: a supervised profile asks before doing it.
    if ctx.asks_approval and not await ctx.approved(f"write {args.path}"):
        return ToolResult.refused("approval_denied", "the operator did not approve")
    return await trio.to_thread.run_sync(file_write, ctx.rules, args.path, args.content)


async def _shell(ctx: ToolContext, args: ShellArgs) -> ToolResult:
    s = ctx.shell
    return await run_shell(
        args.command,
        rules=ctx.rules,
        allowed_commands=s.allowed_commands,
        may_run_shell=s.may_run_shell,
        block_high_risk=s.block_high_risk,
        asks_approval=ctx.asks_approval,
        approver=ctx.approver,
        timeout_secs=s.timeout_secs,
        agent_env=s.agent_env,
        output_cap=s.output_cap,
        confine=s.confine,
        home_root=s.home_root,
    )


def _read_only(ctx: ToolContext, what: str) -> ToolResult | None:
    """A readonly profile refuses every write (ADR 0039): memory stores and forgets, and
    delegation, which hands work to another agent. The memory service and the router
    refuse the same again for a caller that skips this tool."""
    if ctx.rules.may_write:
        return None
    return ToolResult.refused("read_only_profile", f"the risk profile is readonly: no {what}")


Req = TypeVar("Req", bound=msgspec.Struct)
Ans = TypeVar("Ans", bound=msgspec.Struct)


async def _memory(
    ctx: ToolContext, op: Operation[Req, Ans], request: Req, render: Callable[[Ans], str]
) -> ToolResult:
    """One memory call as the model sees it: the rendered answer (its builtins in `data`),
    or the service's refusal code."""
    try:
        answer = await ctx.reach.memory(op, request)
    except CallRefused as exc:
        return ToolResult(False, "", as_tool_error(exc.code, "unavailable"), exc.detail or exc.code)
    return ToolResult(True, render(answer), data=msgspec.to_builtins(answer))


def _hits(answer: memory_wire.MemoryHits) -> str:
    return "\n".join(f"[{h.agent}] {h.key}: {h.content}" for h in answer.hits)


async def _store(ctx: ToolContext, args: StoreArgs) -> ToolResult:
    return _read_only(ctx, "memory writes") or await _memory(
        ctx,
        memory_wire.MEMORY_STORE,
        memory_wire.StoreArgs(key=args.key, content=args.content),
        lambda stored: f"stored {stored.record.key}",
    )


async def _recall(ctx: ToolContext, args: RecallArgs) -> ToolResult:
    # Naming namespaces searches the caller's own too; the service judges the others.
    request = memory_wire.RecallArgs(
        query=args.query, agents=args.namespaces, with_own=args.namespaces is not None
    )
    return await _memory(ctx, memory_wire.MEMORY_RECALL, request, _hits)


async def _forget(ctx: ToolContext, args: ForgetArgs) -> ToolResult:
    request = memory_wire.ForgetArgs(key=args.key, id=None if args.key is not None else args.id)
    return _read_only(ctx, "memory writes") or await _memory(
        ctx, memory_wire.MEMORY_FORGET, request, lambda forgotten: ""
    )


def _too_deep(ctx: ToolContext) -> ToolResult | None:
    """The router decides depth (ADR 0018); this only spares an honest agent the trip."""
    if ctx.depth + 1 >= MAX_DELEGATION_DEPTH:
        return ToolResult.refused(
            "depth_exceeded",
            f"a chain of {MAX_DELEGATION_DEPTH} asks/delegations is the limit",
        )
    return None


async def _ask(ctx: ToolContext, args: AskArgs) -> ToolResult:
    return _too_deep(ctx) or await ctx.reach.message_peer(
        args.to,
        args.text,
        delegate=False,
        depth=ctx.depth + 1,
        session=ctx.session,
        turn=ctx.turn,
    )


async def _delegate(ctx: ToolContext, args: DelegateArgs) -> ToolResult:
    if (refused := _read_only(ctx, "delegation")) is not None:
        return refused
    if args.to not in ctx.delegates:
        return ToolResult.refused(
            "delegation_not_allowed", f"{args.to!r} is not in this agent's delegates"
        )
    return _too_deep(ctx) or await ctx.reach.message_peer(
        args.to,
        args.text,
        delegate=True,
        depth=ctx.depth + 1,
        session=ctx.session,
        turn=ctx.turn,
    )


FILE_READ = Tool("file_read", "Read a text file in the workspace.", ReadArgs, _read)
FILE_WRITE = Tool("file_write", "Write (replace) a text file in the workspace.", WriteArgs, _write)
FILE_LIST = Tool("file_list", "List a directory in the workspace.", ListArgs, _list)
SHELL = Tool(
    "shell",
    "Run one allowed command (no shell syntax) with the workspace as cwd.",
    ShellArgs,
    _shell,
)
MEMORY_STORE = Tool(
    "memory_store", "Remember a fact under a key (replaces that key).", StoreArgs, _store
)
MEMORY_RECALL = Tool("memory_recall", "Search remembered facts.", RecallArgs, _recall)
MEMORY_FORGET = Tool("memory_forget", "Forget the fact under a key.", ForgetArgs, _forget)
SEND_MESSAGE_TO_PEER = Tool(
    "send_message_to_peer", "Ask a peer agent something and get its reply.", AskArgs, _ask
)
DELEGATE = Tool(
    "delegate",
    "Hand a task to an agent this agent may delegate to, and get its result.",
    DelegateArgs,
    _delegate,
)

# Every tool an agent has today, in the order models are told about them.
DEFAULT_TOOLSET = Toolset(
    "default",
    (
        FILE_READ,
        FILE_WRITE,
        FILE_LIST,
        SHELL,
        MEMORY_STORE,
        MEMORY_RECALL,
        MEMORY_FORGET,
        SEND_MESSAGE_TO_PEER,
        DELEGATE,
    ),
)
