"""Reading files: syntax errors with positions, unreadable files, relative paths, location."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tomli_w

from tests.conftest import DEMO_CONFIG, VALID_DOC
from zeroclaw.config import (
    ConfigError,
    config_candidates,
    daemon_paths,
    load_config,
    load_config_text,
    locate_config,
    user_config_path,
    workspace_path,
)


def test_demo_config_is_valid() -> None:
    config = load_config(DEMO_CONFIG)
    assert set(config.agents) == {"alpha", "beta", "gamma"}
    assert config.peer_groups["ops"].agents == ("alpha", "beta")
    assert {"readonly", "supervised", "full"} <= set(config.risk_profiles)
    assert "default" in config.runtime_profiles and "cli.local" in config.channel_ids()
    assert not any("gamma" in g.agents for g in config.peer_groups.values())


def test_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "z.toml"
    path.write_text("[daemon]\nshutdown_grace_secs = = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (issue,) = info.value.issues
    assert (issue.line, issue.column) == (2, 23)
    assert info.value.lines()[0].startswith(f"{path}:2:23: invalid TOML")


def test_duplicate_table_is_a_syntax_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_text("[agents.a]\n[agents.a]\n", source="x")
    assert info.value.issues[0].line == 2


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        (lambda p: None, "file not found"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_bytes(b"a = '\xff'\n"), "not valid UTF-8"),
    ],
)
def test_unreadable_files_give_one_clear_issue(
    tmp_path: Path, setup: object, fragment: str
) -> None:
    path = tmp_path / "z.toml"
    setup(path)  # type: ignore[operator]
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert fragment in info.value.issues[0].message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file regardless of mode")
def test_permission_denied(tmp_path: Path) -> None:
    path = tmp_path / "z.toml"
    path.write_text("")
    path.chmod(0)
    with pytest.raises(ConfigError, match="permission denied"):
        load_config(path)


def test_relative_paths_resolve_against_the_files_directory(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    path = conf_dir / "z.toml"
    path.write_text(tomli_w.dumps(VALID_DOC))
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the caller's cwd must not matter
    try:
        config = load_config(path)
    finally:
        os.chdir(cwd)
    paths = daemon_paths(config, {})
    assert paths.state_dir == conf_dir / "state"
    assert workspace_path(config, "alpha", paths) == conf_dir / "ws" / "alpha"


def test_locate_prefers_explicit_then_env() -> None:
    env = {"ZEROCLAW_CONFIG": "/e.toml", "HOME": "/h"}
    assert locate_config("/x.toml", env) == Path("/x.toml")
    assert locate_config(None, env) == Path("/e.toml")


def test_locate_xdg_then_etc() -> None:
    env = {"XDG_CONFIG_HOME": "/xc", "HOME": "/h"}
    assert config_candidates(None, env) == [
        Path("/xc/zeroclaw/zeroclaw.toml"),
        Path("/etc/zeroclaw/zeroclaw.toml"),
    ]
    assert locate_config(None, env, exists=lambda p: True) == Path("/xc/zeroclaw/zeroclaw.toml")
    assert locate_config(None, env, exists=lambda p: str(p).startswith("/etc")) == Path(
        "/etc/zeroclaw/zeroclaw.toml"
    )
    assert user_config_path({"HOME": "/h"}) == Path("/h/.config/zeroclaw/zeroclaw.toml")


def test_locate_nothing_found_says_how_to_fix() -> None:
    with pytest.raises(ConfigError, match="zeroclaw config init"):
        locate_config(None, {"HOME": "/h"}, exists=lambda p: False)


def test_runtime_dir_hint_survives_an_invalid_file(tmp_path: Path) -> None:
    from zeroclaw.config import runtime_dir_hint

    path = tmp_path / "z.toml"
    path.write_text('[daemon]\nruntime_dir = "rt"\n[agents.Bad]\nnope = 1\n')
    assert runtime_dir_hint(path, {}) == tmp_path / "rt"
    path.write_text('[daemon]\nstate_dir = "st"\n')
    assert runtime_dir_hint(path, {}) == tmp_path / "st" / "run"
    path.write_text("not toml at all [")
    assert runtime_dir_hint(path, {"RUNTIME_DIRECTORY": "/run/zc"}) == Path("/run/zc")
    path.write_text('[daemon]\nruntime_dir = "rt2"  # here\n[agents.a]\n[agents.a]\n')
    assert runtime_dir_hint(path, {}) == tmp_path / "rt2"
