"""`[subagents] dir`: relative to the config file, and `subagents/` beside it by default."""

from __future__ import annotations

from pathlib import Path

from zeroclaw.config import load_config, subagents_dir


def test_the_bundle_directory_defaults_to_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "zeroclaw.toml"
    path.parent.mkdir()
    path.write_text("")
    assert subagents_dir(load_config(path, {}), path) == tmp_path / "conf" / "subagents"


def test_a_relative_bundle_directory_is_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "zeroclaw.toml"
    path.write_text('[subagents]\ndir = "../bundles"\n')
    assert subagents_dir(load_config(path, {}), path) == tmp_path.parent / "bundles"
    path.write_text('[subagents]\ndir = "/srv/bundles"\n')
    assert subagents_dir(load_config(path, {}), path) == Path("/srv/bundles")
