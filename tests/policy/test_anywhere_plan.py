"""`full` / `unrestricted_filesystem` under Landlock (issue 16, C1; ADR 0039): the agent's
ruleset grants the filesystem *around* what the policy keeps out (the complement ruleset),
so policy and kernel agree on a read outside the workspace and on a forbidden path."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from tests.conftest import REPO
from zeroclaw.policy import abi_version, check_path, plan_for, rules_for
from zeroclaw.policy._landlock import READ_DIR, READ_EXEC, READ_FILE

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")


def _covered(path: Path, rules: tuple[tuple[str, int], ...]) -> list[int]:
    """The rights of every rule that lets `path` be read (a rule covers everything beneath
    it; a split directory's listing-only rule reads no file)."""
    p = PurePosixPath(os.path.realpath(path))
    return [
        rights
        for granted, rights in rules
        if rights & READ_FILE
        and (
            p == PurePosixPath(os.path.realpath(granted))
            or PurePosixPath(os.path.realpath(granted)) in p.parents
        )
    ]


def _tree(tmp_path: Path) -> dict[str, Path]:
    outside = tmp_path / "outside"
    (outside / "forbidden").mkdir(parents=True)
    (outside / "forbidden" / "secret.txt").write_text("no")
    (outside / "notes.txt").write_text("outside the workspace")
    (tmp_path / "state" / "agents" / "other" / "workspace").mkdir(parents=True)
    (tmp_path / "state" / "memory").mkdir(parents=True)
    (tmp_path / "ws").mkdir()
    return {
        "ws": tmp_path / "ws",
        "notes": outside / "notes.txt",
        "forbidden": outside / "forbidden",
        "secret": outside / "forbidden" / "secret.txt",
        "state": tmp_path / "state",
        "other": tmp_path / "elsewhere" / "ws",
    }


def test_full_grants_everything_around_forbidden_protected_and_other_workspaces(
    tmp_path: Path,
) -> None:
    t = _tree(tmp_path)
    t["other"].mkdir(parents=True)
    plan = plan_for(
        str(t["ws"]),
        protected=[str(t["state"])],
        anywhere=True,
        excluded=[str(t["forbidden"]), str(t["other"])],
    )
    assert _covered(t["notes"], plan.rules), "a path outside the workspace is granted"
    assert _covered(t["notes"], plan.rules)[-1] == -1  # every right: full may write there too
    for kept_out in (t["secret"], t["state"] / "memory", t["other"], Path("/proc/self/environ")):
        assert _covered(kept_out, plan.rules) == [], kept_out
    assert ("/", -1) not in plan.rules  # never the whole tree: only around what is kept out
    assert _covered(t["ws"], plan.rules)  # its own workspace, granted on its own rule


def test_readonly_unrestricted_filesystem_only_reads_around_them(tmp_path: Path) -> None:
    t = _tree(tmp_path)
    plan = plan_for(
        str(t["ws"]),
        protected=[str(t["state"])],
        anywhere=True,
        may_write=False,
        excluded=[str(t["forbidden"])],
    )
    assert set(_covered(t["notes"], plan.rules)) == {READ_EXEC}
    assert _covered(t["secret"], plan.rules) == []


def test_a_readonly_profile_gets_no_write_right_on_its_workspace_or_grants(tmp_path: Path) -> None:
    """readonly refuses writes in the tools; the kernel refuses them too (a readonly
    agent's own process could otherwise create files in its workspace)."""
    t = _tree(tmp_path)
    sibling = tmp_path / "sibling"
    plan = plan_for(
        str(t["ws"]), [(str(sibling), "read_write"), (str(t["notes"]), "write")], may_write=False
    )
    rights = dict(plan.rules)
    assert rights[str(t["ws"])] == READ_EXEC
    assert rights[str(sibling)] & ~READ_EXEC == 0
    assert rights[str(t["notes"])] == READ_DIR  # a write-only grant leaves a readonly agent nothing


def test_workspace_only_profiles_get_no_complement(tmp_path: Path) -> None:
    t = _tree(tmp_path)
    plan = plan_for(str(t["ws"]), protected=[str(t["state"])], excluded=[str(t["forbidden"])])
    assert _covered(t["notes"], plan.rules) == []


def test_a_forbidden_path_under_a_system_path_is_kept_out_but_not_a_system_path_itself() -> None:
    """/etc/ssl stays readable with `/etc` forbidden (DNS, TLS roots): the policy alone
    refuses there. A forbidden path deeper in a system path is kept out in the kernel too."""
    plan = plan_for("/nonexistent-ws", anywhere=True, excluded=["/etc", "/usr/share/doc"])
    assert _covered(Path("/etc/hostname"), plan.rules)
    assert _covered(Path("/usr/share/doc"), plan.rules) == []
    assert _covered(Path("/usr/bin"), plan.rules)
    assert ("/usr/share", READ_DIR) in plan.rules  # split, still listable (commands carve it)


SANDBOXED = """
import json, os, sys
from zeroclaw.policy import apply_sandbox, plan_for
workspace, state, forbidden, later, *targets = sys.argv[1:]
apply_sandbox(plan_for(workspace, protected=[state], anywhere=True, excluded=[forbidden]))
out = {}
for target in targets:
    try:
        with open(target) as fh:
            out[target] = fh.read()
    except OSError as exc:
        out[target] = os.strerror(exc.errno)
try:
    os.mkdir(later)
    out["later"] = "made"
except OSError as exc:
    out["later"] = os.strerror(exc.errno)
print(json.dumps(out))
"""


@needs_landlock
def test_policy_and_kernel_agree_for_full(tmp_path: Path) -> None:
    """In a real process under the full ruleset: a read outside the workspace succeeds,
    like the policy says; the forbidden path and the protected state dir are EACCES in
    the kernel, like the policy's forbidden_path. A directory made later next to the
    forbidden path is the one cell where the kernel is stricter than the policy."""
    t = _tree(tmp_path)
    (t["state"] / "memory" / "data.mdb").write_text("every agent's memory")
    later = t["forbidden"].parent / "made-later"
    targets = [str(t["notes"]), str(t["secret"]), str(t["state"] / "memory" / "data.mdb")]
    setup = [str(t["ws"]), str(t["state"]), str(t["forbidden"]), str(later)]
    result = subprocess.run(
        [sys.executable, "-c", SANDBOXED, *setup, *targets],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    denied = os.strerror(errno.EACCES)
    assert json.loads(result.stdout) == {
        targets[0]: "outside the workspace",
        targets[1]: denied,
        targets[2]: denied,
        # Writing into an existing directory next to the forbidden one is allowed (its
        # parent was split entry by entry, the parent itself is not granted): kernel stricter.
        "later": denied,
    }
    # And the policy says the same for the three paths it decides on.
    rules = rules_for(
        str(t["ws"]),
        workspace_only=False,
        may_write=True,
        forbidden=[str(t["forbidden"])],
        protected=[str(t["state"])],
    )
    assert check_path(rules, targets[0], "read").allowed
    assert check_path(rules, targets[1], "read").code == "forbidden_path"
    assert check_path(rules, targets[2], "read").code == "forbidden_path"
    assert check_path(rules, str(later), "write").allowed  # the kernel-stricter cell
