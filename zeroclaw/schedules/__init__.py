"""Scheduled work (issue 28): cron and interval turns, heartbeat checklists and agent-made
reminders, each a turn of its own origin `schedule:<agent>.<name>`, delivered to a channel
the agent binds, exactly once across restarts and reloads.

The scheduler (`Scheduler`) is pure: events in, actions out, on whatever clock the caller
gives it; `_triggers` turns cron fields, intervals and instants into slots (croniter reads
the cron fields). The daemon's service is its thin trio shell.
"""

from __future__ import annotations

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
from ._store import ScheduleStore, ScheduleStoreCorrupt, ScheduleStoreError, ScheduleStoreLocked
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
