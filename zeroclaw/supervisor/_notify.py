"""sd_notify over $NOTIFY_SOCKET: a datagram per message, no libsystemd."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger("zeroclaw.notify")


class Notifier:
    """Sends systemd notifications; does nothing when not run under a notify-type unit."""

    def __init__(self, env: Mapping[str, str]) -> None:
        path = env.get("NOTIFY_SOCKET", "")
        self.address: str | None = None
        if path.startswith("@"):
            self.address = "\0" + path[1:]  # abstract namespace
        elif path.startswith("/"):
            self.address = path
        self._sock: socket.socket | None = None
        if self.address is not None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)
        self.watchdog_interval = _watchdog_interval(env)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def send(self, *lines: str) -> bool:
        if self._sock is None or self.address is None:
            return False
        try:
            self._sock.sendto("\n".join(lines).encode(), self.address)
        except OSError as exc:  # systemd gone or socket full: never fatal for the daemon
            log.warning("sd_notify failed: %s", exc)
            return False
        return True

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        self.send(f"STATUS={status}")

    def reloading(self) -> None:
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _watchdog_interval(env: Mapping[str, str]) -> float | None:
    """Half of WATCHDOG_USEC, when the watchdog is meant for this process."""
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid.isdigit() and int(pid) != os.getpid():
        return None
    return int(usec) / 1_000_000 / 2


# systemd's per-process variables: read by the daemon, never passed to anything it starts.
SYSTEMD_VARIABLES = frozenset(
    {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"}
)
