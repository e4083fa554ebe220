"""What idle schedules cost the daemon (issue 28): the daemon's own CPU (user + system, from
/proc) over a quiet window with 1,000 schedules, beside the same daemon with none, in the
same run. The schedules are hourly and daily: none fires in the window, so what is measured
is the scheduler sleeping until its next deadline. The target: under 1 % of a core."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ._daemon import ReadyDaemon
from ._harness import Result, result

SCHEDULES = 1000
WINDOW_SECS = 20.0
SETTLE_SECS = 5.0  # after READY: what the start left to do settles
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_secs(pid: int) -> float:
    """The process's user + system CPU time so far (its own threads, not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _schedules(doc: dict[str, Any]) -> None:
    agent = doc["agents"]["a0"]
    now = time.time()
    # None due in the next hour: a run in the window would start the agent and be measured.
    hour = (time.gmtime(now).tm_hour + 12) % 24
    intervals = [h for h in range(2, 200) if -now % (h * 3600) > 3600][: SCHEDULES // 2]
    agent["schedules"] = {
        f"s{i}": (
            {"every": f"{intervals[i // 2 % len(intervals)]}h", "text": "x"}
            if i % 2
            else {"cron": f"{i % 60} {(hour + i % 6) % 24} * * *", "text": "x"}
        )
        for i in range(SCHEDULES)
    }
    _quiet(doc)


def _quiet(doc: dict[str, Any]) -> None:
    """Nothing else of the daemon's at work in the window: no agent process (on-demand),
    no discovery scans."""
    doc["runtime_profiles"]["d"]["activation"] = "on-demand"
    doc["discovery"] = {"enabled": False}


def _idle_cpu_share(edit: Any) -> float:
    daemon = ReadyDaemon(["a0"], edit=edit)
    try:
        time.sleep(SETTLE_SECS)
        before, start = cpu_secs(daemon.proc.pid), time.monotonic()
        time.sleep(WINDOW_SECS)
        used, elapsed = cpu_secs(daemon.proc.pid) - before, time.monotonic() - start
        return 100.0 * used / elapsed
    finally:
        daemon.close()


def run() -> list[Result]:
    baseline = _idle_cpu_share(_quiet)
    loaded = _idle_cpu_share(_schedules)
    return [
        result(
            f"idle daemon CPU with {SCHEDULES} schedules",
            round(loaded, 3),
            "% of a core",
            "the same daemon with no schedule",
            round(baseline, 3),
            target=f"< 1 % of a core above the baseline ({loaded - baseline:+.3f} here)",
        )
    ]
