"""The config every benchmark daemon runs: offline agents in one peer group, quiet logs."""

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
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import tomli_w

REPO = Path(__file__).resolve().parent.parent
WEBHOOK_ALIAS = "hook"  # the bench's webhook channel: webhook.hook, owned by the first alias
WEBHOOK_SECRET_ENV = "HOOK_SECRET"
PROVIDER_KINDS = ("offline", "openai", "anthropic")
ANTHROPIC_KEY_ENV = "BENCH_ANTHROPIC_KEY"
# Network providers point at a closed loopback port: the benches that use them keep the
# agents idle (memory, start-up), so no request is ever made.
LOOPBACK_URL = "http://127.0.0.1:9"


def provider_table(kind: str) -> dict[str, object]:
    """`[providers]` with one provider `<kind>.default`."""
    settings: dict[str, object] = {}
    if kind == "openai":
        settings = {"base_url": f"{LOOPBACK_URL}/v1", "model": "bench"}
    elif kind == "anthropic":
        settings = {"base_url": LOOPBACK_URL, "model": "bench", "api_key_env": ANTHROPIC_KEY_ENV}
    return {kind: {"default": settings}}


def write_bench_config(
    root: Path,
    aliases: Iterable[str],
    *,
    grouped: bool = False,
    subagents: Path | None = None,
    webhook_port: int | None = None,
    provider: str = "offline",
) -> Path:
    """Write `<root>/zeroclaw.toml`; state in `<root>/s`, sockets in `<root>/r`; with
    `subagents`, `[subagents] dir` points at that directory of bundles; with `webhook_port`,
    a webhook channel `webhook.hook` listens on 127.0.0.1 there (secret in $HOOK_SECRET, no
    practical rate limit), bound to the first alias, in a peer group open to any sender.
    `provider` is the kind every agent's model provider is (see `provider_table`)."""
    aliases = list(aliases)
    channels: dict[str, object] = {"cli": {"local": {}}}
    agents: dict[str, dict[str, object]] = {
        alias: {
            "model_provider": f"{provider}.default",
            "risk_profile": "r",
            "runtime_profile": "d",
            "channels": ["cli.local"],
        }
        for alias in aliases
    }
    peer_groups: dict[str, object] = {"g": {"channel": "cli", "agents": aliases}} if grouped else {}
    if webhook_port is not None:
        key = f"webhook.{WEBHOOK_ALIAS}"
        channels["webhook"] = {
            WEBHOOK_ALIAS: {
                "listen": f"127.0.0.1:{webhook_port}",
                "secret_env": WEBHOOK_SECRET_ENV,
                "rate_limit_per_minute": 1_000_000,  # the bench measures turns, not the limiter
            }
        }
        agents[aliases[0]]["channels"] = ["cli.local", key]
        peer_groups[f"{WEBHOOK_ALIAS}-senders"] = {
            "channel": key,
            "agents": [aliases[0]],
            "external_peers": ["*"],
        }
    doc: dict[str, object] = {
        "daemon": {
            "state_dir": str(root / "s"),
            "runtime_dir": str(root / "r"),
            "log_format": "json",
            "log_level": "warning",
        },
        "providers": provider_table(provider),
        # Not readonly: a readonly agent's process creates no file, even in its workspace
        # (ADR 0039), and the benchmark agents' plans write their results there.
        "risk_profiles": {"r": {"level": "supervised"}},
        "runtime_profiles": {"d": {}},
        "channels": channels,
        "agents": agents,
        "peer_groups": peer_groups,
    }
    if subagents is not None:
        doc["subagents"] = {"dir": str(subagents)}
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def pss_kb(pid: int) -> int:
    """A process's proportional set size: its private pages plus its share of shared ones."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def process_tree(pid: int) -> list[int]:
    out = [pid]
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        out.extend(process_tree(int(child)))
    return out


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
        webhook_port: int | None = None,
        webhook_secret: str | None = None,
        provider: str = "offline",
        edit: Callable[[dict[str, Any]], None] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`edit`, if given, changes the written config document before the start.
        `subagents`, if given, fills `<root>/subagents` with bundles before the start and
        the config points `[subagents] dir` there. `webhook_port` adds the webhook channel
        (see `write_bench_config`); `webhook_secret` is its signing secret, passed to the
        daemon in $HOOK_SECRET. READY=1 does not wait for the listener: poll its /readyz.
        `provider` is every agent's provider kind (offline, openai, anthropic). `env`: more
        of the daemon's environment (a gateway token's variable)."""
        self.root = Path(tempfile.mkdtemp(prefix="zcb-", dir="/tmp"))
        bundles = None
        if subagents is not None:
            bundles = self.root / "subagents"
            bundles.mkdir()
            subagents(bundles)
        self.config_path = write_bench_config(
            self.root,
            aliases,
            grouped=grouped,
            subagents=bundles,
            webhook_port=webhook_port,
            provider=provider,
        )
        if edit is not None:
            doc = tomllib.loads(self.config_path.read_text())
            edit(doc)
            self.config_path.write_text(tomli_w.dumps(doc))
        self.runtime_dir = self.root / "r"
        notify = self.root / "n.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(notify))
        self.sock.settimeout(60)
        environment = {
            **os.environ,
            **(env or {}),
            "NOTIFY_SOCKET": str(notify),
            "PYTHONPATH": str(REPO),
            ANTHROPIC_KEY_ENV: "bench-key",
        }
        if webhook_secret is not None:
            environment[WEBHOOK_SECRET_ENV] = webhook_secret
        start = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zeroclaw", "--config", str(self.config_path), "daemon"],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while b"READY=1" not in self.sock.recv(4096):
            pass
        self.ready_secs = time.perf_counter() - start

    def pss_total_kb(self) -> int:
        """PSS of the daemon, its zygote and every agent."""
        return sum(pss_kb(pid) for pid in process_tree(self.proc.pid))

    def settle(self, deadline_secs: float = 60) -> None:
        """Until the daemon's first discovery scan (which starts after READY=1) is done:
        from then on it idles."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-m", "zeroclaw", "--config", str(self.config_path)]
        deadline = time.monotonic() + deadline_secs
        while time.monotonic() < deadline:
            done = subprocess.run(
                [*argv, "status", "--json"], env=env, capture_output=True, check=False
            )
            if done.returncode == 0 and json.loads(done.stdout)["discovery"].get("scanned_at"):
                return
            time.sleep(0.1)
        raise RuntimeError("the daemon's first discovery scan did not end")

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.sock.close()
        shutil.rmtree(self.root, ignore_errors=True)
