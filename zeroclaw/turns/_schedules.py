"""What an agent and the daemon say to each other about the agent's own reminders (issue 28):
schedules it makes with `schedule_create`, lists with `schedule_list` and deletes with
`schedule_delete`.

Agent -> daemon: requests to the `SCHEDULE_SERVICE` service; the caller is the router's
authenticated identity, and the turn a request names must be one the daemon opened on
that agent (an operator's or a channel sender's): its origin decides where the reminder
may deliver, and a supervised agent's create runs only when the daemon saw that turn's
approval question (`reminder_approval_question`) answered yes (ADR 0052).
  op "create"  ReminderCreate -> ReminderMade
  op "list"    ReminderListCall -> ReminderList
  op "delete"  ReminderDelete -> ReminderDeleted
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .._ops import Operation

SCHEDULE_SERVICE = "schedule"

# Why the schedule service refuses a reminder request (the tools pass these on).
ReminderRefusalCode = Literal[
    "reminder_not_allowed",  # no reminders in the risk profile, or a turn that may not make one
    "reminder_limit",  # the agent holds max_per_agent reminders already
    "reminder_too_frequent",  # an interval (or a cron's spacing) under min_interval
    "reminder_not_deliverable",  # deliver_to is not `log` nor a channel the agent binds
    "unknown_reminder",  # delete: no reminder of that name the turn's origin made
]

MAX_REMINDER_TEXT = 2000  # characters of a reminder's message


class ReminderCreate(msgspec.Struct, frozen=True, omit_defaults=True):
    """One trigger of three: `after` (once, a duration from now: '20m'), `every` (a
    duration, from now on), or `cron` (five fields) in `timezone`. `deliver_to`: `log`
    or a channel key the agent binds; None: the channel the turn came from when a
    reply can go out there, else `log`. `turn`: the asking turn's id."""

    text: str
    after: str | None = None
    every: str | None = None
    cron: str | None = None
    timezone: str = "UTC"
    deliver_to: str | None = None
    turn: str | None = None


class ReminderInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    name: str
    trigger: str
    deliver_to: str
    kind: str  # "reminder", or "config"/"heartbeat" for the operator's (listed, not deletable)
    next_fire: float | None = None
    text: str = ""
    created_by: str = ""


class ReminderMade(msgspec.Struct, frozen=True):
    reminder: ReminderInfo


class ReminderListCall(msgspec.Struct, frozen=True, omit_defaults=True):
    turn: str | None = None


class ReminderList(msgspec.Struct, frozen=True):
    schedules: tuple[ReminderInfo, ...]


class ReminderDelete(msgspec.Struct, frozen=True, omit_defaults=True):
    name: str
    turn: str | None = None


class ReminderDeleted(msgspec.Struct, frozen=True):
    name: str


APPROVAL_TEXT_CHARS = 120


def reminder_approval_question(call: ReminderCreate) -> str:
    """The question a supervised agent's schedule_create asks, and the daemon looks up: a
    yes covers this reminder only (its trigger, target and text, the text shown as a repr
    so no control character reaches whoever answers)."""
    when = (
        f"in {call.after}"
        if call.after is not None
        else f"every {call.every}"
        if call.every is not None
        else f"at cron {call.cron!r} in {call.timezone}"
    )
    text = (
        call.text
        if len(call.text) <= APPROVAL_TEXT_CHARS
        else call.text[:APPROVAL_TEXT_CHARS] + "…"
    )
    return f"make a reminder {when} delivered to {call.deliver_to or 'this channel'}: {text!r}"


SCHEDULE_CREATE = Operation(SCHEDULE_SERVICE, "create", ReminderCreate, ReminderMade)
SCHEDULE_LIST = Operation(SCHEDULE_SERVICE, "list", ReminderListCall, ReminderList)
SCHEDULE_DELETE = Operation(SCHEDULE_SERVICE, "delete", ReminderDelete, ReminderDeleted)
SCHEDULE_OPERATIONS = (SCHEDULE_CREATE, SCHEDULE_LIST, SCHEDULE_DELETE)
