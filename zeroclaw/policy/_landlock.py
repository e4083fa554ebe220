"""Landlock: the agent process confines its own file access, enforced by the kernel (ADR 0008).

A few raw syscalls through ctypes (no maintained binding covers ABI 1-7 with a stable API).
The agent calls `apply_sandbox` once, before it serves anything: afterwards it can read and
write its workspace, read (or write, per grant) granted sibling workspaces, and only read
the system and Python paths it needs to keep running. Landlock judges the file actually
reached, so `..`, symlinks and `/proc/<pid>/cwd` routes gain nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import shutil
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, get_args

from .._prctl import PR_SET_NO_NEW_PRIVS, prctl
from ._caps import cap_last_cap, drop_capabilities
from ._confine import NET_CONNECT_TCP, Gap, ProcessConfinement, decide_confinement
from ._seccomp import forbid_user_namespaces

# Syscall numbers are the same on x86_64 and aarch64 (the generic table).
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2  # ABI 4

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

# Scopes (ABI 6): what a sandboxed process may not reach outside its own Landlock domain.
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # connect to an abstract socket made outside (ADR 0011)
SCOPE_SIGNAL = 1 << 1  # signal a process outside (ADR 0043)

READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE

SYSTEM_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt")
# Files under the system paths that hold the machine's secrets. Kept out of every ruleset:
# a daemon run as root starts agents with no capability, but their uid still owns these
# (root:shadow 0640), so only Landlock keeps a root agent from reading them (ADR 0043).
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_dsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_rsa_key",
)
DEVICES_READ_WRITE = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty")

log = logging.getLogger("zeroclaw.landlock")

# Names of the filesystem rights, for the debug log of the rules applied.
RIGHT_NAMES = (
    (EXECUTE, "execute"),
    (WRITE_FILE, "write_file"),
    (READ_FILE, "read_file"),
    (READ_DIR, "read_dir"),
    (REMOVE_DIR, "remove_dir"),
    (REMOVE_FILE, "remove_file"),
    (MAKE_CHAR, "make_char"),
    (MAKE_DIR, "make_dir"),
    (MAKE_REG, "make_reg"),
    (MAKE_SOCK, "make_sock"),
    (MAKE_FIFO, "make_fifo"),
    (MAKE_BLOCK, "make_block"),
    (MAKE_SYM, "make_sym"),
    (REFER, "refer"),
    (TRUNCATE, "truncate"),
    (IOCTL_DEV, "ioctl_dev"),
)


def describe_rights(rights: int, handled: int) -> str:
    """`rights` as words: "all" when it is every handled right, "all but execute" when
    only that is missing, else the names joined by "+"."""
    rights &= handled
    if rights == handled:
        return "all"
    if rights == handled & ~EXECUTE:
        return "all but execute"
    names = [name for bit, name in RIGHT_NAMES if rights & bit]
    return "+".join(names) if names else "none"


def _log_rules(what: str, abi: int, handled: int, applied: Sequence[tuple[str, int]]) -> None:
    log.debug(
        "landlock ABI %d, %s: %d rules: %s",
        abi,
        what,
        len(applied),
        "; ".join(f"{path} {describe_rights(rights, handled)}" for path, rights in applied),
        extra={"landlock_abi": abi, "rules": len(applied)},
    )


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


def ruleset_attr(handled_fs: int, abi: int, confinement: ProcessConfinement | None = None) -> bytes:
    """struct landlock_ruleset_attr for this ABI: handled_access_fs; from ABI 4 on also
    handled_access_net, and from ABI 6 on `scoped`. Without `confinement` (the older
    callers): no TCP rule and only the abstract-socket scope, which keeps the sandbox off
    the daemon's abstract control socket."""
    if confinement is None:
        net, scoped = 0, SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0
    else:
        net, scoped = confinement.handled_net, confinement.scopes
    if abi >= 6:
        return struct.pack("=QQQ", handled_fs, net if abi >= 4 else 0, scoped)
    if abi >= 4:
        return struct.pack("=QQ", handled_fs, net)
    return struct.pack("=Q", handled_fs)  # handled_access_fs only: valid for every ABI


def _add_port_rules(ruleset: int, confinement: ProcessConfinement | None) -> None:
    """One connect rule per allowed port (only when TCP is handled: a rule on an
    unhandled access is EINVAL)."""
    if confinement is None or not confinement.handled_net & NET_CONNECT_TCP:
        return
    for port in confinement.connect_ports:
        attr = struct.pack("=QQ", NET_CONNECT_TCP, port)
        if _libc.syscall(SYS_ADD_RULE, ruleset, RULE_NET_PORT, ctypes.c_char_p(attr), 0) < 0:
            err = ctypes.get_errno()
            raise SandboxUnavailable(f"landlock_add_rule(port {port}) failed: {os.strerror(err)}")


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
    # Compared part by part: `root in path.parents` builds a path object per ancestor, and
    # this runs for every candidate and protected root at every agent start (~20 ms).
    return path.parts[: len(root.parts)] == root.parts


class PathSet:
    """Paths to keep out, asked about in the time of a path's depth, not of their number:
    every agent's plan keeps out every other agent's workspace, so with 1,100 agents each
    start compared each candidate with ~1,100 roots (0.3 s of CPU per start, ADR 0069).
    `roots` are the outermost ones: one beneath another adds nothing kept out."""

    def __init__(self, paths: Iterable[str | PurePosixPath]) -> None:
        given = sorted({PurePosixPath(p).parts for p in paths})
        roots: list[tuple[str, ...]] = []
        for parts in given:  # sorted: an ancestor comes before what lies beneath it
            if not roots or parts[: len(roots[-1])] != roots[-1]:
                roots.append(parts)
        self.given = tuple(given)
        self.roots = tuple(roots)
        self._roots = frozenset(roots)
        self._above = frozenset(g[:k] for g in given for k in range(1, len(g) + 1))

    def covers(self, path: PurePosixPath) -> bool:
        """Whether `path` is one of the paths or lies beneath one."""
        parts = path.parts
        return any(parts[:k] in self._roots for k in range(1, len(parts) + 1))

    def holds(self, path: PurePosixPath) -> bool:
        """Whether one of the paths is `path` or lies beneath it."""
        return path.parts in self._above


def grant_around(
    path: str,
    protected: Iterable[str] | PathSet,
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
    points. `carve` below splits shell-command rulesets the same way but skips symlink
    entries instead of judging their targets: the two are to become one (ADR 0015)."""
    roots = protected if isinstance(protected, PathSet) else PathSet(protected)
    out: list[str] = []
    split: set[PurePosixPath] = set()

    def visit(candidate: str) -> None:
        real = PurePosixPath(resolve(candidate))
        if roots.covers(real):
            return
        if not roots.holds(real):
            out.append(candidate)
            return
        if real in split:
            return  # a link back up the tree (/usr/bin/X11 -> .): already split there
        split.add(real)
        for name in entries(str(real)):  # a directory above something protected: split it
            visit(str(real / name))

    visit(path)
    return tuple(out)


def split_directories(
    path: str,
    protected: Iterable[str] | PathSet,
    resolve: Callable[[str], str] = os.path.realpath,
) -> tuple[str, ...]:
    """The directories `grant_around(path, protected)` splits entry by entry: `path` and
    its descendants that lie above a protected path, real paths."""
    roots = protected if isinstance(protected, PathSet) else PathSet(protected)
    top = PurePosixPath(resolve(path)).parts
    if not roots.holds(PurePosixPath(*top)):
        return ()
    out: set[tuple[str, ...]] = set()
    for root in roots.given:
        if len(root) > len(top) and root[: len(top)] == top:
            out.update(root[:k] for k in range(len(top), len(root)))
    return tuple(str(PurePosixPath(*d)) for d in sorted(out))


def plan_for(
    workspace: str,
    grants: Iterable[tuple[str, str]] = (),  # (path, "read" | "write" | "read_write")
    extra_read: Iterable[str] = (),
    protected: Iterable[str] = (),
    *,
    anywhere: bool = False,
    may_write: bool = True,
    excluded: Iterable[str] = (),
    code: Iterable[str] = (),
) -> SandboxPlan:
    """The agent's rules. `protected` (the daemon's own files, ADR 0015) is never granted:
    system and Python paths above one are granted entry by entry around it. Workspaces
    are granted whole; config validation keeps protected paths out of every workspace.

    `excluded`: the operator's forbidden paths and every other agent's workspace. Under
    the system paths they are kept out too, unless one is a system path or above one
    (`/etc` itself): the agent needs those to run (DNS, TLS roots, the loader), so there
    the policy alone refuses; so it does inside the agent's own Python paths.

    `may_write` false (readonly): read and execute only, workspace and grants included.

    `anywhere` (a `full` or `unrestricted_filesystem` profile, whose policy lifts
    workspace_only): the whole filesystem *around* the protected and excluded paths and
    `/proc` — the complement ruleset of ADR 0039. Landlock only allows, so at each
    ancestor of a kept-out path every sibling entry that exists now is granted; one
    created there later is denied by the kernel though the policy allows it (the "kernel
    stricter" cell of the table).

    `code` (the daemon's own code, ADR 0044) is read and execute only, for every profile:
    carved out of the complement of `anywhere` and out of a workspace or grant holding
    one, then granted READ_EXEC (around the protected paths) like the Python paths, so
    the process also reads its code where an editable finder maps it."""
    code_roots = sorted({q for p in code for q in (p, os.path.realpath(p))})
    shielded = sorted({q for p in (*protected, *SYSTEM_SECRETS) for q in (p, os.path.realpath(p))})
    kept_out = sorted({q for p in excluded for q in (p, os.path.realpath(p))})
    system_roots = PathSet(SYSTEM_READ_ONLY)
    # A kept-out path at or above a system root is left to the policy (see above).
    deep = [p for p in kept_out if not system_roots.holds(PurePosixPath(p))]
    everything = -1  # masked to the handled set when applied
    # A profile that may not write (readonly) gets no write right from the kernel either,
    # in its own workspace or through a sibling grant: policy and kernel agree (ADR 0039).
    mask = everything if may_write else READ_EXEC
    rules: list[tuple[str, int]] = []

    def writable(path: str, rights: int) -> None:
        # Never a write right under the daemon's code, even in a workspace holding some.
        if rights & ~READ_EXEC and code_roots:
            rules.extend((granted, rights) for granted in grant_around(path, code_roots))
        else:
            rules.append((path, rights))

    writable(workspace, mask)
    for path, mode in grants:
        write = WRITE_FILE | REMOVE_FILE | REMOVE_DIR | MAKE_REG | MAKE_DIR | TRUNCATE
        rights = {"read": READ, "write": write | READ_DIR, "read_write": READ | write}[mode]
        writable(path, rights & mask)
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p)}
    python.update(code_roots)
    around = PathSet({*shielded, *deep})
    shielded_set = PathSet(shielded)
    for path in (*SYSTEM_READ_ONLY, *extra_read):
        for granted in grant_around(path, around):
            rules.append((granted, READ_EXEC))
        # A system directory split around a kept-out path stays listable (names only, as
        # when it was granted whole): the agent lists it to carve its commands' rulesets.
        for split in split_directories(path, around):
            rules.append((split, READ_DIR))
    for path in sorted(python):  # its own Python: only the daemon's files are kept out
        for granted in grant_around(path, shielded_set):
            rules.append((granted, READ_EXEC))
    if anywhere:
        outside = sorted({*shielded, *kept_out, *code_roots, "/proc"})
        for granted in grant_around("/", outside):
            rules.append((granted, mask))
    for device in DEVICES_READ_WRITE:
        rules.append((device, READ_FILE | WRITE_FILE))
    return SandboxPlan(tuple(rules))


def plan_readonly(
    root: str, protected: Iterable[str] = (), extra_read: Iterable[str] = ()
) -> SandboxPlan:
    """A sub-agent runtime's rules (issue 12): read `root` (its revision's snapshot), read
    and execute the system and Python paths around the `protected` ones (as `plan_for`),
    read the devices; no writable path at all. `root` is granted whole even though it lies
    under the protected state dir: the grant covers that subtree only, never its siblings."""
    shielded = sorted({q for p in (*protected, *SYSTEM_SECRETS) for q in (p, os.path.realpath(p))})
    rules: list[tuple[str, int]] = [(root, READ)]
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p)}
    for path in (*SYSTEM_READ_ONLY, *sorted(python), *extra_read):
        for granted in grant_around(path, shielded):
            rules.append((granted, READ_EXEC))
    for device in DEVICES_READ_WRITE:
        rules.append((device, READ_FILE))
    return SandboxPlan(tuple(rules))


def _add_path_rule(ruleset: int, path: str, allowed: int) -> int:
    """One path-beneath rule; a path this machine does not have, or no right left, adds none.
    Returns the rights granted (0: no rule)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        if not os.path.isdir(path):
            # Directory-only rights are invalid on a file.
            allowed &= READ_FILE | WRITE_FILE | EXECUTE | TRUNCATE | IOCTL_DEV
        if not allowed:
            return 0
        beneath = struct.pack("=Qi", allowed, fd)
        if _libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.c_char_p(beneath), 0) < 0:
            err = ctypes.get_errno()
            raise SandboxUnavailable(f"landlock_add_rule({path}) failed: {os.strerror(err)}")
        return allowed
    finally:
        os.close(fd)


def apply_sandbox(
    plan: SandboxPlan, confinement: ProcessConfinement | None = None, *, files: bool = True
) -> int:
    """Restrict this process (and all it starts) for good. Returns the ABI used.
    `confinement`: its scopes and TCP rules (decided for this kernel's ABI); None: the
    abstract-socket scope only, no TCP rule. `files=False` (`sandbox = "none"`): no file
    right is handled, only the scopes and TCP rules; on a kernel with neither nothing is
    applied."""
    abi = abi_version()
    if abi < 1:
        raise SandboxUnavailable("this kernel does not offer Landlock")
    handled = _handled(abi) if files else 0
    if not files:
        plan = SandboxPlan(())
        if confinement is None or not (confinement.scopes or confinement.handled_net):
            return abi  # an empty ruleset is EINVAL, and would confine nothing anyway
    attr = ruleset_attr(handled, abi, confinement)
    ruleset = _libc.syscall(
        SYS_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0
    )
    if ruleset < 0:
        err = ctypes.get_errno()
        raise SandboxUnavailable(f"landlock_create_ruleset failed: {os.strerror(err)}")
    applied: list[tuple[str, int]] = []
    try:
        for path, rights in plan.rules:
            granted = _add_path_rule(ruleset, path, handled if rights == -1 else rights & handled)
            if granted:
                applied.append((path, granted))
        _add_port_rules(ruleset, confinement)
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
        except OSError as exc:
            raise SandboxUnavailable(f"PR_SET_NO_NEW_PRIVS failed: {exc.strerror}") from None
        if _libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
            err = ctypes.get_errno()
            raise SandboxUnavailable(f"landlock_restrict_self failed: {os.strerror(err)}")
    finally:
        os.close(ruleset)
    if log.isEnabledFor(logging.DEBUG):
        _log_rules("this process restricted", abi, handled, applied)
    return abi


# --------------------------------------------------------------------------- shell commands
#
# A command the shell tool runs gets a ruleset of its own, nested inside the agent's (ADR
# 0012): it may execute only the resolved binaries of `allowed_commands` and their dynamic
# loader, read the system paths minus everything forbidden, and write only its workspace,
# write-granted siblings and its private home. The plan is pure (paths in, rules out; the
# directory listing and path resolution injected); the ruleset is built in the agent and
# enforced in the child between fork and exec.

ALL_FS = (1 << 16) - 1  # every filesystem right of ABI 1-7; masked to the kernel's when applied
WRITE = WRITE_FILE | REMOVE_FILE | REMOVE_DIR | MAKE_REG | MAKE_DIR | MAKE_SYM | TRUNCATE | REFER
NOT_EXECUTABLE = ALL_FS & ~EXECUTE
RUN = READ_FILE | EXECUTE  # execve opens the file for reading and executing

EntryKind = Literal["dir", "file", "symlink"]
Lister = Callable[[str], Sequence[tuple[str, EntryKind]]]
Resolver = Callable[[str], str]


def list_entries(path: str) -> list[tuple[str, EntryKind]]:
    """A directory's entries and their kinds, symlinks not followed; [] if it cannot be read."""
    try:
        with os.scandir(path) as entries:
            return [
                (
                    e.name,
                    "symlink"
                    if e.is_symlink()
                    else ("dir" if e.is_dir(follow_symlinks=False) else "file"),
                )
                for e in entries
            ]
    except OSError:
        return []


def carve(
    path: str, rights: int, excluded: Sequence[PurePosixPath] | PathSet, listdir: Lister
) -> list[tuple[str, int]]:
    """Rules granting `rights` on `path` minus everything beneath an excluded path.

    A directory with an excluded path somewhere below it is granted entry by entry; a
    symlink entry gets no rule (a rule would follow it and grant its target, which is judged
    where it really lies)."""
    if not isinstance(excluded, PathSet):
        excluded = PathSet(excluded)
    here = PurePosixPath(path)
    if excluded.covers(here):
        return []
    if not excluded.holds(here):
        return [(path, rights)]
    rules: list[tuple[str, int]] = []
    for name, kind in sorted(listdir(path)):
        if kind != "symlink":
            rules.extend(carve(str(here / name), rights, excluded, listdir))
    return rules


def plan_command_sandbox(
    *,
    workspace: str,
    home: str,
    executables: Iterable[str],
    grants: Iterable[tuple[str, str]] = (),  # (path, "read" | "write" | "read_write")
    excluded: Iterable[str] = (),
    system: Iterable[str] = SYSTEM_READ_ONLY,
    devices: Iterable[str] = DEVICES_READ_WRITE,
    resolve: Resolver = os.path.realpath,
    listdir: Lister = list_entries,
    workspace_writable: bool = True,
    code: Iterable[str] = (),
    secrets: Iterable[str] = SYSTEM_SECRETS,
) -> SandboxPlan:
    """The ruleset of one shell command. Pure given `resolve` and `listdir`.
    `workspace_writable=False`: a readonly agent's program (an adapter) only reads it.

    `executables` are the allowed binaries and their loaders; `excluded` are the agent's
    forbidden paths and the workspaces of other agents it has no grant on. Nothing but the
    executables is executable; nothing but the workspace, write grants and `home` is writable.
    `code` (the daemon's own code, ADR 0044) is carved out of every writable tree and only
    read where it lies inside one."""
    kept_out = {PurePosixPath(resolve(p)) for p in (*excluded, *secrets)}
    read_only = tuple(sorted({PurePosixPath(resolve(p)) for p in code}))
    out, out_and_code = PathSet(kept_out), PathSet({*kept_out, *read_only})
    rules: list[tuple[str, int]] = []
    writable: list[PurePosixPath] = []

    def grant(path: str, rights: int) -> None:
        if rights & WRITE and read_only:
            writable.append(PurePosixPath(resolve(path)))
            rules.extend(carve(resolve(path), rights, out_and_code, listdir))
        else:
            rules.extend(carve(resolve(path), rights, out, listdir))

    grant(workspace, NOT_EXECUTABLE if workspace_writable else READ)
    for path, mode in grants:
        grant(path, {"read": READ, "write": WRITE | READ_DIR, "read_write": READ | WRITE}[mode])
    for root in read_only:  # what was carved out of a writable tree stays readable
        if any(_beneath(root, tree) for tree in writable):
            rules.extend(carve(str(root), READ, out, listdir))
    for path in dict.fromkeys(resolve(p) for p in system):
        grant(path, READ)
    for device in devices:
        grant(device, READ_FILE | WRITE_FILE)
    rules.append((resolve(home), NOT_EXECUTABLE))  # private and fresh: never excluded
    for binary in dict.fromkeys(resolve(p) for p in executables):
        grant(binary, RUN)
    return SandboxPlan(tuple(rules))


PT_INTERP = 3


def elf_interpreter(header: bytes, read_at: Callable[[int, int], bytes]) -> str | None:
    """The PT_INTERP path of an ELF file (its dynamic loader), or None (static, not ELF).

    `header` is the file's first 64 bytes; `read_at(offset, size)` reads more of it."""
    if len(header) < 52 or header[:4] != b"\x7fELF":
        return None
    wide = header[4] == 2  # ELFCLASS64
    order = "<" if header[5] == 1 else ">"
    if wide:
        (phoff,) = struct.unpack_from(order + "Q", header, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 54)
    else:
        (phoff,) = struct.unpack_from(order + "I", header, 28)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 42)
    if phnum > 4096 or phentsize < (56 if wide else 32):
        return None
    table = read_at(phoff, phentsize * phnum)
    for i in range(len(table) // phentsize):
        entry = table[i * phentsize : (i + 1) * phentsize]
        if struct.unpack_from(order + "I", entry, 0)[0] != PT_INTERP:
            continue
        if wide:
            (offset,) = struct.unpack_from(order + "Q", entry, 8)
            (size,) = struct.unpack_from(order + "Q", entry, 32)
        else:
            (offset,) = struct.unpack_from(order + "I", entry, 4)
            (size,) = struct.unpack_from(order + "I", entry, 16)
        if not 0 < size <= 4096:
            return None
        name = read_at(offset, size).split(b"\0", 1)[0]
        return name.decode("utf-8", errors="replace") or None
    return None


def loader_of(binary: str) -> str | None:
    """The dynamic loader `binary` needs to run, read from its PT_INTERP."""
    try:
        with open(binary, "rb") as fh:

            def read_at(offset: int, size: int) -> bytes:
                fh.seek(offset)
                return fh.read(size)

            return elf_interpreter(fh.read(64), read_at)
    except (OSError, struct.error):
        return None


def command_executables(names: Iterable[str], path: str) -> tuple[str, ...]:
    """The real paths of the programs `names` resolve to on `path`, plus their loaders.
    A name not found is left out (running it fails with not_found anyway)."""
    found: list[str] = []
    for name in sorted(names):
        program = shutil.which(name, path=path)
        if program is None:
            continue
        real = os.path.realpath(program)
        found.append(real)
        loader = loader_of(real)
        if loader is not None:
            found.append(os.path.realpath(loader))
    return tuple(dict.fromkeys(found))


def build_ruleset(plan: SandboxPlan, confinement: ProcessConfinement | None = None) -> int:
    """A Landlock ruleset fd (close-on-exec) for `plan`, handling every right of the ABI.
    The caller owns the fd; `enforce_ruleset` applies it in a child. `confinement` (a
    probe's, say: `decide_confinement("probe", abi_version(), ...)`) adds its TCP rules;
    by default a command's: both scopes, and TCP as its agent's domain allows."""
    abi = abi_version()
    if abi < 1:
        raise SandboxUnavailable("this kernel does not offer Landlock")
    handled = _handled(abi)
    # From ABI 6 a command may neither connect to abstract unix sockets nor signal processes
    # outside its own domain (the agent, the daemon, other agents' commands).
    if confinement is None:
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
        confinement = ProcessConfinement("command", abi, scoped, 0, (), (), True, ())
    attr = ruleset_attr(handled, abi, confinement)
    ruleset = int(
        _libc.syscall(SYS_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0)
    )
    if ruleset < 0:
        err = ctypes.get_errno()
        raise SandboxUnavailable(f"landlock_create_ruleset failed: {os.strerror(err)}")
    applied: list[tuple[str, int]] = []
    try:
        for path, rights in plan.rules:
            granted = _add_path_rule(ruleset, path, rights & handled)
            if granted:
                applied.append((path, granted))
        _add_port_rules(ruleset, confinement)
    except BaseException:
        os.close(ruleset)
        raise
    if log.isEnabledFor(logging.DEBUG):
        _log_rules("a command's ruleset", abi, handled, applied)
    return ruleset


def enforce_ruleset(ruleset: int) -> None:
    """Restrict the calling process to `ruleset` for good, drop every capability and forbid
    new user namespaces (in a child, before exec: a shell command, an adapter, a discovery
    probe; ADR 0043)."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if _libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    drop_capabilities(range(cap_last_cap() + 1))
    forbid_user_namespaces()


NOT_CONFINED = "none: commands parsed, not confined"


def sandbox_summary(mode: str, abi: int) -> str:
    """What confines an agent's commands, for `status` and `doctor`: its profile's `sandbox`
    mode and the kernel's Landlock ABI."""
    if mode == "none" or abi < 1:
        if mode == "landlock":
            return 'unavailable: sandbox = "landlock" but this kernel has no Landlock'
        return NOT_CONFINED
    gaps = decide_confinement("agent", abi, cap_last_cap=0).describe()
    return f"landlock ABI {abi}" + (f" ({gaps})" if gaps else "")


def process_gaps(mode: str, abi: int) -> tuple[Gap, ...]:
    """What an agent with this `sandbox` mode runs without on a kernel with this ABI
    (`status --json`): everything without Landlock. `sandbox = "none"` turns off the file
    rules only: the scopes and TCP rules still apply (ADR 0043)."""
    del mode  # every mode gets the process confinement the kernel offers
    if abi < 1:
        return get_args(Gap)
    return decide_confinement("agent", abi, cap_last_cap=0).missing
