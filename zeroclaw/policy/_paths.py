"""Where an agent's file tools may go. The decision is pure; resolution is injected.

Every request is first resolved to the real path it would touch: relative to the
workspace, `..` collapsed, every symlink (and every symlink in a chain) followed,
including the kernel's magic links such as `/proc/self/root` or `/proc/<pid>/cwd`.
The decision then looks only at that real path, so there is one question to answer
however the request was spelled:

0. a daemon's own file (protected)            -> forbidden_path (always, every profile:
                                                  the state and runtime dirs, the config
                                                  file, /proc/<daemon> and /proc/<zygote>;
                                                  a workspace lying inside one stays usable)
0b. a write under the daemon's code, or of a  -> forbidden_path (always, every profile:
    directory holding some                         the interpreter, prefixes, site-packages,
                                                  the package, sys.path, editable sources;
                                                  ADR 0044. Read stays allowed as below)
1. under a forbidden path                      -> forbidden_path (always, every profile)
2. a write while the profile is readonly      -> read_only_profile
3. inside the agent's own workspace           -> allowed
4. inside a granted sibling workspace          -> allowed if the grant's mode covers it,
                                                  else path_not_allowed
5. inside another agent's workspace (no grant) -> path_not_allowed (even for `full`:
                                                  the profile lifts workspace_only, not
                                                  the isolation between agents)
6. anywhere else                               -> allowed only without workspace_only

An allowed decision carries the tree it was allowed under (`root`); the tool layer
opens the real path beneath that tree without following any symlink (ADR 0013), and
Landlock backs it in the kernel, so a symlink swapped in after this check leads nowhere.
Reasons name the path as requested, never the real path a refusal resolved to.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

Access = Literal["read", "write"]
GrantMode = Literal["read", "write", "read_write"]
Resolver = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Grant:
    owner: str
    path: PurePosixPath
    mode: GrantMode

    def covers(self, access: Access) -> bool:
        return self.mode == "read_write" or self.mode == access


@dataclass(frozen=True, slots=True)
class PathRules:
    """An agent's path policy, from its effective risk policy and workspace settings.
    All paths are absolute and already resolved (the workspace itself may be a symlink)."""

    workspace: PurePosixPath
    workspace_only: bool
    may_write: bool
    forbidden: tuple[PurePosixPath, ...] = ()
    grants: tuple[Grant, ...] = ()
    other_workspaces: tuple[PurePosixPath, ...] = ()
    # The daemon's own files (ADR 0015). Unlike `forbidden`, not the operator's choice: no
    # profile lifts them, and workspaces inside them (the default ones live in the state
    # dir) are carved out, so each leads to its own rule below.
    protected: tuple[PurePosixPath, ...] = ()
    # The daemon's code (ADR 0044): never written under any profile, always readable by
    # the rules below. The daemon refuses a workspace inside one, so nothing is carved.
    code: tuple[PurePosixPath, ...] = ()

    def workspaces(self) -> tuple[PurePosixPath, ...]:
        return (self.workspace, *(g.path for g in self.grants), *self.other_workspaces)


PathRefusal = Literal["path_not_allowed", "forbidden_path", "read_only_profile"]
SLASH = PurePosixPath("/")


@dataclass(frozen=True, slots=True)
class PathDecision:
    allowed: bool
    code: PathRefusal | None
    path: PurePosixPath | None  # the real path the request resolves to
    reason: str  # names only what was asked for, never where a symlink led
    # The allowed tree the tool opens `path` beneath (workspace, grant, or `/`), walking
    # from it without following symlinks (ADR 0013). None when refused.
    root: PurePosixPath | None = None


def _within(path: PurePosixPath, root: PurePosixPath) -> bool:
    return path == root or root in path.parents


def protected_root(
    real: PurePosixPath,
    protected: Sequence[PurePosixPath],
    workspaces: Sequence[PurePosixPath],
) -> PurePosixPath | None:
    """The protected path `real` lies under, unless a workspace strictly inside that
    protected path holds `real`. A protected path inside a workspace stays protected."""
    for root in protected:
        if _within(real, root) and not any(
            _within(real, ws) and ws != root and _within(ws, root) for ws in workspaces
        ):
            return root
    return None


def decide(
    rules: PathRules, real: PurePosixPath, access: Access, shown: str = "the path"
) -> PathDecision:
    """The decision on an already resolved absolute path. Pure. `shown` is how reasons
    name the path: the request as the agent spelled it. A refusal never names `real`,
    which would tell an agent where symlinks it cannot follow point."""
    daemons = protected_root(real, rules.protected, rules.workspaces())
    if daemons is not None:
        return PathDecision(
            False, "forbidden_path", real, f"{shown} is one of the daemon's own files"
        )
    if access == "write" and rules.code:
        if any(_within(real, root) for root in rules.code):
            return PathDecision(
                False, "forbidden_path", real, f"{shown} is the daemon's own code (read-only)"
            )
        # A directory holding some: moved or removed (`mv`, `rm -r`), a tree the agent
        # made could take its place.
        if any(real in root.parents for root in rules.code):
            return PathDecision(
                False, "forbidden_path", real, f"{shown} holds the daemon's own code (read-only)"
            )
    for forbidden in rules.forbidden:
        if _within(real, forbidden):
            return PathDecision(False, "forbidden_path", real, f"{shown} is a forbidden path")
    if access == "write" and not rules.may_write:
        return PathDecision(False, "read_only_profile", real, "the risk profile is readonly")
    if _within(real, rules.workspace):
        return PathDecision(True, None, real, "inside the agent's workspace", rules.workspace)
    for grant in rules.grants:
        if _within(real, grant.path):
            if grant.covers(access):
                return PathDecision(
                    True, None, real, f"{grant.mode} grant on {grant.owner}'s workspace", grant.path
                )
            return PathDecision(
                False,
                "path_not_allowed",
                real,
                f"the grant on {grant.owner}'s workspace is {grant.mode}, not {access}",
            )
    for other in rules.other_workspaces:
        if _within(real, other):
            return PathDecision(
                False, "path_not_allowed", real, f"{shown} is in another agent's workspace"
            )
    if rules.workspace_only:
        return PathDecision(False, "path_not_allowed", real, f"{shown} is outside the workspace")
    return PathDecision(True, None, real, "outside the workspace, allowed by the profile", SLASH)


def resolve_request(
    workspace: PurePosixPath, requested: str, resolve: Resolver = os.path.realpath
) -> PurePosixPath | None:
    """The real path a request touches, or None when it cannot name a file at all.
    Raises OSError when resolving fails (a /proc link the kernel will not read, say)."""
    if not requested or "\x00" in requested or len(requested) > 4096:
        return None
    try:
        os.fsencode(requested)
    except UnicodeEncodeError:  # a lone surrogate: no file has this name
        return None
    expanded = requested if not requested.startswith("~") else os.path.expanduser(requested)
    joined = os.path.join(str(workspace), expanded)  # an absolute request replaces the base
    return PurePosixPath(resolve(joined))


_PROC_TASK = re.compile(r"^/proc/(\d+)(/.*)?$")


def thread_group_path(real: PurePosixPath) -> PurePosixPath:
    """`/proc/<tid>/...` of a thread as `/proc/<tgid>/...` of its process: every thread of
    the daemon has its own (unlisted but open-able) /proc entry showing the same environ."""
    match = _PROC_TASK.match(str(real))
    if match is None:
        return real
    try:
        with open(f"/proc/{match[1]}/status", encoding="ascii", errors="replace") as fh:
            tgid = next((ln.split()[1] for ln in fh if ln.startswith("Tgid:")), match[1])
    except (OSError, IndexError):
        return real
    return PurePosixPath(f"/proc/{tgid}{match[2] or ''}")


def check_path(
    rules: PathRules,
    requested: str,
    access: Access,
    resolve: Resolver = os.path.realpath,
    thread_group: Callable[[PurePosixPath], PurePosixPath] = thread_group_path,
) -> PathDecision:
    shown = repr(requested[:200])
    try:
        real = resolve_request(rules.workspace, requested, resolve)
    except (OSError, ValueError) as exc:
        name = errno.errorcode.get(getattr(exc, "errno", 0) or 0, type(exc).__name__)
        return PathDecision(False, "path_not_allowed", None, f"{shown} cannot be resolved ({name})")
    if real is None:
        return PathDecision(False, "path_not_allowed", None, f"{shown} is not a usable path")
    decision = decide(rules, real, access, shown)
    if decision.allowed and rules.protected:
        leader = thread_group(real)
        daemons = protected_root(leader, rules.protected, ()) if leader != real else None
        if daemons is not None:
            return PathDecision(
                False, "forbidden_path", real, f"{shown} is a thread of the daemon's own process"
            )
    return decision


def realpath_sharing_parents() -> Resolver:
    """`os.path.realpath` for many paths below the same directories (every other agent's
    workspace: <state>/agents/<alias>/workspace), each directory resolved once and then
    only the last component looked at. Same answers: a path's real path is its parent's
    real path joined with its name, followed if that is a symlink. 100 agents: ~8 -> ~1 ms
    per agent start, which is most of what an agent does before it says hello."""
    known: dict[str, str] = {}

    def real(path: str) -> str:
        parent, name = os.path.split(path)
        if not os.path.isabs(path) or name in ("", ".", "..") or parent == path:
            return os.path.realpath(path)
        if parent not in known:
            known[parent] = real(parent)
        joined = os.path.join(known[parent], name)
        return os.path.realpath(joined) if os.path.islink(joined) else joined

    return real


def rules_for(
    workspace: str,
    *,
    workspace_only: bool,
    may_write: bool,
    forbidden: Sequence[str] = (),
    grants: Sequence[tuple[str, str, GrantMode]] = (),
    other_workspaces: Sequence[str] = (),
    protected: Sequence[str] = (),
    code: Sequence[str] = (),
    resolve: Resolver = os.path.realpath,
) -> PathRules:
    """Build rules from configured paths, resolving each once (workspaces may be symlinks)."""
    if resolve is os.path.realpath:
        resolve = realpath_sharing_parents()

    def real(p: str) -> PurePosixPath:
        return PurePosixPath(resolve(os.path.expanduser(p)))

    granted = tuple(Grant(owner, real(path), mode) for owner, path, mode in grants)
    granted_paths = {g.path for g in granted}
    return PathRules(
        workspace=real(workspace),
        workspace_only=workspace_only,
        may_write=may_write,
        forbidden=tuple(real(p) for p in forbidden),
        grants=granted,
        other_workspaces=tuple(
            p for p in (real(o) for o in other_workspaces) if p not in granted_paths
        ),
        protected=tuple(real(p) for p in protected),
        code=tuple(real(p) for p in code),
    )
