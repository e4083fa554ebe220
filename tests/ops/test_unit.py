"""The systemd unit renderer: what systemd itself says of the rendered units, and the rules
of the rendering (ExecReload through `zeroclaw reload`, the user unit's cuts)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import pytest

from zeroclaw.config import SYSTEM_CONFIG
from zeroclaw.ops import (
    MARKER,
    UnitSpec,
    exec_line,
    judge_unit_file,
    owned_paths,
    parse_show,
    render_unit,
    uninstall_plan,
    user_exists,
    zeroclaw_command,
)

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = (REPO / "systemd" / "zeroclaw.service").read_text()
# The real installed script: systemd-analyze verify checks that ExecStart's binary exists.
SCRIPT = Path(sys.executable).parent / "zeroclaw"
TODAYS_EXPOSURE = 1.7  # `systemd-analyze security --offline=yes` of the unit before issue 14

needs_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)


def spec(scope: str = "system", config: Path = SYSTEM_CONFIG) -> UnitSpec:
    assert SCRIPT.is_file()
    return UnitSpec(scope, (str(SCRIPT),), config, ("https://example.invalid/zeroclaw",))  # type: ignore[arg-type]


def directives(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def write_unit(tmp_path: Path, scope: str) -> Path:
    folder = tmp_path / scope
    folder.mkdir()
    unit = folder / "zeroclaw.service"  # verify wants the unit's own name
    unit.write_text(render_unit(TEMPLATE, spec(scope)))
    return unit


def analyze(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@needs_analyze
def test_rendered_system_unit_passes_verify_and_is_no_more_exposed_than_before(
    tmp_path: Path,
) -> None:
    unit = write_unit(tmp_path, "system")
    verified = analyze("verify", unit)
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr
    security = analyze("security", "--offline=yes", unit)
    match = re.search(r"Overall exposure level for zeroclaw\.service: (\d+\.\d+)", security.stdout)
    assert match, security.stdout
    assert float(match[1]) <= TODAYS_EXPOSURE


@needs_analyze
def test_rendered_user_unit_passes_verify_under_a_user_manager(tmp_path: Path) -> None:
    unit = write_unit(tmp_path, "user")
    # Short: the user manager's own sockets live under it, and a socket path has 108 bytes.
    runtime = Path(tempfile.mkdtemp(prefix="zc-xdg-", dir="/tmp"))
    # A user manager needs its runtime dir even to verify; keys it does not know are warnings
    # on stderr with exit 0, so stderr must be empty as well.
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path)}
    try:
        verified = analyze("--user", "verify", unit, env=env)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr


@needs_analyze
def test_verify_would_catch_a_missing_executable(tmp_path: Path) -> None:
    """The check above is worth something: a unit naming no real binary fails verify."""
    folder = tmp_path / "bad"
    folder.mkdir()
    unit = folder / "zeroclaw.service"
    missing = UnitSpec("system", (str(tmp_path / "nope" / "zeroclaw"),), SYSTEM_CONFIG)
    unit.write_text(render_unit(TEMPLATE, missing))
    verified = analyze("verify", unit)
    assert verified.returncode != 0 and "is not executable" in verified.stderr


def test_exec_reload_runs_zeroclaw_reload_with_the_config(tmp_path: Path) -> None:
    config = tmp_path / "my config.toml"
    system = render_unit(TEMPLATE, spec("system", config))
    user = render_unit(TEMPLATE, spec("user", config))
    quoted = f'"{config}"'  # a space: one argument, quoted
    assert f"ExecReload=+{SCRIPT} --config {quoted} reload" in system.splitlines()
    assert f"ExecReload={SCRIPT} --config {quoted} reload" in user.splitlines()
    assert f"ExecStart={SCRIPT} --config {quoted} daemon" in system.splitlines()
    assert "kill -HUP" not in system


def test_the_system_unit_runs_as_the_zeroclaw_user_with_systemd_dirs() -> None:
    lines = directives(render_unit(TEMPLATE, spec("system")))
    for line in (
        "User=zeroclaw",
        "StateDirectory=zeroclaw",
        "RuntimeDirectory=zeroclaw",
        "TimeoutStartSec=90",
        "Documentation=https://example.invalid/zeroclaw",
        "WantedBy=multi-user.target",
        "ProtectProc=invisible",
    ):
        assert line in lines


def test_user_unit_drops_what_a_user_manager_cannot_do_and_keeps_the_rest() -> None:
    lines = directives(render_unit(TEMPLATE, spec("user")))
    keys = {line.partition("=")[0] for line in lines}
    for gone in (
        "User",
        "Group",
        "CapabilityBoundingSet",
        "AmbientCapabilities",
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "ProtectProc",
        "RemoveIPC",
        "StateDirectory",
        "Wants",
    ):
        assert gone not in keys, gone
    for kept in ("NoNewPrivileges", "SystemCallFilter", "RestrictAddressFamilies", "Type"):
        assert kept in keys, kept
    assert "WantedBy=default.target" in lines
    assert "RuntimeDirectory=zeroclaw" in lines


def test_the_shipped_file_is_itself_the_system_unit() -> None:
    """The template stays a readable, valid unit: rendering it with its own defaults
    (/usr/local/bin/zeroclaw, the system config) changes no directive."""
    shipped = UnitSpec("system", ("/usr/local/bin/zeroclaw",), SYSTEM_CONFIG)
    assert directives(render_unit(TEMPLATE, shipped)) == directives(TEMPLATE)


def test_the_packaged_template_is_the_shipped_file() -> None:
    packaged = resources.files("zeroclaw.ops").joinpath("zeroclaw.service").read_text()
    assert packaged == TEMPLATE


def test_every_rendered_file_starts_with_the_marker() -> None:
    for scope in ("system", "user"):
        assert render_unit(TEMPLATE, spec(scope)).startswith(MARKER + "\n")


def test_exec_arguments_are_escaped_for_systemd() -> None:
    assert exec_line(["/opt/z/bin/zeroclaw", "--config", "/etc/zc.toml"]) == (
        "/opt/z/bin/zeroclaw --config /etc/zc.toml"
    )
    # % is a specifier and $ an environment variable to systemd; quotes and spaces split.
    assert exec_line(["/a b/x", "50%", "$HOME", 'say "hi"']) == (
        '"/a b/x" 50%% $$HOME "say \\"hi\\""'
    )


def test_the_command_is_the_script_else_this_python_with_dash_m() -> None:
    assert zeroclaw_command("/opt/z/bin/zeroclaw", "/opt/z/bin/python") == ("/opt/z/bin/zeroclaw",)
    assert zeroclaw_command(None, "/opt/z/bin/python") == (
        "/opt/z/bin/python",
        "-P",  # the unit's cwd `/` is not on sys.path: it would be the daemon's code
        "-m",
        "zeroclaw",
    )


def test_unit_file_states() -> None:
    wanted = render_unit(TEMPLATE, spec())
    assert judge_unit_file(None, wanted) == "absent"
    assert judge_unit_file(wanted, wanted) == "current"
    assert judge_unit_file(wanted.replace("TimeoutStartSec=90", "TimeoutStartSec=5"), wanted) == (
        "stale"
    )
    assert judge_unit_file(TEMPLATE, wanted) == "foreign"


def test_uninstall_removes_only_marked_files_and_refuses_all_if_one_is_foreign(
    tmp_path: Path,
) -> None:
    unit, sysusers = owned_paths("system", tmp_path, {})
    ours = render_unit(TEMPLATE, spec())
    plan = uninstall_plan(
        "system", tmp_path, {}, {unit: ours, sysusers: None}, manager_running=True
    )
    assert plan.remove == (unit,) and not plan.refused
    assert plan.before == () and plan.after == ()  # not the live root: no systemctl
    live = uninstall_plan(
        "system",
        Path("/"),
        {},
        {Path("/etc/systemd/system/zeroclaw.service"): ours},
        manager_running=True,
    )
    assert live.before == (("systemctl", "disable", "--now", "zeroclaw.service"),)
    assert live.after == (("systemctl", "daemon-reload"),)
    foreign = uninstall_plan(
        "system", tmp_path, {}, {unit: TEMPLATE, sysusers: ours}, manager_running=False
    )
    assert foreign.remove == () and len(foreign.refused) == 1 and str(unit) in foreign.refused[0]


def test_systemctl_show_and_passwd_parsing() -> None:
    props = parse_show("LoadState=loaded\nActiveState=active\nUnitFileState=\n")
    assert props == {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": ""}
    assert user_exists("root:x:0:0::/root:/bin/sh\nzeroclaw:x:999:999::/var/lib/zeroclaw:/x\n")
    assert not user_exists("zeroclawx:x:1:1::/:/x\n")


def test_both_units_raise_the_descriptor_limit() -> None:
    """ADR 0045: without LimitNOFILE, systemd's soft 1024 let 971 slow clients lock the
    operator out of the control socket."""
    for scope in ("system", "user"):
        rendered = directives(render_unit(TEMPLATE, spec(scope)))  # type: ignore[arg-type]
        limits = [line for line in rendered if line.startswith("LimitNOFILE=")]
        assert limits == ["LimitNOFILE=65536"], scope
