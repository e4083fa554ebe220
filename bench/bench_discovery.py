"""Discovery: a scan of 200 bundles + 50 adapters + 4 PATH probes, cold (scan, probes,
cache write) and warm (from the cache), against the bare filesystem walk + YAML parse of
the same files plus the same four probes run at once, in the same run, in-process."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import tomli_w
import trio
import yaml

from zeroclaw._yaml import safe_load
from zeroclaw.config import load_config
from zeroclaw.discovery import discover, scan_context
from zeroclaw.subagents._bundle import schema_problems

from ._harness import Result, median_seconds, result

BUNDLES = 200
ADAPTERS = 50
COMMANDS = ("codex", "claude", "gemini", "ollama")
# Each bundle's schema differs (a memo of checked schemas must not flatter the figure).
SCHEMA = '{"type": "object", "properties": {"text%d": {"type": "string"}}, "required": ["text%d"]}'


def build(base: Path) -> tuple[Path, dict[str, str]]:
    project = base / "project"
    bins = base / "bin"
    bins.mkdir(parents=True)
    for name in COMMANDS:
        program = bins / name
        program.write_text(f'#!/bin/sh\necho "{name} 1.0.0"\n')
        program.chmod(0o755)
    for i in range(BUNDLES):
        bundle = project / "subagents" / f"sub-{i:03d}"
        (bundle / "schemas").mkdir(parents=True)
        (bundle / "SYSTEM.md").write_text(f"You are sub-agent {i}.\n")
        (bundle / "schemas" / "in.json").write_text(SCHEMA % (i, i))
        (bundle / "agent.yaml").write_text(
            yaml.safe_dump(
                {
                    "id": f"sub-{i:03d}",
                    "description": f"bench sub-agent {i}",
                    "model_provider": "offline.default",
                    "inputSchema": "schemas/in.json",
                    "policy": {"allowedCallers": ["cli"]},
                }
            )
        )
    (project / "adapters").mkdir(parents=True)
    for i in range(ADAPTERS):
        (project / "adapters" / f"a-{i:02d}.yaml").write_text(
            yaml.safe_dump(
                {
                    "id": f"adapter-{i:02d}",
                    "transport": "cli",
                    "command": COMMANDS[i % len(COMMANDS)],
                    "capabilities": ["code.review"],
                }
            )
        )
    config = project / "zeroclaw.toml"
    config.write_text(
        tomli_w.dumps(
            {
                "daemon": {"state_dir": str(base / "state"), "runtime_dir": str(base / "run")},
                "providers": {"offline": {"default": {}}},
                "discovery": {"probe_model_ports": False, "scan_user_dirs": False},
            }
        )
    )
    env = {"PATH": f"{bins}:/usr/bin:/bin", "HOME": str(base / "home")}
    return config, env


def bare(config: Path, env: dict[str, str]) -> None:
    """What any scan must do at least: walk the same files, parse the YAML, run the probes."""
    project = config.parent
    for root, _dirs, files in os.walk(project):
        for name in files:
            path = Path(root) / name
            data = path.read_bytes()
            if name.endswith(".yaml"):
                safe_load(data)  # the fastest safe YAML parser there is here, as the scan uses
    probes = [
        subprocess.Popen(
            [str(Path(env["PATH"].split(":")[0]) / name), "--version"], stdout=subprocess.PIPE
        )
        for name in COMMANDS
    ]
    for probe in probes:
        probe.communicate()


def run() -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="zc-bench-discovery-") as tmp:
        config_path, env = build(Path(tmp))
        config = load_config(config_path)
        data = config_path.read_bytes()
        state = Path(tmp) / "state"

        def scan(refresh: bool) -> None:
            if refresh:  # cold means cold: no schema remembered from the run before
                schema_problems.cache_clear()
            ctx = scan_context(config, config_path, env)

            async def main() -> None:
                outcome = await discover(ctx, data, state, refresh=refresh)
                assert outcome.from_cache is not refresh, outcome.verdict

            trio.run(main)

        bare_s = median_seconds(lambda: bare(config_path, env), repeat=5)
        cold_s = median_seconds(lambda: scan(True), repeat=5)
        warm_s = median_seconds(lambda: scan(False), repeat=9)
        started = time.perf_counter()
        bare(config_path, env)
        walk_only = time.perf_counter() - started
    return [
        result(
            f"discover cold ({BUNDLES} bundles, {ADAPTERS} adapters, 4 probes)",
            cold_s * 1000,
            "ms",
            "bare walk + YAML parse + the 4 probes",
            bare_s * 1000,
            target="ratio <= 2",
        ),
        result(
            "discover warm (from the cache)",
            warm_s * 1000,
            "ms",
            "bare walk + YAML parse + the 4 probes",
            max(bare_s, walk_only) * 1000,
            target="<= 50 ms",
        ),
    ]
