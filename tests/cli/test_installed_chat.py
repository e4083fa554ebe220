"""`chat -m` with no daemon, as an operator runs it after the README's install (issue 24,
found 12; ADR 0044): the INSTALLED console script, from a directory outside the checkout,
with no PYTHONPATH. An editable install reaches its source through a setuptools finder
(not a sys.path entry), so the in-process sandbox must let the process read its own code
wherever that finder maps it, or the late imports after confinement fail. The other tests
start `python -m zeroclaw` from the checkout and never see this."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.conftest import REPO
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.policy import abi_version

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
VENV_BIN = Path(sys.executable).parent
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])


def _config(root: Path) -> Path:
    # supervised (workspace_only): only what the plan grants is readable; `full`'s
    # complement ruleset would read the checkout anyway and hide the hole.
    doc = make_config(root, {"a": agent_entry()})
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def _environment() -> dict[str, str]:
    """The operator's shell: no PYTHONPATH, nothing of pytest's."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}


def _chat(script: Path, config: Path, cwd: Path, text: str) -> dict[str, Any]:
    result = subprocess.run(
        [str(script), "--config", str(config), "--agent", "a", "chat", "-m", text, "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_environment(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "in-process" in result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _remember_and_recall(script: Path, root: Path) -> None:
    """A store and a recall: the memory store is opened (and verified) after the sandbox."""
    config = _config(root)
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    stored = _chat(script, config, elsewhere, "remember: the launch is on friday")
    assert stored["sandbox_in_force"] is True  # the confined path, not an unconfined one
    assert [(c["name"], c["error_code"]) for c in stored["tool_calls"]] == [("memory_store", None)]
    recalled = _chat(script, config, elsewhere, "recall launch")
    assert "friday" in recalled["reply"]


@needs_landlock
def test_the_editable_install_chats_in_process_from_another_directory(tmp_path: Path) -> None:
    """The venv `make` builds: zeroclaw is installed editable (a finder maps it to the
    checkout) and the console script is .venv/bin/zeroclaw."""
    finders = list(SITE_PACKAGES.glob("__editable__*zeroclaw*finder.py"))
    assert finders, f"zeroclaw is not installed editable in {SITE_PACKAGES} (run make install)"
    _remember_and_recall(VENV_BIN / "zeroclaw", tmp_path)


@needs_landlock
@pytest.mark.slow
def test_a_wheel_chats_in_process_from_another_directory(tmp_path: Path) -> None:
    """A wheel built from the checkout, installed into a scratch venv (its dependencies
    reached through a .pth naming the main venv's site-packages: offline, a few seconds)."""
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copy(REPO / "README.md", source)
    shutil.copytree(
        REPO / "zeroclaw", source / "zeroclaw", ignore=shutil.ignore_patterns("__pycache__")
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = tmp_path / "wheels"
    subprocess.run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(built),
            str(source),
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    (wheel,) = built.glob("zeroclaw-*.whl")
    venv = tmp_path / "venv"
    base = (
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    )
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=120,
        capture_output=True,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    (Path(purelib) / "zz-deps.pth").write_text(f"{SITE_PACKAGES}\n")
    where = subprocess.run(
        [str(python), "-c", "import zeroclaw; print(zeroclaw.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=_environment(),
        timeout=60,
    ).stdout.strip()
    assert where.startswith(purelib), where  # the wheel's copy, not the checkout
    (tmp_path / "run").mkdir()
    _remember_and_recall(venv / "bin" / "zeroclaw", tmp_path / "run")
