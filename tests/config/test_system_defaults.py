"""The system config's daemon dirs default to the shipped unit's (/var/lib/zeroclaw,
/run/zeroclaw), so a CLI in a root shell finds a daemon that systemd started."""

from __future__ import annotations

from pathlib import Path

from zeroclaw.config import (
    SYSTEM_CONFIG,
    daemon_paths,
    load_config_text,
    system_dir_defaults,
)

SYSTEMD = {"STATE_DIRECTORY": "/var/lib/zc-unit", "RUNTIME_DIRECTORY": "/run/zc-unit"}


def test_the_system_config_defaults_to_the_units_dirs() -> None:
    assert system_dir_defaults(SYSTEM_CONFIG, {"HOME": "/root"}) == {
        "state_dir": "/var/lib/zeroclaw",
        "runtime_dir": "/run/zeroclaw",
    }
    # The same file named another way is still the system config.
    assert system_dir_defaults("/etc/zeroclaw/../zeroclaw/zeroclaw.toml", {}) != {}


def test_systemds_variables_still_win_one_by_one() -> None:
    assert system_dir_defaults(SYSTEM_CONFIG, SYSTEMD) == {}
    only_state = {"STATE_DIRECTORY": "/var/lib/zc-unit"}
    assert system_dir_defaults(SYSTEM_CONFIG, only_state) == {"runtime_dir": "/run/zeroclaw"}


def test_any_other_config_gets_no_defaults_from_here(tmp_path: Path) -> None:
    assert system_dir_defaults(tmp_path / "zeroclaw.toml", {}) == {}
    assert system_dir_defaults(Path.home() / ".config/zeroclaw/zeroclaw.toml", {}) == {}


def test_defaults_fill_only_what_the_file_does_not_name() -> None:
    defaults = system_dir_defaults(SYSTEM_CONFIG, {"HOME": "/root"})
    bare = load_config_text("", daemon_defaults=defaults)
    paths = daemon_paths(bare, {"HOME": "/root", "XDG_RUNTIME_DIR": "/run/user/0"})
    assert (paths.state_dir, paths.runtime_dir) == (
        Path("/var/lib/zeroclaw"),
        Path("/run/zeroclaw"),
    )
    named = load_config_text(
        '[daemon]\nstate_dir = "/srv/zc"\n', source=str(SYSTEM_CONFIG), daemon_defaults=defaults
    )
    paths = daemon_paths(named, {"HOME": "/root"})
    assert (paths.state_dir, paths.runtime_dir) == (Path("/srv/zc"), Path("/run/zeroclaw"))


def test_under_systemd_the_daemon_takes_the_units_dirs() -> None:
    config = load_config_text("", daemon_defaults=system_dir_defaults(SYSTEM_CONFIG, SYSTEMD))
    paths = daemon_paths(config, SYSTEMD)
    assert (paths.state_dir, paths.runtime_dir) == (Path("/var/lib/zc-unit"), Path("/run/zc-unit"))
