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
from collections.abc import Iterable
from pathlib import Path

import tomli_w

REPO = Path(__file__).resolve().parent.parent


def write_bench_config(root: Path, aliases: Iterable[str], *, grouped: bool = False) -> Path:
    """Write `<root>/zeroclaw.toml`; state in `<root>/s`, sockets in `<root>/r`."""
    aliases = list(aliases)
    doc = {
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
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def workspace(root: Path, alias: str) -> Path:
    return root / "s" / "agents" / alias / "workspace"


class ReadyDaemon:
    """A daemon on the bench config, started and timed to READY=1 (sd_notify)."""

    def __init__(self, aliases: Iterable[str], *, grouped: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="zcb-", dir="/tmp"))
        self.config_path = write_bench_config(self.root, aliases, grouped=grouped)
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
