"""A project directory for discovery tests: a config, manifests, programs on a PATH."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import tomli_w
import trio

from zeroclaw.config import load_config
from zeroclaw.discovery import Snapshot, scan, scan_context

SYSTEM_PYTHON = "/usr/bin/python3"


class Project:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "project"  # the config's directory: manifests beside it
        self.bin = base / "bin"  # a system-like program directory, outside the project
        self.home = base / "home"
        for directory in (self.root, self.bin, self.home):
            directory.mkdir(parents=True, exist_ok=True)
        self.discovery: dict[str, Any] = {"probe_model_ports": False}
        self.extra: dict[str, Any] = {}

    @property
    def config_path(self) -> Path:
        return self.root / "zeroclaw.toml"

    def write_config(self) -> Path:
        doc: dict[str, Any] = {
            "daemon": {
                "state_dir": str(self.base / "state"),
                "runtime_dir": str(self.base / "run"),
            },
            "providers": {"offline": {"default": {}}},
            "risk_profiles": {"sup": {"level": "supervised"}},
            "runtime_profiles": {"default": {}},
            "channels": {"cli": {"local": {}}},
            "agents": {
                "alpha": {
                    "model_provider": "offline.default",
                    "risk_profile": "sup",
                    "runtime_profile": "default",
                    "channels": ["cli.local"],
                }
            },
            "discovery": self.discovery,
            **self.extra,
        }
        self.config_path.write_text(tomli_w.dumps(doc))
        return self.config_path

    def file(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    def program(self, name: str, body: str = 'echo "$0 1.2.3"', where: Path | None = None) -> Path:
        directory = where or self.bin
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
        return path

    def python_program(self, name: str, body: str, where: Path | None = None) -> Path:
        """A Python program run by the system interpreter: under the probe sandbox it can
        only execute itself and its interpreter, so what a shell script would run (`sleep`,
        `head`) it does in-process."""
        directory = where or self.bin
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        path.write_text(f"#!{SYSTEM_PYTHON} -IS\n{textwrap.dedent(body).lstrip()}\n")
        path.chmod(0o755)
        return path

    def env(self, path: str | None = None) -> dict[str, str]:
        return {
            "PATH": path if path is not None else f"{self.bin}:/usr/bin:/bin",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
        }

    def scan(self, sources: list[str] | None = None, **env: str) -> Snapshot:
        config = load_config(self.write_config())
        ctx = scan_context(config, self.config_path, {**self.env(), **env})

        async def main() -> Snapshot:
            return await scan(ctx, sources)

        return trio.run(main)


def decision(snapshot: Snapshot, key: str, index: int = 0) -> Any:
    matches = [e for e in snapshot.entries if e.item.key == key]
    assert matches, f"{key} not found in {[e.item.key for e in snapshot.entries]}"
    return matches[index].decision


def os_path_env() -> str:
    return os.environ.get("PATH", "/usr/bin:/bin")
