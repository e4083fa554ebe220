"""Landlock: the agent process confines its own file access, enforced by the kernel (ADR 0008).

A few raw syscalls through ctypes (no maintained binding covers ABI 1-7 with a stable API).
The agent calls `apply_sandbox` once, before it serves anything: afterwards it can read and
write its workspace, read (or write, per grant) granted sibling workspaces, and only read
the system and Python paths it needs to keep running. Landlock judges the file actually
reached, so `..`, symlinks and `/proc/<pid>/cwd` routes gain nothing.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from .._prctl import PR_SET_NO_NEW_PRIVS, prctl

# Syscall numbers are the same on x86_64 and aarch64 (the generic table).
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE

SYSTEM_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt")
DEVICES_READ_WRITE = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class SandboxUnavailable(Exception):
    """The kernel has no usable Landlock (too old, disabled, or blocked by seccomp)."""


def _handled(abi: int) -> int:
    rights = READ_EXEC | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR
    rights |= MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def abi_version() -> int:
    """The kernel's Landlock ABI, or 0 when there is none."""
    if platform.system() != "Linux":
        return 0
    version = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    return max(int(version), 0)


@dataclass(frozen=True)
class SandboxPlan:
    """What stays reachable: (path, rights) pairs; rights are masked to the kernel's ABI."""

    rules: tuple[tuple[str, int], ...]


def _entries(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []  # not a directory, or unreadable: nothing beneath to grant


def _beneath(path: PurePosixPath, root: PurePosixPath) -> bool:
    return path == root or root in path.parents


def grant_around(
    path: str,
    protected: Sequence[str],
    entries: Callable[[str], Sequence[str]] = _entries,
    resolve: Callable[[str], str] = os.path.realpath,
) -> tuple[str, ...]:
    """What to grant instead of `path` so that no protected path is reachable: `path`
    itself when nothing protected lies beneath it, nothing when it lies inside a protected
    path, else its entries one by one, descending only along the way to a protected path.

    Landlock rights on a directory cover everything beneath it and the kernel has no deny
    rule, so a protected file under a granted tree (/etc/zeroclaw/zeroclaw.toml under /etc)
    is kept out by granting its siblings instead. Judged on real paths: a granted entry is
    opened following symlinks, so a link pointing into the state dir is judged by where it
    points. The same splitting serves shell-command rulesets (see ADR 0015)."""
    roots = [PurePosixPath(p) for p in protected]
    out: list[str] = []
    split: set[PurePosixPath] = set()

    def visit(candidate: str) -> None:
        real = PurePosixPath(resolve(candidate))
        if any(_beneath(real, root) for root in roots):
            return
        if not any(_beneath(root, real) for root in roots):
            out.append(candidate)
            return
        if real in split:
            return  # a link back up the tree (/usr/bin/X11 -> .): already split there
        split.add(real)
        for name in entries(str(real)):  # a directory above something protected: split it
            visit(str(real / name))

    visit(path)
    return tuple(out)


def plan_for(
    workspace: str,
    grants: Iterable[tuple[str, str]] = (),  # (path, "read" | "write" | "read_write")
    extra_read: Iterable[str] = (),
    protected: Iterable[str] = (),
) -> SandboxPlan:
    """The agent's rules. `protected` (the daemon's own files, ADR 0015) is never granted:
    system and Python paths above one are granted entry by entry around it. Workspaces
    are granted whole; config validation keeps protected paths out of every workspace."""
    shielded = sorted({q for p in protected for q in (p, os.path.realpath(p))})
    everything = -1  # masked to the handled set when applied
    rules: list[tuple[str, int]] = [(workspace, everything)]
    for path, mode in grants:
        write = WRITE_FILE | REMOVE_FILE | REMOVE_DIR | MAKE_REG | MAKE_DIR | TRUNCATE
        rights = {"read": READ, "write": write | READ_DIR, "read_write": READ | write}[mode]
        rules.append((path, rights))
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p)}
    for path in (*SYSTEM_READ_ONLY, *sorted(python), *extra_read):
        for granted in grant_around(path, shielded):
            rules.append((granted, READ_EXEC))
    for device in DEVICES_READ_WRITE:
        rules.append((device, READ_FILE | WRITE_FILE))
    return SandboxPlan(tuple(rules))


def apply_sandbox(plan: SandboxPlan) -> int:
    """Restrict this process (and all it starts) for good. Returns the ABI used."""
    abi = abi_version()
    if abi < 1:
        raise SandboxUnavailable("this kernel does not offer Landlock")
    handled = _handled(abi)
    attr = struct.pack("=Q", handled)  # handled_access_fs only: valid for every ABI
    ruleset = _libc.syscall(
        SYS_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0
    )
    if ruleset < 0:
        err = ctypes.get_errno()
        raise SandboxUnavailable(f"landlock_create_ruleset failed: {os.strerror(err)}")
    try:
        for path, rights in plan.rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this machine does not have
            try:
                allowed = handled if rights == -1 else rights & handled
                if not os.path.isdir(path):
                    # Directory-only rights are invalid on a file.
                    allowed &= READ_FILE | WRITE_FILE | EXECUTE | TRUNCATE | IOCTL_DEV
                beneath = struct.pack("=Qi", allowed, fd)
                if (
                    _libc.syscall(
                        SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.c_char_p(beneath), 0
                    )
                    < 0
                ):
                    err = ctypes.get_errno()
                    raise SandboxUnavailable(
                        f"landlock_add_rule({path}) failed: {os.strerror(err)}"
                    )
            finally:
                os.close(fd)
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
        except OSError as exc:
            raise SandboxUnavailable(f"PR_SET_NO_NEW_PRIVS failed: {exc.strerror}") from None
        if _libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
            err = ctypes.get_errno()
            raise SandboxUnavailable(f"landlock_restrict_self failed: {os.strerror(err)}")
    finally:
        os.close(ruleset)
    return abi
