"""Scheduled work (issue 28): cron and interval turns, heartbeat checklists and agent-made
reminders, each a turn of its own origin `schedule:<agent>.<name>`, delivered to a channel
the agent binds, exactly once across restarts and reloads.

The scheduler (`Scheduler`) is pure: events in, actions out, on whatever clock the caller
gives it; `_triggers` turns cron fields, intervals and instants into slots (croniter reads
the cron fields). The daemon's service is its thin trio shell.

The store, the specs and the triggers load with the package (the daemon opens the store at
every start); the scheduler, the service, the reminders and the control commands on first
use, which a daemon whose config has no schedules never makes (ADR 0067).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._spec import (
    HEARTBEAT_NAME,
    REMINDER_PREFIX,
    CatchUp,
    Mark,
    Overlap,
    Running,
    RunSummary,
    ScheduleKind,
    ScheduleSpec,
    ScheduleView,
)
from ._store import (
    ScheduleStore,
    ScheduleStoreCorrupt,
    ScheduleStoreError,
    ScheduleStoreLocked,
)
from ._triggers import (
    Cron,
    Every,
    Once,
    Trigger,
    TriggerError,
    count_slots,
    jitter_of,
    next_slot,
    previous_slot,
    wall_instant,
)

if TYPE_CHECKING:
    from ._control import register_schedule_commands, schedule_info
    from ._heartbeat import HEARTBEAT_FILE, open_items
    from ._machine import (
        GRACE_SECS,
        Action,
        Cancelled,
        Ended,
        Event,
        Fire,
        FireEnded,
        Forget,
        Interrupted,
        Missed,
        Pause,
        Queued,
        Refused,
        Reloaded,
        Restored,
        Resume,
        RunNow,
        Scheduler,
        Settled,
        Skipped,
        Tick,
        run_id_of,
    )
    from ._reminders import ReminderService, admit_reminder
    from ._service import ScheduleService, config_specs

_load = lazy_attributes(
    __name__,
    {
        "register_schedule_commands": "._control",
        "schedule_info": "._control",
        "HEARTBEAT_FILE": "._heartbeat",
        "open_items": "._heartbeat",
        "GRACE_SECS": "._machine",
        "Action": "._machine",
        "Cancelled": "._machine",
        "Ended": "._machine",
        "Event": "._machine",
        "Fire": "._machine",
        "FireEnded": "._machine",
        "Forget": "._machine",
        "Interrupted": "._machine",
        "Missed": "._machine",
        "Pause": "._machine",
        "Queued": "._machine",
        "Refused": "._machine",
        "Reloaded": "._machine",
        "Restored": "._machine",
        "Resume": "._machine",
        "RunNow": "._machine",
        "Scheduler": "._machine",
        "Settled": "._machine",
        "Skipped": "._machine",
        "Tick": "._machine",
        "run_id_of": "._machine",
        "ReminderService": "._reminders",
        "admit_reminder": "._reminders",
        "ScheduleService": "._service",
        "config_specs": "._service",
    },
)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "GRACE_SECS",
    "HEARTBEAT_FILE",
    "HEARTBEAT_NAME",
    "REMINDER_PREFIX",
    "Action",
    "Cancelled",
    "CatchUp",
    "Cron",
    "Ended",
    "Event",
    "Every",
    "Fire",
    "FireEnded",
    "Forget",
    "Interrupted",
    "Mark",
    "Missed",
    "Once",
    "Overlap",
    "Pause",
    "Queued",
    "Refused",
    "Reloaded",
    "ReminderService",
    "Restored",
    "Resume",
    "RunNow",
    "RunSummary",
    "Running",
    "ScheduleKind",
    "ScheduleService",
    "ScheduleSpec",
    "ScheduleStore",
    "ScheduleStoreCorrupt",
    "ScheduleStoreError",
    "ScheduleStoreLocked",
    "ScheduleView",
    "Scheduler",
    "Settled",
    "Skipped",
    "Tick",
    "Trigger",
    "TriggerError",
    "admit_reminder",
    "config_specs",
    "count_slots",
    "jitter_of",
    "next_slot",
    "open_items",
    "previous_slot",
    "register_schedule_commands",
    "run_id_of",
    "schedule_info",
    "wall_instant",
]
