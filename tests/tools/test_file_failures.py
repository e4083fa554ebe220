"""Every way a file tool can fail is a typed result, never an exception, on a real tree;
each case runs through openat2 and through the O_NOFOLLOW walk that replaces it."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
import trio

from tests.conftest import PATIENCE
from tests.tmpfs import tiny_tmpfs
from zeroclaw.policy import PathRules, rules_for
from zeroclaw.tools import ERROR_CODES, file_list, file_read, file_write
from zeroclaw.tools._beneath import make_dirs_beneath, open_beneath, open_root
from zeroclaw.tools._files import failure

STRATEGIES = [pytest.param(True, id="openat2"), pytest.param(False, id="walk")]


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    """A workspace holding one of each kind of file, plus other agents' workspaces."""
    alpha = tmp_path / "ws" / "alpha"
    for name in ("alpha", "beta", "gamma"):
        (tmp_path / "ws" / name).mkdir(parents=True)
    (tmp_path / "ws" / "gamma" / "secret").write_text("gamma's")
    (alpha / "own.txt").write_text("mine")
    (alpha / "dir").mkdir()
    os.mkfifo(alpha / "fifo")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(alpha / "sock"))
    (alpha / "link-to-gamma").symlink_to(tmp_path / "ws" / "gamma")
    (tmp_path / "forbidden").mkdir()
    (tmp_path / "forbidden" / "key").write_text("key")
    (tmp_path / "ws" / "beta" / "to-forbidden").symlink_to(tmp_path / "forbidden" / "key")
    yield alpha
    listener.close()


def alpha_rules(ws: Path, *, workspace_only: bool = True) -> PathRules:
    root = ws.parent
    return rules_for(
        str(ws),
        workspace_only=workspace_only,
        may_write=True,
        forbidden=[str(root.parent / "forbidden")],
        grants=[("beta", str(root / "beta"), "read")],
        other_workspaces=[str(root / "beta"), str(root / "gamma")],
    )


def code(result: object) -> str | None:
    assert result.__class__.__name__ == "ToolResult"
    error = result.error_code  # type: ignore[attr-defined]
    assert error is None or error in ERROR_CODES
    return error  # type: ignore[no-any-return]


@pytest.mark.parametrize("use_openat2", STRATEGIES)
def test_non_regular_files_are_refused_without_opening_them(ws: Path, use_openat2: bool) -> None:
    r = alpha_rules(ws)
    full = alpha_rules(ws, workspace_only=False)
    for result, detail in [
        (file_read(r, "fifo", use_openat2=use_openat2), "a FIFO"),
        (file_read(r, "sock", use_openat2=use_openat2), "a socket"),
        (file_read(r, "dir", use_openat2=use_openat2), "a directory"),
        (file_read(full, "/dev/zero", use_openat2=use_openat2), "a device"),
        (file_write(r, "fifo", "x", use_openat2=use_openat2), "a FIFO"),
        (file_write(r, "dir", "x", use_openat2=use_openat2), "a directory"),
        (file_write(r, ".", "x", use_openat2=use_openat2), "a directory"),
        (file_write(full, "/dev/null", "x", use_openat2=use_openat2), "a device"),
    ]:
        assert (result.ok, code(result)) == (False, "not_a_regular_file"), result
        assert detail in result.detail
    assert (ws / "fifo").exists() and not (ws / "fifo").is_file()  # not replaced


async def test_a_fifo_read_returns_at_once(ws: Path) -> None:
    """No writer will ever come: a blocking open would hang this agent forever."""
    with trio.fail_after(PATIENCE):  # a guard against a hang, not a timing claim
        result = await trio.to_thread.run_sync(
            file_read, alpha_rules(ws), "fifo", abandon_on_cancel=True
        )
    assert result.error_code == "not_a_regular_file"


@pytest.mark.parametrize("use_openat2", STRATEGIES)
def test_nested_under_a_file_is_not_a_directory(ws: Path, use_openat2: bool) -> None:
    r = alpha_rules(ws)
    for result in [
        file_read(r, "own.txt/x", use_openat2=use_openat2),
        file_write(r, "own.txt/x", "hi", use_openat2=use_openat2),
        file_write(r, "own.txt/x/y/z", "hi", use_openat2=use_openat2),
        file_list(r, "own.txt", use_openat2=use_openat2),
        file_list(r, "fifo", use_openat2=use_openat2),
    ]:
        assert (result.ok, code(result)) == (False, "not_a_directory"), result
    assert (ws / "own.txt").read_text() == "mine"


@pytest.mark.parametrize("use_openat2", STRATEGIES)
def test_missing_long_and_odd_names(ws: Path, use_openat2: bool) -> None:
    r = alpha_rules(ws)
    missing = file_read(r, "nope.txt", use_openat2=use_openat2)
    assert code(missing) == "not_found" and "ENOENT" in missing.detail
    long_name = file_write(r, "n" * 300, "x", use_openat2=use_openat2)
    assert code(long_name) == "io_error" and "ENAMETOOLONG" in long_name.detail
    deep = file_write(r, "/".join(["d"] * 2100), "x", use_openat2=use_openat2)
    assert code(deep) in ("path_not_allowed", "io_error"), deep  # too long to name a file
    for bad in ("a\x00b", "", "\ud800x"):
        assert code(file_read(r, bad, use_openat2=use_openat2)) == "path_not_allowed"
        assert code(file_write(r, bad, "x", use_openat2=use_openat2)) == "path_not_allowed"
    surrogate = file_write(r, "ok.txt", "\ud800", use_openat2=use_openat2)
    assert code(surrogate) == "bad_arguments"
    big = file_write(r, "big.txt", "x" * (1024 * 1024 + 1), use_openat2=use_openat2)
    assert code(big) == "too_large"


def test_proc_links_the_kernel_will_not_read_are_refused(ws: Path) -> None:
    """`read /proc/1/cwd/x` raised PermissionError out of the policy's realpath."""
    for rules in (alpha_rules(ws), alpha_rules(ws, workspace_only=False)):
        result = file_read(rules, "/proc/1/cwd/x")
        assert code(result) in ("path_not_allowed", "not_found"), result
        assert code(file_write(rules, "/proc/1/cwd/x", "x")) in ("path_not_allowed", "not_found")
        assert code(file_list(rules, "/proc/1/cwd")) in ("path_not_allowed", "io_error")


def test_refusals_name_the_request_not_where_a_symlink_points(ws: Path) -> None:
    r = alpha_rules(ws)
    gamma = str(ws.parent / "gamma")
    forbidden = str(ws.parent.parent / "forbidden")
    into_gamma = file_read(r, "link-to-gamma/secret")
    assert code(into_gamma) == "path_not_allowed"
    assert "'link-to-gamma/secret'" in into_gamma.detail
    assert "another agent's workspace" in into_gamma.detail
    assert gamma not in into_gamma.detail and "secret'" in into_gamma.detail
    to_forbidden = file_read(r, "../beta/to-forbidden")  # a symlink inside beta's workspace
    assert code(to_forbidden) == "forbidden_path"
    assert forbidden not in to_forbidden.detail and "key" not in to_forbidden.detail
    assert "'../beta/to-forbidden'" in to_forbidden.detail
    outside = file_list(r, "link-to-gamma/../../../forbidden")
    assert forbidden not in outside.detail


@pytest.fixture
def tiny_disk(ws: Path) -> Iterator[Path]:
    """A 16 KiB tmpfs inside the workspace: a real ENOSPC from a real filesystem."""
    with tiny_tmpfs(ws / "disk") as disk:
        yield disk


@pytest.mark.parametrize("use_openat2", STRATEGIES)
def test_a_full_disk_is_no_space_and_keeps_the_old_content(
    ws: Path, tiny_disk: Path, use_openat2: bool
) -> None:
    r = alpha_rules(ws)
    assert file_write(r, "disk/notes.txt", "old", use_openat2=use_openat2).ok
    result = file_write(r, "disk/notes.txt", "x" * 64 * 1024, use_openat2=use_openat2)
    assert (result.ok, code(result)) == (False, "no_space"), result
    assert "ENOSPC" in result.detail
    assert (tiny_disk / "notes.txt").read_text() == "old"
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["notes.txt"]  # no temp left


@pytest.mark.parametrize("use_openat2", STRATEGIES)
def test_writes_replace_whole_files_and_keep_their_mode(ws: Path, use_openat2: bool) -> None:
    r = alpha_rules(ws)
    (ws / "mode.txt").write_text("before")
    os.chmod(ws / "mode.txt", 0o640)
    assert file_write(r, "mode.txt", "after", use_openat2=use_openat2).ok
    assert (ws / "mode.txt").read_text() == "after"
    assert (ws / "mode.txt").stat().st_mode & 0o777 == 0o640
    assert file_write(r, "new/deeper/file.txt", "made", use_openat2=use_openat2).ok
    assert (ws / "new" / "deeper" / "file.txt").read_text() == "made"
    assert file_read(r, "new/deeper/file.txt", use_openat2=use_openat2).output == "made"
    assert "file.txt" in file_list(r, "new/deeper", use_openat2=use_openat2).output
    assert not [p for p in ws.rglob(".*.zc-*")]


@pytest.mark.parametrize("use_openat2", STRATEGIES)
def test_the_walk_never_follows_a_symlink(ws: Path, use_openat2: bool) -> None:
    root = open_root(PurePosixPath(ws), use_openat2=use_openat2)
    try:
        for rel, err in [
            ("link-to-gamma/secret", errno.ELOOP),
            ("link-to-gamma", errno.ELOOP),
            ("../gamma/secret", errno.EXDEV),
        ]:
            with pytest.raises(OSError, match=rf"\[Errno {err}\]") as caught:
                os.close(
                    open_beneath(root, PurePosixPath(rel), os.O_RDONLY, use_openat2=use_openat2)
                )
            assert caught.value.errno == err, rel
        with pytest.raises(OSError, match=os.strerror(errno.ELOOP)) as made:
            make_dirs_beneath(root, PurePosixPath("link-to-gamma/new"), use_openat2=use_openat2)
        assert made.value.errno == errno.ELOOP
        assert not (ws.parent / "gamma" / "new").exists()
    finally:
        os.close(root)


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (errno.ENOSPC, "no_space"),
        (errno.EDQUOT, "no_space"),
        (errno.EFBIG, "too_large"),
        (errno.ENOENT, "not_found"),
        (errno.ENOTDIR, "not_a_directory"),
        (errno.EISDIR, "not_a_regular_file"),
        (errno.ELOOP, "path_not_allowed"),
        (errno.EXDEV, "path_not_allowed"),
        (errno.EACCES, "io_error"),
        (errno.EIO, "io_error"),
        (errno.EAGAIN, "io_error"),
    ],
)
def test_every_errno_is_a_code_with_its_name(number: int, expected: str) -> None:
    result = failure(OSError(number, os.strerror(number)), "'x'")
    assert (result.ok, result.error_code) == (False, expected)
    if expected == "io_error":
        assert errno.errorcode[number] in result.detail and result.detail.startswith("'x'")
