"""What one schedule is, whatever made it (the config, a heartbeat, an agent's reminder), and
what the daemon keeps of it across restarts. Pure values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ._triggers import Trigger

ScheduleKind = Literal["config", "heartbeat", "reminder"]
Overlap = Literal["skip", "queue"]
CatchUp = Literal["none", "latest"]

HEARTBEAT_NAME = "heartbeat"  # an agent's heartbeat is its schedule of this name
REMINDER_PREFIX = "reminder-"  # agent-made schedules are named so; config ones never are
DEFAULT_TIMEOUT_SECS = 600.0


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """`text`: the turn's message (a heartbeat's is read from HEARTBEAT.md when it fires).
    `session`: a name inside the schedule's own origin `schedule:<agent>.<name>`.
    `tools`: what its turns may use (none by default). `deliver_to`: `log` or a channel
    key the agent binds. `created_by`: who made a reminder (an origin in words)."""

    agent: str
    name: str
    trigger: Trigger
    text: str = ""
    kind: ScheduleKind = "config"
    session: str = "default"
    tools: tuple[str, ...] = ()
    deliver_to: str = "log"
    overlap: Overlap = "skip"
    catch_up: CatchUp = "none"
    jitter: float = 0.0
    enabled: bool = True
    timeout: float = DEFAULT_TIMEOUT_SECS
    created_by: str | None = None
    created_at: float | None = None

    @property
    def key(self) -> str:
        return f"{self.agent}.{self.name}"


@dataclass(frozen=True, slots=True)
class Running:
    """A run recorded as started: `slot` None for an operator's `schedules run`."""

    run_id: str
    slot: float | None
    started_at: float


@dataclass(frozen=True, slots=True)
class Mark:
    """What the daemon keeps of a schedule on disk, so a restart neither repeats a run nor
    forgets one: the last slot settled (fired, skipped or missed; or the moment it started
    counting), the run in progress, a run queued behind it, and the operator's pause."""

    key: str
    last_slot: float | None = None
    paused: bool = False
    running: Running | None = None
    queued: float | None = None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """How a schedule's last run ended, for `schedules show`."""

    run_id: str
    outcome: str  # "delivered", or a failure code
    ended_at: float
    detail: str = ""
    slot: float | None = None


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as `schedules list|show` and `status` tell it."""

    spec: ScheduleSpec
    next_fire: float | None
    mark: Mark
    last_run: RunSummary | None = None
    counts: dict[str, int] = field(default_factory=dict)
