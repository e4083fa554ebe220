"""The in-process chat's sandbox (issue 16, C4; ADR 0039) when the kernel will not give
one: a seccomp filter makes landlock_create_ruleset fail with ENOSYS in the CLI process,
as on a kernel without Landlock. `sandbox = "landlock"` then refuses to run anything;
`auto` runs and says it has no sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import tomli_w

from tests.conftest import REPO
from tests.supervisor.harness import agent_entry, make_config

# Install a seccomp filter refusing landlock_create_ruleset (444) with ENOSYS, then run
# the CLI in this very process (the filter is inherited and cannot be lifted).
WITHOUT_LANDLOCK = """
import ctypes, runpy, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def op(code, jt, jf, k):
    return struct.pack("=HBBI", code, jt, jf, k)
program = b"".join([
    op(0x20, 0, 0, 0),  # ld [nr]
    op(0x15, 0, 1, 444),  # jeq landlock_create_ruleset
    op(0x06, 0, 0, 0x00050000 | 38),  # ret ERRNO(ENOSYS)
    op(0x06, 0, 0, 0x7FFF0000),  # ret ALLOW
])
buf = ctypes.create_string_buffer(program)
fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER
sys.argv = ["zeroclaw", *sys.argv[1:]]
runpy.run_module("zeroclaw", run_name="__main__")
"""


def chat_without_landlock(root: Path, sandbox: str, *args: str) -> subprocess.CompletedProcess[str]:
    doc = make_config(root, {"alpha": agent_entry()})
    doc["risk_profiles"]["sup"]["sandbox"] = sandbox
    config = root / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(doc))
    argv = ["--config", str(config), "-a", "alpha", "chat", "-m", "remember: x", *args]
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_LANDLOCK, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=120,
    )


def test_a_required_sandbox_that_cannot_be_had_in_process_runs_nothing(tmp_path: Path) -> None:
    as_json = chat_without_landlock(tmp_path, "landlock", "--json")
    assert as_json.returncode == 1, as_json.stderr
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "sandbox_unavailable", error
    assert 'sandbox = "landlock"' in error["message"] and "nothing was run" in error["message"]
    plain = chat_without_landlock(tmp_path, "landlock")
    assert plain.returncode == 1 and "sandbox_unavailable" not in plain.stdout
    assert "does not offer Landlock" in plain.stderr, plain.stderr
    assert not (tmp_path / "state" / "memory" / "data.mdb").exists()  # no turn ran


def test_auto_without_landlock_runs_and_says_so(tmp_path: Path) -> None:
    result = chat_without_landlock(tmp_path, "auto", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["sandbox_in_force"] is False
    assert "in-process without a sandbox" in result.stderr
    assert data["tool_calls"][0]["ok"] is True  # the turn ran, with the tools' policy
