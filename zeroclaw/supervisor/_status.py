"""What `status` reports of the daemon itself and of its parts (the control handlers' state
the daemon keeps: the parts each keep their own, this only reads them)."""

from __future__ import annotations

import os
import time

import trio

from .._version import __version__
from ..bus import Router
from ..control import DaemonStatus, ReloadStatus, StatusReply
from ._fleet import Fleet, Readiness
from ._reloader import Reloader
from ._running import Running
from ._runtimes import Runtimes


class DaemonStatusReport:
    def __init__(
        self,
        running: Running,
        fleet: Fleet,
        runtimes: Runtimes,
        reloader: Reloader,
        readiness: Readiness,
        router: Router,
    ) -> None:
        self._running = running
        self._fleet = fleet
        self._runtimes = runtimes
        self._reloader = reloader
        self._readiness = readiness
        self._router = router
        # Built in trio.run, as the daemon starts.
        self._started_wall = time.time()
        self._started_mono = trio.current_time()

    def status(self) -> StatusReply:
        running, reload = self._running, self._reloader.state
        return StatusReply(
            daemon=DaemonStatus(
                pid=os.getpid(),
                version=__version__,
                started_at=self._started_wall,
                uptime_secs=round(trio.current_time() - self._started_mono, 3),
                config=str(running.config_path),
                state_dir=str(running.paths.state_dir),
                runtime_dir=str(running.paths.runtime_dir),
                ready=self._readiness.sent,
                reload=ReloadStatus(reload.state, reload.at, reload.errors, reload.diff),
            ),
            counts=self._fleet.counts(),
            router=self._router.stats(),
            agents=self._fleet.agents(),
            runtimes=self._runtimes.statuses(),
        )
