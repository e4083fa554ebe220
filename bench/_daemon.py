"""The config every benchmark daemon runs: offline agents in one peer group, quiet logs."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import tomli_w

REPO = Path(__file__).resolve().parent.parent


def write_bench_config(
    root: Path, aliases: Iterable[str], *, grouped: bool = False, subagents: Path | None = None
) -> Path:
    """Write `<root>/zeroclaw.toml`; state in `<root>/s`, sockets in `<root>/r`; with
    `subagents`, `[subagents] dir` points at that directory of bundles."""
    aliases = list(aliases)
    doc: dict[str, object] = {
        "daemon": {
            "state_dir": str(root / "s"),
            "runtime_dir": str(root / "r"),
            "log_format": "json",
            "log_level": "warning",
        },
        "providers": {"offline": {"default": {}}},
        "risk_profiles": {"r": {"level": "readonly"}},
        "runtime_profiles": {"d": {}},
        "channels": {"cli": {"local": {}}},
        "agents": {
            alias: {
                "model_provider": "offline.default",
                "risk_profile": "r",
                "runtime_profile": "d",
                "channels": ["cli.local"],
            }
            for alias in aliases
        },
        "peer_groups": {"g": {"channel": "cli", "agents": aliases}} if grouped else {},
    }
    if subagents is not None:
        doc["subagents"] = {"dir": str(subagents)}
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def workspace(root: Path, alias: str) -> Path:
    return root / "s" / "agents" / alias / "workspace"


class ReadyDaemon:
    """A daemon on the bench config, started and timed to READY=1 (sd_notify)."""

    def __init__(
        self,
        aliases: Iterable[str],
        *,
        grouped: bool = False,
        subagents: Callable[[Path], None] | None = None,
    ) -> None:
        """`subagents`, if given, fills `<root>/subagents` with bundles before the start and
        the config points `[subagents] dir` there."""
        self.root = Path(tempfile.mkdtemp(prefix="zcb-", dir="/tmp"))
        bundles = None
        if subagents is not None:
            bundles = self.root / "subagents"
            bundles.mkdir()
            subagents(bundles)
        self.config_path = write_bench_config(
            self.root, aliases, grouped=grouped, subagents=bundles
        )
        self.runtime_dir = self.root / "r"
        notify = self.root / "n.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(notify))
        self.sock.settimeout(60)
        env = {**os.environ, "NOTIFY_SOCKET": str(notify), "PYTHONPATH": str(REPO)}
        start = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zeroclaw", "--config", str(self.config_path), "daemon"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while b"READY=1" not in self.sock.recv(4096):
            pass
        self.ready_secs = time.perf_counter() - start

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.sock.close()
        shutil.rmtree(self.root, ignore_errors=True)
