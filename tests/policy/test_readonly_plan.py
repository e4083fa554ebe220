"""A sub-agent runtime's sandbox (issue 12): read its snapshot, the system and Python; write
nothing anywhere; read nothing else of the state dir the snapshot lives in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from zeroclaw.policy import SYSTEM_READ_ONLY, abi_version, plan_readonly
from zeroclaw.policy._landlock import READ, READ_FILE, WRITE


def test_the_plan_grants_no_write_right_at_all(tmp_path: Path) -> None:
    state = tmp_path / "state"
    root = state / "revisions" / "abc"
    plan = plan_readonly(str(root), [str(state)])
    assert plan.rules[0] == (str(root), READ)
    assert all(rights & WRITE == 0 and rights != -1 for _, rights in plan.rules)
    assert ("/dev/null", READ_FILE) in plan.rules
    granted = {path for path, _ in plan.rules}
    assert set(SYSTEM_READ_ONLY) & granted  # the system paths around nothing protected


def test_the_python_path_is_granted_around_the_protected_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "revisions" / "abc").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    plan = plan_readonly(str(state / "revisions" / "abc"), [str(state)], extra_read=[str(tmp_path)])
    granted = [path for path, _ in plan.rules]
    assert str(tmp_path) not in granted and str(tmp_path / "lib") in granted
    assert not any(p == str(state) or p.startswith(f"{state}/") for p in granted[1:])


CONFINED = r"""
import json, os, sys
from zeroclaw.policy import apply_sandbox, plan_readonly
# What the runtime has loaded before serve_agent confines it (trio, its own modules).
from zeroclaw.agent._subagent import load_revision
from zeroclaw.tools import skill_read

root, state, tmp = sys.argv[1:4]
apply_sandbox(plan_readonly(root, [state]))
out = {}

def attempt(name, action):
    try:
        action()
        out[name] = "ok"
    except OSError as exc:
        out[name] = type(exc).__name__

def write(path, flags=os.O_WRONLY):
    os.close(os.open(path, flags, 0o600))

attempt("read in root", lambda: open(os.path.join(root, "SYSTEM.md")).read())
attempt("write in root", lambda: write(os.path.join(root, "SYSTEM.md")))
attempt("create in root", lambda: write(os.path.join(root, "new"), os.O_WRONLY | os.O_CREAT))
attempt("create in tmp", lambda: write(os.path.join(tmp, "new"), os.O_WRONLY | os.O_CREAT))
attempt("write /dev/null", lambda: write("/dev/null"))
attempt("read sibling", lambda: open(os.path.join(state, "revisions", "other", "secret")).read())
attempt("list state", lambda: os.listdir(state))
attempt("read system", lambda: open("/etc/passwd").read())
# Python still imports after confinement, and the runtime reads its revision there too.
import decimal  # noqa: F401  (not imported before: read from the granted stdlib)
revision = load_revision(root, "summarizer", "abc")
out["prompt after confinement"] = revision.system
out["skill_read in sandbox"] = skill_read(root, "SYSTEM.md").output
print(json.dumps(out))
"""


@pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
def test_the_kernel_lets_a_confined_child_read_its_snapshot_and_nothing_more(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    root = state / "revisions" / "abc"
    root.mkdir(parents=True)
    (root / "SYSTEM.md").write_text("You are summarizer.")
    (state / "revisions" / "other").mkdir()
    (state / "revisions" / "other" / "secret").write_text("another revision")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", CONFINED, str(root), str(state), str(scratch)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "read in root": "ok",
        "write in root": "PermissionError",
        "create in root": "PermissionError",
        "create in tmp": "PermissionError",
        "write /dev/null": "PermissionError",
        "read sibling": "PermissionError",
        "list state": "PermissionError",
        "read system": "ok",
        "prompt after confinement": "You are summarizer.",
        "skill_read in sandbox": "You are summarizer.",
    }
    assert not (scratch / "new").exists() and not (root / "new").exists()
