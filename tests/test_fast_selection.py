"""`make test-fast`'s selection (`-m "not integration"`, marked by tests/conftest.py): the pure
and unit layers, never a test that starts a daemon or another process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import PATIENCE, REPO


def collected(*args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=PATIENCE * 2,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_fast_layer_is_the_cores_and_no_test_that_starts_a_process() -> None:
    fast = collected("-n", "0", "-m", "not integration")
    modules = {node.split("::", 1)[0] for node in fast}
    assert len(fast) > 500 and len(modules) > 50
    # The sans-IO cores and the pure layers are in it.
    for core in (
        "tests/bus/test_router_core.py",
        "tests/channels/test_webhook_core.py",
        "tests/config/test_rules.py",
        "tests/bus/test_wire.py",
        "tests/policy/test_commands.py",
        "tests/ops/test_doctor.py",
    ):
        assert core in modules, core
    # Nothing that starts a daemon, the CLI or a pseudo-terminal.
    for module in modules:
        source = (REPO / module).read_text()
        for word in (
            "daemons:",
            "Daemon(",
            "world: World",
            "subprocess",
            "pexpect",
            "run_cli",
            "Popen",
        ):
            assert word not in source, f"{module} uses {word} but is in the fast layer"
    for daemon_module in ("tests/supervisor/test_daemon.py", "tests/cli/test_events.py"):
        assert daemon_module not in modules
    assert Path(__file__).relative_to(REPO).as_posix() not in modules  # this test runs pytest
