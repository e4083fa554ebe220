"""A one-shot command through a running daemon imports only what it needs (issue 17, ADR
0035): `--version`, `status` and `chat -m` load no config models, trio, agent code, store or
network client. Pinned as module sets from `python -X importtime`, never as timings."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.conftest import REPO
from tests.supervisor.harness import Daemon, agent_entry, make_config

HEAVY = (
    "pydantic",
    "trio",
    "jsonschema",
    "yaml",
    "httpx",
    "lmdb",
    "zmq",
    "zeroclaw.agent",
    "zeroclaw.config._models",
    "zeroclaw.memory",
    "zeroclaw.supervisor",
    "zeroclaw.providers",
)


def imported(args: Sequence[str | Path], env: dict[str, str] | None = None) -> set[str]:
    """Every module the real CLI imported for this command line (it must succeed)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "zeroclaw", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return {
        line.rpartition("|")[2].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)}


def test_version_and_help_import_no_command_and_nothing_heavy() -> None:
    for args in (["--version"], ["--help"]):
        modules = imported(args)
        assert "click" in modules  # the parse worked: the probe sees imports
        assert heavy(modules) == set(), args
        assert not {m for m in modules if m.startswith("zeroclaw.cli.") and m.endswith("_cmd")}


def test_status_and_chat_through_a_daemon_import_nothing_heavy(
    root: Path, daemons: Callable[..., Daemon]
) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()}), faults=False).start()
    config = ["--config", str(daemon.config_path)]
    for args in (["status"], ["status", "--json"], ["--agent", "alpha", "chat", "-m", "hi"]):
        modules = imported([*config, *args])
        assert "zeroclaw.control" in modules, args
        assert heavy(modules) == set(), args


def test_without_a_daemon_chat_loads_the_agent_in_process(root: Path) -> None:
    """The other side of the budget: the probe does see the heavy modules when the command
    needs them (the agent runs here)."""
    import tomli_w

    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(make_config(root, {"alpha": agent_entry()})))
    modules = imported(["--config", path, "--agent", "alpha", "chat", "-m", "hi"])
    assert {"pydantic", "trio", "zeroclaw.agent", "zeroclaw.config._models"} <= modules
