"""A --config or $ZEROCLAW_CONFIG naming no file is exit 2 "file not found" for every
command, never "daemon down" (issue 14); a hint names its command with that --config."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import run_cli

DAEMON_COMMANDS = [
    ("status",),
    ("agents", "list"),
    ("stop",),
    ("reload",),
    ("route", "probe", "--from", "alpha", "--to", "beta"),
    ("subagents", "list"),
    ("invocations", "list"),
    ("dispatch", "summarizer", "--task", "t"),
]


@pytest.mark.parametrize("command", DAEMON_COMMANDS, ids=" ".join)
def test_a_missing_config_file_is_a_usage_error_not_a_daemon_that_is_down(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    missing = tmp_path / "nope.toml"
    for result in (
        run_cli("--config", missing, *command),
        run_cli(*command, env={"ZEROCLAW_CONFIG": str(missing)}),
    ):
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert f"{missing}: <root>: file not found" in result.stderr
        assert "daemon is answering" not in result.stderr


def test_hints_keep_the_config_the_operator_passed(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    result = run_cli("--config", missing, "status")
    assert f"'zeroclaw --config {missing} config init'" in result.stderr
    config = tmp_path / "zeroclaw.toml"
    assert run_cli("--config", config, "config", "init").returncode == 0
    down = run_cli("--config", config, "status")
    assert down.returncode == 3, down.stderr
    assert f"'zeroclaw --config {config} daemon'" in down.stderr
