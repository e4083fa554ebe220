"""Scheduled work (issue 28): cron and interval turns, heartbeat checklists and agent-made
reminders, each a turn of its own origin `schedule:<agent>.<name>`, delivered to a channel
the agent binds, exactly once across restarts and reloads.

The scheduler (`Scheduler`) is pure: events in, actions out, on whatever clock the caller
gives it; `_triggers` turns cron fields, intervals and instants into slots (croniter reads
the cron fields). The daemon's service is its thin trio shell.
"""

from __future__ import annotations

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
    "Restored",
    "Resume",
    "RunNow",
    "RunSummary",
    "Running",
    "ScheduleKind",
    "ScheduleSpec",
    "ScheduleView",
    "Scheduler",
    "Settled",
    "Skipped",
    "Tick",
    "Trigger",
    "TriggerError",
    "count_slots",
    "jitter_of",
    "next_slot",
    "previous_slot",
    "run_id_of",
    "wall_instant",
]
