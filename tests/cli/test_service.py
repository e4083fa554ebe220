"""`zeroclaw service install|uninstall|status` through the real CLI, installing for real
beneath a temp root ($ZEROCLAW_SERVICE_ROOT); systemd-sysusers runs for real with --root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zeroclaw.ops import MARKER

from .helpers import run_cli

SCRIPT = Path(sys.executable).parent / "zeroclaw"


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture
def target(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "zeroclaw.toml"
    path.parent.mkdir()
    path.write_text("")
    return path


def service(
    root: Path, config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "--config",
        config,
        "service",
        *args,
        env={"ZEROCLAW_SERVICE_ROOT": str(root), **(env or {})},
    )


def test_dry_run_prints_every_file_and_command_and_writes_nothing(
    target: Path, config: Path
) -> None:
    result = service(target, config, "install", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert files_under(target) == []
    out = result.stdout
    assert f"would write {target}/etc/sysusers.d/zeroclaw.conf" in out
    assert f"would write {target}/etc/systemd/system/zeroclaw.service" in out
    assert f"    ExecStart={SCRIPT} --config {config} daemon" in out
    assert f"    ExecReload=+{SCRIPT} --config {config} reload" in out
    assert '    u zeroclaw - "zeroclaw daemon" /var/lib/zeroclaw' in out
    assert f"would run: systemd-sysusers --root={target} zeroclaw.conf" in out or (
        shutil.which("systemd-sysusers") is None
    )
    assert "systemctl daemon-reload" in out
    assert "systemctl enable --now zeroclaw.service" in out


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None, reason="no systemd-sysusers")
def test_install_status_uninstall_round_trip(target: Path, config: Path, tmp_path: Path) -> None:
    before = service(target, config, "status", "--json")
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout)["state"] == "absent"

    installed = service(target, config, "install")
    assert installed.returncode == 0, installed.stderr
    unit = target / "etc/systemd/system/zeroclaw.service"
    sysusers = target / "etc/sysusers.d/zeroclaw.conf"
    assert unit.read_text().startswith(MARKER) and sysusers.read_text().startswith(MARKER)
    assert f"ExecStart={SCRIPT} --config {config} daemon" in unit.read_text().splitlines()
    # Not the live root: daemon-reload is left to the operator, said so, with what comes next.
    assert "run by hand:\n  systemctl daemon-reload" in installed.stdout
    assert "systemctl enable --now zeroclaw.service" in installed.stdout

    status = json.loads(service(target, config, "status", "--json").stdout)
    assert status["state"] == "current"
    assert status["service_user"] == {"name": "zeroclaw", "exists": True}  # sysusers ran
    assert status["systemd"] is None  # no manager to ask beneath a temp root
    human = service(target, config, "status").stdout
    assert "systemd     not running here" in human

    other = tmp_path / "other.toml"
    stale = service(target, other, "status")
    assert "stale" in stale.stdout and f"--config {other} daemon" in stale.stdout

    removed = service(target, config, "uninstall")
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists() and not sysusers.exists()
    assert json.loads(service(target, config, "status", "--json").stdout)["state"] == "absent"
    again = service(target, config, "uninstall")
    assert again.returncode == 0 and "nothing to remove" in again.stdout


def test_uninstall_refuses_a_unit_it_did_not_write(target: Path, config: Path) -> None:
    unit = target / "etc/systemd/system/zeroclaw.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    result = service(target, config, "uninstall")
    assert result.returncode == 1
    assert "was not written by" in result.stderr and "(no marker line)" in result.stderr
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"
    assert json.loads(service(target, config, "status", "--json").stdout)["state"] == "foreign"
    refused = service(target, config, "install")
    assert refused.returncode == 1 and "--force" in refused.stderr
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"


def test_user_install_honours_xdg_config_home_and_prints_the_linger_hint(
    target: Path, config: Path, tmp_path: Path
) -> None:
    xdg = tmp_path / "xdg"
    env = {"XDG_CONFIG_HOME": str(xdg), "USER": "alice"}
    result = service(target, config, "install", "--user", env=env)
    assert result.returncode == 0, result.stderr
    unit = target / str(xdg).lstrip("/") / "systemd/user/zeroclaw.service"
    text = unit.read_text()
    assert "WantedBy=default.target" in text and "User=" not in text
    assert f"ExecReload={SCRIPT} --config {config} reload" in text
    assert "loginctl enable-linger alice" in result.stdout
    assert "systemctl --user enable --now zeroclaw.service" in result.stdout
    assert not (target / "etc").exists()  # no sysusers snippet for a user unit
    assert service(target, config, "uninstall", "--user", env=env).returncode == 0
    assert not unit.exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to become nobody"
)
def test_system_install_as_non_root_is_refused_and_writes_nothing(
    target: Path, config: Path
) -> None:
    target.chmod(0o777)  # nobody could write here: only our own check stops it
    # Keep only the right to read (the interpreter may live under /root), not to write.
    command = [
        "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
        "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
        sys.executable, "-m", "zeroclaw", "--config", str(config), "service", "install",
    ]  # fmt: skip
    env = {**os.environ, "ZEROCLAW_SERVICE_ROOT": str(target)}
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert result.returncode == 1, result.stderr
    assert "run it as root" in result.stderr and "Nothing was changed" in result.stderr
    assert files_under(target) == []
