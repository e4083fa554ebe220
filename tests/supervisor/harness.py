"""Run a real `zeroclaw daemon` subprocess and observe it through systemd's notify protocol."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w

from tests.conftest import PATIENCE, REPO

FAULT_ENTRYPOINT = "tests.supervisor.fault_agents:main"


def agent_entry(**extra: Any) -> dict[str, Any]:
    return {
        "model_provider": "offline.default",
        "risk_profile": "sup",
        "runtime_profile": "fast",
        "channels": ["cli.local"],
        **extra,
    }


def make_config(
    root: Path,
    agents: dict[str, dict[str, Any]],
    *,
    grace: float = 1.0,
    restart: dict[str, float] | None = None,
    groups: dict[str, Any] | None = None,
    extra_profiles: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "daemon": {
            "state_dir": str(root / "state"),
            "runtime_dir": str(root / "run"),
            "shutdown_grace_secs": grace,
            "log_format": "json",
            "log_level": "debug",
        },
        "providers": {"offline": {"default": {}}},
        "risk_profiles": {"sup": {"level": "supervised"}},
        "runtime_profiles": {
            "fast": {
                "restart": restart
                or {
                    "max_restarts": 3,
                    "window_secs": 30,
                    "backoff_initial_secs": 0.2,
                    "backoff_max_secs": 1,
                    "stable_after_secs": 5,
                },
            },
            **(extra_profiles or {}),
        },
        "channels": {"cli": {"local": {}}},
        "agents": agents,
        "peer_groups": groups or {},
    }


class Daemon:
    """A daemon subprocess with its own short runtime dir and a notify socket."""

    def __init__(self, root: Path, doc: dict[str, Any], *, faults: bool = True) -> None:
        self.root = root
        self.config_path = root / "zeroclaw.toml"
        self.write_config(doc)
        self.notify_path = Path(tempfile.mktemp(prefix="notify-", suffix=".sock", dir=root))
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.notifications: list[str] = []
        self.log_path = root / "daemon.log"
        self.faults = faults
        self.proc: subprocess.Popen[bytes] | None = None

    def write_config(self, doc: dict[str, Any]) -> None:
        self.config_path.write_text(tomli_w.dumps(doc))

    @property
    def runtime_dir(self) -> Path:
        return self.root / "run"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "NOTIFY_SOCKET": str(self.notify_path),
            **extra,
        }
        if self.faults:
            env["ZEROCLAW_AGENT_ENTRYPOINT"] = FAULT_ENTRYPOINT
        return env

    def start(
        self,
        wait_ready: bool = True,
        *,
        options: tuple[str, ...] = (),
        daemon_options: tuple[str, ...] = (),
        **env: str,
    ) -> Daemon:
        """`options` go before `daemon` (global ones), `daemon_options` after it."""
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zeroclaw",
                "--config",
                str(self.config_path),
                *options,
                "daemon",
                *daemon_options,
            ],
            stdout=log,
            stderr=log,
            env=self.env(**env),
            cwd=REPO,
        )
        if wait_ready:
            self.wait_notification(lambda m: "READY=1" in m, timeout=PATIENCE)
        return self

    # --- notifications: the daemon's own event stream ------------------------------------

    def next_notification(self, timeout: float) -> str | None:
        self.notify.settimeout(timeout)
        try:
            message = self.notify.recv(4096).decode()
        except TimeoutError:
            return None
        self.notifications.append(message)
        return message

    def wait_notification(self, match: Callable[[str], bool], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self.next_notification(min(0.5, max(0.01, deadline - time.monotonic())))
            if message is None:
                self.assert_alive()  # nothing queued and nobody left to send it
            elif match(message):
                return message
        raise AssertionError(
            f"no matching notification in {timeout}s; got {self.notifications[-5:]}\n{self.log()}"
        )

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = PATIENCE
    ) -> dict[str, Any]:
        """Re-check status whenever the daemon reports a change (STATUS=), until it holds."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.status()
            if predicate(status):
                return status
            if time.monotonic() > deadline:
                dump = json.dumps(status, indent=1)
                raise AssertionError(f"not reached in {timeout}s: {dump}\n{self.log()}")
            self.next_notification(0.2)

    def assert_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}\n{self.log()}")

    # --- CLI -----------------------------------------------------------------------------

    def cli_argv(self) -> list[str]:
        return [sys.executable, "-m", "zeroclaw", "--config", str(self.config_path)]

    def cli(
        self, *args: str, timeout: float = PATIENCE, user: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.cli_argv(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=REPO,
            user=user,
            check=False,
        )

    def cli_popen(self, *args: str, **popen: Any) -> subprocess.Popen[str]:
        """A CLI command left running, as `cli` would run it (argv, environment, directory):
        for a test that acts while the command is under way."""
        popen.setdefault("env", {**os.environ, "PYTHONPATH": str(REPO)})
        return subprocess.Popen([*self.cli_argv(), *args], text=True, cwd=REPO, **popen)

    def status(self) -> dict[str, Any]:
        result = self.cli("status", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)  # type: ignore[no-any-return]

    def agent(self, alias: str) -> dict[str, Any]:
        return next(a for a in self.status()["agents"] if a["alias"] == alias)

    def pids(self) -> dict[str, int]:
        return {a["alias"]: a["pid"] for a in self.status()["agents"] if a["pid"]}

    def log(self) -> str:
        """The log's tail, for a failure message."""
        return self.log_text()[-6000:]

    def log_text(self) -> str:
        """The whole log, for what a test looks for in it (info lines keep growing)."""
        try:
            return self.log_path.read_text()
        except FileNotFoundError:
            return ""

    # --- shutdown ------------------------------------------------------------------------

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait_exit(self, timeout: float = PATIENCE) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.notify.close()


def short_root() -> Path:
    """A short directory: unix socket paths must fit in 107 bytes."""
    return Path(tempfile.mkdtemp(prefix="zc-", dir="/tmp"))


def remove_root(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before, or between open and read
        return False


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Pids still alive after `timeout` (polls /proc; a process's death has no other event)."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if process_alive(p)]
        if alive:
            time.sleep(0.02)
    return alive


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])
    return False


def wait_for_process(
    argv: list[str], timeout: float = PATIENCE, *, under: int | None = None
) -> int:
    """The pid of a process running this command, once it exists (polls /proc). With
    `under`, only a descendant of that pid counts: tests running side by side may run the
    same command."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    found = (entry / "cmdline").read_text().rstrip("\0").split("\0")
                except OSError:
                    continue
                # The shell tool runs the program by its full path.
                if [Path(found[0]).name, *found[1:]] == argv and (
                    under is None or _descends_from(int(entry.name), under)
                ):
                    return int(entry.name)
        time.sleep(0.05)
    raise AssertionError(f"no process {argv}")
