"""The light read of a config file (no pydantic, ADR 0035) finds the same daemon paths as the
full model for the same file and environment, and declines whatever it cannot be sure of."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.config import (
    SYSTEM_CONFIG,
    ConfigError,
    daemon_paths,
    light_config,
    load_config_text,
    read_light_config,
    runtime_dir_hint,
    system_dir_defaults,
)

PATH_VALUES = st.sampled_from(
    [
        "/abs/state",
        "rel/state",
        "./a/../b",
        "~/home-relative",
        "~",
        "",
        "a\x00b",
        "~no_such_user_zc/x",
        "/trailing/",
        5,
        True,
        ["x"],
    ]
)
ENV_VALUES = st.sampled_from(["", "/e1", "/e2/sub", "/first:/second", "relative"])
ENV = st.dictionaries(
    st.sampled_from(
        ["HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "STATE_DIRECTORY", "RUNTIME_DIRECTORY"]
    ),
    ENV_VALUES,
)
DAEMON = st.dictionaries(
    st.sampled_from(["state_dir", "runtime_dir"]), PATH_VALUES
) | st.dictionaries(st.sampled_from(["state_dir", "runtime_dir", "bogus"]), PATH_VALUES)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if draw(st.booleans()):
        doc["daemon"] = draw(DAEMON | st.just(3))  # type: ignore[operator]
    if draw(st.booleans()):
        doc["nope"] = 1  # an unknown key elsewhere: the file does not validate
    return doc


def full_paths(text: str, path: str, env: dict[str, str]) -> tuple[Path, Path] | None:
    try:
        config = load_config_text(
            text,
            source=path,
            base_dir=Path(os.path.abspath(path)).parent,
            env=env,
            daemon_defaults=system_dir_defaults(path, env),
        )
    except ConfigError:
        return None
    paths = daemon_paths(config, env)
    return paths.state_dir, paths.runtime_dir


@settings(max_examples=400, deadline=None)
@given(
    doc=documents(),
    env=ENV,
    path=st.sampled_from([str(SYSTEM_CONFIG), "/srv/conf/zeroclaw.toml", "rel/zeroclaw.toml"]),
)
def test_a_valid_file_gives_the_light_read_the_full_models_paths(
    doc: dict[str, Any], env: dict[str, str], path: str
) -> None:
    full = full_paths(tomli_w.dumps(doc), path, env)
    light = light_config(doc, path, env)
    if full is not None:
        assert light is not None
        assert (light.state_dir, light.runtime_dir) == full


@settings(max_examples=150, deadline=None)
@given(doc=documents(), env=ENV)
def test_any_file_gives_the_light_read_none_or_the_runtime_dir_the_cli_used_before(
    doc: dict[str, Any], env: dict[str, str]
) -> None:
    """Before the light read, every command found the daemon through `runtime_dir_hint`,
    which also reads a file that does not validate: the light read agrees or declines."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zeroclaw.toml"
        path.write_text(tomli_w.dumps(doc))
        light = read_light_config(path, env)
        if light is not None:
            assert light.runtime_dir == runtime_dir_hint(path, env)


def test_a_file_it_cannot_read_lightly_is_none(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    broken = tmp_path / "broken.toml"
    broken.write_text("[daemon\nstate_dir = 1")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe")
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 20 + "]" * 20)
    for path in (missing, broken, binary, deep, tmp_path):
        assert read_light_config(path, {}) is None, path


def test_the_enabled_agents_are_the_entries_not_disabled() -> None:
    doc = {
        "agents": {
            "on": {"model_provider": "offline.default"},
            "explicit": {"enabled": True},
            "off": {"enabled": False},
            "odd": {"enabled": "yes"},  # the model refuses it: the full load says why
            "flat": 3,
        }
    }
    light = light_config(doc, "/srv/zeroclaw.toml", {"HOME": "/h"})
    assert light is not None
    assert light.enabled_agents == {"on", "explicit"}
    assert light.state_dir == Path("/h/.local/state/zeroclaw")
    assert light.runtime_dir == Path("/h/.local/state/zeroclaw/run")
