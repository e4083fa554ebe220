"""Path policy against a real directory tree with real symlinks and real /proc links."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policy.helpers import rules
from zeroclaw.policy import check_path


@pytest.fixture
def gamma_process(tree: Path) -> Iterator[int]:
    """A live process whose cwd is gamma's workspace, for /proc/<pid>/cwd routes."""
    proc = subprocess.Popen(["sleep", "60"], cwd=tree / "ws" / "gamma")
    yield proc.pid
    proc.kill()
    proc.wait()


CASES = [
    # request, access, supervised (workspace_only) code, full code
    ("notes.txt", "read", None, None),
    ("notes.txt", "write", None, None),
    ("new/file.txt", "write", None, None),
    ("sub/../notes.txt", "read", None, None),
    ("link_self", "read", None, None),
    ("../beta/file", "read", None, None),
    ("../beta/file", "write", "path_not_allowed", "path_not_allowed"),
    ("link_beta", "read", None, None),
    ("link_beta", "write", "path_not_allowed", "path_not_allowed"),
    ("../gamma/file", "read", "path_not_allowed", "path_not_allowed"),
    ("link_gamma/file", "read", "path_not_allowed", "path_not_allowed"),
    ("../../outside/secret.txt", "read", "path_not_allowed", None),
    ("link_out", "read", "path_not_allowed", None),
    ("chain1/secret.txt", "read", "path_not_allowed", None),
    ("dangling_out", "write", "path_not_allowed", None),
    ("link_forbidden", "read", "forbidden_path", "forbidden_path"),
    ("../../outside/forbidden/key", "read", "forbidden_path", "forbidden_path"),
    ("", "read", "path_not_allowed", "path_not_allowed"),
    ("bad\x00name", "read", "path_not_allowed", "path_not_allowed"),
]


@pytest.mark.parametrize(("request_", "access", "supervised", "full"), CASES)
def test_escape_routes(
    tree: Path, request_: str, access: str, supervised: str | None, full: str | None
) -> None:
    for workspace_only, expected in ((True, supervised), (False, full)):
        decision = check_path(rules(tree, workspace_only=workspace_only), request_, access)  # type: ignore[arg-type]
        assert decision.code == expected, (request_, workspace_only, decision)
        assert decision.allowed == (expected is None)


def test_absolute_paths(tree: Path) -> None:
    own = str(tree / "ws" / "alpha" / "notes.txt")
    out = str(tree / "outside" / "secret.txt")
    assert check_path(rules(tree), own, "read").allowed
    assert check_path(rules(tree), out, "read").code == "path_not_allowed"
    assert check_path(rules(tree, workspace_only=False), out, "read").allowed
    assert check_path(rules(tree), "~/.ssh/id_rsa", "read").code == "path_not_allowed"


def test_proc_self_root_route(tree: Path) -> None:
    route = f"/proc/self/root{tree}/outside/secret.txt"
    decision = check_path(rules(tree), route, "read")
    assert decision.code == "path_not_allowed"
    assert decision.path == PurePosixPath(tree / "outside" / "secret.txt")
    assert (
        check_path(rules(tree), f"/proc/self/root{tree}/ws/gamma/file", "read").code
        == "path_not_allowed"
    )
    forbidden = f"/proc/self/root{tree}/outside/forbidden/key"
    assert check_path(rules(tree, workspace_only=False), forbidden, "read").code == "forbidden_path"


def test_proc_pid_cwd_route_into_another_workspace(tree: Path, gamma_process: int) -> None:
    route = f"/proc/{gamma_process}/cwd/file"
    for workspace_only in (True, False):
        decision = check_path(rules(tree, workspace_only=workspace_only), route, "read")
        assert decision.code == "path_not_allowed", decision
        assert decision.path == PurePosixPath(tree / "ws" / "gamma" / "file")


def test_readonly_refuses_every_write(tree: Path) -> None:
    ro = rules(tree, may_write=False)
    assert check_path(ro, "notes.txt", "write").code == "read_only_profile"
    assert check_path(ro, "notes.txt", "read").allowed
    assert check_path(ro, "link_forbidden", "write").code == "forbidden_path"  # forbidden first


SEGMENTS = [
    "..",
    ".",
    "sub",
    "notes.txt",
    "link_out",
    "chain1",
    "link_beta",
    "link_gamma",
    "link_forbidden",
    "dangling_out",
    "file",
    "secret.txt",
    "ws",
    "outside",
    "beta",
    "gamma",
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=7),
    st.booleans(),
    st.sampled_from(["read", "write"]),
    st.booleans(),
)
def test_no_spelling_gets_out(
    tree: Path, parts: list[str], absolute: bool, access: str, workspace_only: bool
) -> None:
    """Whatever the spelling, an allowed path really is somewhere the rules allow."""
    base = str(tree / "ws" / "alpha") + "/" if absolute else ""
    r = rules(tree, workspace_only=workspace_only)
    decision = check_path(r, base + "/".join(parts), access)  # type: ignore[arg-type]
    if not decision.allowed:
        return
    real = Path(
        os.path.realpath(
            base + "/".join(parts) if absolute else tree / "ws" / "alpha" / "/".join(parts)
        )
    )
    assert decision.path == PurePosixPath(real)
    inside = real == tree / "ws" / "alpha" or (tree / "ws" / "alpha") in real.parents
    in_beta = (tree / "ws" / "beta") in real.parents or real == tree / "ws" / "beta"
    in_gamma = (tree / "ws" / "gamma") in real.parents or real == tree / "ws" / "gamma"
    forbidden = (
        tree / "outside" / "forbidden"
    ) in real.parents or real == tree / "outside" / "forbidden"
    assert not in_gamma and not forbidden
    if in_beta:
        assert access == "read"
    if workspace_only:
        assert inside or in_beta


def test_resolving_many_workspaces_sharing_parents_gives_realpath_answers(tmp_path: Path) -> None:
    from zeroclaw.policy._paths import realpath_sharing_parents

    (tmp_path / "real" / "agents" / "a" / "workspace").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "real")  # a symlinked state dir
    (tmp_path / "real" / "agents" / "b").mkdir()
    (tmp_path / "real" / "agents" / "b" / "workspace").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    paths = [f"{tmp_path}/state/agents/{alias}/workspace" for alias in ("a", "b", "missing")] + [
        f"{tmp_path}/state/agents/../agents/a/workspace",
        f"{tmp_path}/state/./agents//b/workspace/",
        f"{tmp_path}/loop/x",
        "relative/path",
        "/",
    ]
    real = realpath_sharing_parents()
    for path in paths:
        assert real(path) == os.path.realpath(path), path
