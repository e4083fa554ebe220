"""`config show --loadable` prints a TOML file `config validate` accepts and that loads back
to the same effective config, from any directory (issue 14)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import tomli_w

from tests.cli.helpers import run_cli
from tests.conftest import DEMO_CONFIG, VALID_DOC
from zeroclaw.config import daemon_paths, load_config


def test_show_loadable_validates_and_loads_to_the_same_config(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    doc: dict[str, Any] = copy.deepcopy(VALID_DOC)  # relative state_dir, runtime_dir, workspaces
    source = tmp_path / "a" / "zeroclaw.toml"
    source.write_text(tomli_w.dumps(doc))
    for original in (source, DEMO_CONFIG):
        shown = run_cli("--config", original, "config", "show", "--loadable")
        assert shown.returncode == 0, shown.stderr
        copy_path = tmp_path / "b" / "loadable.toml"  # another directory: nothing relative
        copy_path.write_text(shown.stdout)
        validated = run_cli("config", "validate", copy_path)
        assert validated.returncode == 0, (validated.stdout, validated.stderr)
        env = {"HOOK_SECRET": "x"}
        first, second = load_config(original, env), load_config(copy_path, env)
        assert second == first
        assert daemon_paths(second, {}) == daemon_paths(first, {})
        assert "[resolved]" not in shown.stdout and "secrets" not in shown.stdout


def test_plain_show_keeps_its_resolved_section(tmp_path: Path) -> None:
    shown = run_cli("--config", DEMO_CONFIG, "config", "show")
    assert "# --- resolved" in shown.stdout
