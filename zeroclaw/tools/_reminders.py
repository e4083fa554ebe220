"""The reminder tools (issue 28): `schedule_create`, `schedule_list`, `schedule_delete` — the
schedules an agent makes itself, kept by the daemon.

An agent has them when its risk profile grants `reminders`; a turn uses them when its
origin's grant lists them (the operator's chat has every tool; a sender's turn only with
its peer group's `tools`). Everything is decided again by the daemon's schedule service:
which turns may make one (the operator's and an outside sender's, never a peer's or a
schedule's own), the agent's bounds (how many, how often), and where it may deliver (a
channel the agent binds). Under a supervised profile `schedule_create` asks first, on the
channel that started the turn, and the daemon makes the reminder only if it saw that turn's
question answered yes (ADR 0052).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..turns import (
    SCHEDULE_CREATE,
    SCHEDULE_DELETE,
    SCHEDULE_LIST,
    ReminderCreate,
    ReminderDelete,
    ReminderListCall,
    reminder_approval_question,
)
from ._base import ToolResult
from ._toolset import Tool, ToolContext

SCHEDULE_CREATE_TOOL = "schedule_create"
SCHEDULE_LIST_TOOL = "schedule_list"
SCHEDULE_DELETE_TOOL = "schedule_delete"
REMINDER_TOOL_NAMES = (SCHEDULE_CREATE_TOOL, SCHEDULE_LIST_TOOL, SCHEDULE_DELETE_TOOL)

Duration = Annotated[str, msgspec.Meta(description="A duration: '20m', '1h30m', '2d'.")]


class CreateArgs(msgspec.Struct, frozen=True):
    text: Annotated[str, msgspec.Meta(description="What you will be told when it comes due.")]
    after: Duration | None = None
    every: Duration | None = None
    cron: Annotated[
        str | None, msgspec.Meta(description="Five cron fields, e.g. '0 8 * * 1-5'.")
    ] = None
    timezone: Annotated[str, msgspec.Meta(description="The cron's IANA zone.")] = "UTC"
    deliver_to: Annotated[
        str | None,
        msgspec.Meta(
            description="'log', or a channel you are bound to; absent: where this message "
            "came from."
        ),
    ] = None


class ListArgs(msgspec.Struct, frozen=True):
    pass


class DeleteArgs(msgspec.Struct, frozen=True):
    name: Annotated[str, msgspec.Meta(description="The reminder's name (schedule_list).")]


async def _create(ctx: ToolContext, args: CreateArgs) -> ToolResult:
    if sum(x is not None for x in (args.after, args.every, args.cron)) != 1:
        return ToolResult.refused("bad_arguments", "give one of after, every or cron")
    call = ReminderCreate(
        args.text,
        args.after,
        args.every,
        args.cron,
        args.timezone,
        args.deliver_to,
        ctx.turn,
    )
    # A reminder is a write (it runs later, unattended): a supervised agent asks first.
    if ctx.asks_approval and not await ctx.approved(reminder_approval_question(call)):
        return ToolResult.refused("approval_denied", "the operator did not approve")
    return await ctx.reach.schedule(SCHEDULE_CREATE, call)


async def _list(ctx: ToolContext, args: ListArgs) -> ToolResult:
    return await ctx.reach.schedule(SCHEDULE_LIST, ReminderListCall(ctx.turn))


async def _delete(ctx: ToolContext, args: DeleteArgs) -> ToolResult:
    return await ctx.reach.schedule(SCHEDULE_DELETE, ReminderDelete(args.name, ctx.turn))


SCHEDULE_CREATE_T = Tool(
    SCHEDULE_CREATE_TOOL,
    "Make a reminder: a message you get later (once after a delay, every interval, or at "
    "cron times), whose reply goes to this channel or another you are bound to. Bounded in "
    "number and frequency; may need approval.",
    CreateArgs,
    _create,
)
SCHEDULE_LIST_T = Tool(
    SCHEDULE_LIST_TOOL,
    "List your schedules: the ones your operator configured and your reminders (with an "
    "outside sender, only the reminders made in its conversations).",
    ListArgs,
    _list,
)
SCHEDULE_DELETE_T = Tool(
    SCHEDULE_DELETE_TOOL,
    "Delete one of your reminders by name.",
    DeleteArgs,
    _delete,
)
REMINDER_TOOLS = (SCHEDULE_CREATE_T, SCHEDULE_LIST_T, SCHEDULE_DELETE_T)
