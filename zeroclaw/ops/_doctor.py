"""`zeroclaw doctor`: what on this machine weakens or breaks zeroclaw, with the fix.

Sans-IO: `gather_facts` is the only function that looks at the machine (files, /proc, the
control socket, LMDB read-only, systemd, and the network only when asked); it returns one
`Facts` snapshot. Each check is a pure function `Facts -> list[CheckResult]`, and `CHECKS`
lists them in the order they print. A new check is a new function added to that tuple.

Doctor changes nothing it looks at: LMDB environments are opened read-only without their
lock file (`lock=False`), and their reader tables are parsed from `lock.mdb`'s bytes, so a
stale reader is counted, never cleared; locks are seen through /proc/locks, never taken.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import stat
import struct
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from .._lmdb import data_file_problem
from ..config import (
    Config,
    ConfigError,
    daemon_paths,
    effective_risk_policy,
    load_config,
    runtime_dir_hint,
)
from ..control import ControlClient, DaemonUnreachable, Status, StatusReply, UntrustedDaemon
from ..pins import PinStore, PinStoreCorrupt, pins_path
from ..policy import ROOT_FIX, abi_version, root_warning

CheckStatus = Literal["ok", "warn", "fail"]
ABSTRACT_UNIX_SCOPE_ABI = 6  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
UNCONFINED = (
    "commands are only parsed, not confined; the control socket is protected by the "
    "daemon's peer check only"
)
START_HINT = "start it with 'zeroclaw daemon' (or 'systemctl start zeroclaw')"
DENIED_FIX = "run doctor as root ('sudo zeroclaw doctor') or as the daemon's user"
DYNAMIC_UIDS = range(61184, 65520)  # where systemd's DynamicUser= picks a service's uid
MAP_USE_WARN = 0.8  # above this share of the map, say how big the next growth is
CONTROL_TIMEOUT_SECS = 5.0
PROBE_TIMEOUT_SECS = 5.0
UNIT_NAME = "zeroclaw.service"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")

# The stores' format keys and the versions this zeroclaw writes; a test keeps them in step
# with memory/_store.py and subagents/_store.py (whose constants are private to them).
LMDB_STORES: tuple[tuple[str, str, bytes, int], ...] = (
    ("memory", "memory", b"zeroclaw-memory-format", 3),
    ("sub-agent", "subagents", b"zeroclaw-subagents-format", 1),
)


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: CheckStatus
    message: str
    fix: str = ""


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class DirFacts:
    what: str  # "state dir", "runtime dir"
    path: Path
    exists: bool
    is_dir: bool = True
    uid: int | None = None
    mode: int | None = None  # permission bits only
    unreadable: str | None = None  # why it cannot be looked at (permission denied)


@dataclass(frozen=True)
class LockFacts:
    what: str  # "daemon lock", "memory lock", "sub-agent store lock"
    path: Path
    exists: bool
    recorded_pid: int | None = None  # the pid written in the file (None: empty, or not kept)
    holders: tuple[int, ...] = ()  # pids holding an flock on it, from /proc/locks
    unreadable: str | None = None


@dataclass(frozen=True)
class DaemonFacts:
    """What the control socket said: answered, down (nobody there), or something worse."""

    runtime_dir: Path
    outcome: Literal["answered", "down", "refused", "untrusted", "timeout", "error"]
    detail: str = ""
    status: StatusReply | None = None
    uid: int | None = None  # the daemon process's owner
    router_socket: Literal["socket", "missing", "other"] = "missing"


@dataclass(frozen=True)
class ReaderSlot:
    pid: int
    txnid: int
    alive: bool


@dataclass(frozen=True)
class LmdbFacts:
    what: str  # "memory", "sub-agent"
    path: Path
    present: bool  # data.mdb exists
    size_bytes: int = 0  # data.mdb + lock.mdb on disk
    problem: str | None = None  # damaged: LMDB cannot (or must not) read it
    used_bytes: int = 0
    map_size: int = 0
    format_found: int = 0  # 0: no format key
    format_expected: int = 0
    readers: tuple[ReaderSlot, ...] = ()
    readers_problem: str | None = None  # lock.mdb is there but not understood
    unreadable: str | None = None


@dataclass(frozen=True)
class ProbeFacts:
    provider: str
    url: str
    key_env: str | None
    status_code: int | None = None
    error: str | None = None
    secs: float = 0.0


@dataclass(frozen=True)
class SystemdFacts:
    system_unit: Path
    system_unit_present: bool
    user_unit: Path
    user_unit_present: bool
    running: bool  # systemd is this machine's service manager
    system_state: str | None = None  # `systemctl is-active` when running
    user_state: str | None = None
    service_user: str | None = None  # the system unit's User=
    service_uid: int | None = None  # its uid; None when no such user exists
    dynamic_user: bool = False  # the system unit's DynamicUser=yes
    # Variables the system unit gives the daemon ({name: where}), never their values: under
    # systemd a provider key lives there, not in the shell doctor runs from.
    unit_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class McpPinFacts:
    """The daemon's MCP pin store (issue 26): how many tools it pins, or why it is
    unreadable (`problem`, with the fix)."""

    path: Path
    exists: bool
    pinned: int = 0
    withheld: int = 0
    problem: str = ""
    unreadable: str | None = None  # not ours to read (doctor as another user)


@dataclass(frozen=True)
class Facts:
    """Everything the checks look at."""

    config_path: Path | None
    config: Config | None
    config_errors: tuple[str, ...]
    landlock_abi: int
    base_dir: Path | None = None
    env_set: frozenset[str] = frozenset()  # names of key variables set (never their values)
    euid: int = 0
    dirs: tuple[DirFacts, ...] = ()
    daemon: DaemonFacts | None = None
    locks: tuple[LockFacts, ...] = ()
    lmdb: tuple[LmdbFacts, ...] = ()
    systemd: SystemdFacts | None = None
    probes: tuple[ProbeFacts, ...] | None = None  # None: --network not given
    mcp_pins: McpPinFacts | None = None  # None: no agent uses an MCP server


# --------------------------------------------------------------------------- checks


def check_config(facts: Facts) -> list[CheckResult]:
    if facts.config is not None:
        return [CheckResult("config", "ok", f"{facts.config_path} is valid")]
    return [
        CheckResult(
            "config",
            "fail",
            "; ".join(facts.config_errors) or "no valid config",
            "fix what the message names, or create a config with 'zeroclaw config init'",
        )
    ]


def key_variables(config: Config) -> dict[str, tuple[str, list[str]]]:
    """`{provider id: (key variable, [enabled agents using it])}` for providers with a key."""
    out: dict[str, tuple[str, list[str]]] = {}
    for alias, agent in sorted(config.agents.items()):
        if not agent.enabled:
            continue
        for ref in agent.provider_chain:  # each provider of a fallback chain needs its key
            key_env = getattr(config.provider(ref), "api_key_env", None)
            if key_env:
                out.setdefault(ref, (key_env, []))[1].append(alias)
    return out


def check_provider_keys(facts: Facts) -> list[CheckResult]:
    if facts.config is None:
        return []
    results = []
    for provider, (key_env, agents) in sorted(key_variables(facts.config).items()):
        name = f"provider {provider}: key"
        used = f"used by {', '.join(agents)}"
        where = facts.systemd.unit_env.get(key_env) if facts.systemd else None
        if key_env in facts.env_set:
            results.append(CheckResult(name, "ok", f"{key_env} is set ({used})"))
        elif where is not None:
            results.append(
                CheckResult(name, "ok", f"{key_env} is set by {where} for the service ({used})")
            )
        else:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{key_env} is not set in this environment nor by the system unit: "
                    f"{', '.join(agents)} cannot start",
                    f"set {key_env} in the daemon's environment (under systemd: an "
                    "EnvironmentFile= of the unit, mode 0600)",
                )
            )
    return results


def _daemon_uid(facts: Facts) -> int | None:
    d = facts.daemon
    return d.uid if d is not None and d.outcome == "answered" else None


def check_dirs(facts: Facts) -> list[CheckResult]:
    results = []
    owners = {facts.euid} | ({u} if (u := _daemon_uid(facts)) is not None else set())
    s = facts.systemd
    if s is not None and s.service_uid is not None:
        owners.add(s.service_uid)  # root looking at the dirs of a stopped system service
    dynamic = s is not None and s.dynamic_user
    for d in facts.dirs:
        name = d.what
        if d.unreadable is not None:
            results.append(
                CheckResult(name, "warn", f"cannot look at {d.path}: {d.unreadable}", DENIED_FIX)
            )
        elif not d.exists:
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{d.path} does not exist yet",
                    f"the daemon creates it (0700) when it starts; {START_HINT}",
                )
            )
        elif not d.is_dir:
            results.append(
                CheckResult(
                    name, "fail", f"{d.path} is not a directory", f"move {d.path} out of the way"
                )
            )
        elif d.uid not in owners and not (dynamic and d.uid in DYNAMIC_UIDS):
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{d.path} is owned by uid {d.uid}, not by the daemon's user "
                    f"(uid {min(owners)})",
                    f"chown -R {min(owners)} {shlex.quote(str(d.path))}",
                )
            )
        elif d.mode is not None and d.mode & 0o022:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{d.path} is mode {d.mode:04o}: others may write in it",
                    f"chmod 700 {shlex.quote(str(d.path))}",
                )
            )
        elif d.mode is not None and d.mode & 0o077:
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{d.path} is mode {d.mode:04o}: others may look in it (0700 expected)",
                    f"chmod 700 {shlex.quote(str(d.path))}",
                )
            )
        else:
            results.append(CheckResult(name, "ok", f"{d.path} (mode {d.mode or 0:04o})"))
    return results


def check_daemon(facts: Facts) -> list[CheckResult]:
    d = facts.daemon
    if d is None:
        return []
    if d.outcome == "down":
        return [
            CheckResult(
                "daemon",
                "warn",
                f"no daemon is running for runtime dir {d.runtime_dir}",
                START_HINT,
            )
        ]
    if d.outcome == "refused":
        return [
            CheckResult(
                "daemon",
                "warn",
                f"the daemon would not serve doctor: {d.detail}",
                DENIED_FIX if "forbidden" in d.detail else "run doctor again in a moment",
            )
        ]
    if d.outcome == "untrusted":
        return [CheckResult("daemon", "fail", d.detail, "stop that process (see 'ss -xlp')")]
    if d.outcome == "timeout":
        return [
            CheckResult(
                "daemon",
                "fail",
                f"the daemon did not answer a status request within {CONTROL_TIMEOUT_SECS:g}s",
                "look at its log (journalctl -u zeroclaw); restart it if it stays stuck",
            )
        ]
    if d.outcome == "error" or d.status is None:
        return [
            CheckResult(
                "daemon", "fail", f"the control socket failed: {d.detail}", "restart the daemon"
            )
        ]
    info = d.status.daemon
    results = [
        CheckResult(
            "daemon",
            "ok",
            f"pid {info.pid} (version {info.version}) answers on the control socket, "
            f"up {info.uptime_secs:.0f}s",
        )
    ]
    router = d.runtime_dir / "router.sock"
    if d.router_socket == "socket":
        results.append(CheckResult("router socket", "ok", f"{router}"))
    else:
        what = "is missing" if d.router_socket == "missing" else "is not a socket"
        results.append(
            CheckResult(
                "router socket",
                "fail",
                f"{router} {what}: agents cannot reach the router",
                "restart the daemon ('zeroclaw stop', then start it again); never remove files "
                "under the runtime dir while it runs",
            )
        )
    return results


def _pids(pids: tuple[int, ...]) -> str:
    return ", ".join(str(p) for p in pids)


def check_locks(facts: Facts) -> list[CheckResult]:
    d = facts.daemon
    # Only when nobody answers on the control socket is a held lock a question for this
    # check; a daemon that answered badly (refused, hung) is the daemon check's to report.
    down = d is None or d.outcome == "down"
    daemon_pid = d.status.daemon.pid if d is not None and d.status is not None else None
    results = []
    for lock in facts.locks:
        name = lock.what
        path = shlex.quote(str(lock.path))
        if lock.unreadable is not None:
            results.append(
                CheckResult(
                    name, "warn", f"cannot look at {lock.path}: {lock.unreadable}", DENIED_FIX
                )
            )
        elif not lock.exists:
            results.append(CheckResult(name, "ok", f"{lock.path}: no lock file"))
        elif lock.holders and not down and daemon_pid is None:
            results.append(
                CheckResult(
                    name, "ok", f"{lock.path}: held by pid {_pids(lock.holders)} (see 'daemon')"
                )
            )
        elif lock.holders and not down:
            whose = "the daemon" if daemon_pid in lock.holders else "not the daemon"
            status: CheckStatus = "ok" if daemon_pid in lock.holders else "warn"
            results.append(
                CheckResult(
                    name,
                    status,
                    f"{lock.path}: held by pid {_pids(lock.holders)} ({whose})",
                    ""
                    if status == "ok"
                    else f"see what it is: ps -o pid,args -p {lock.holders[0]}",
                )
            )
        elif lock.holders:
            pid = lock.holders[0]
            if lock.what == "memory lock":
                results.append(
                    CheckResult(
                        name,
                        "warn",
                        f"{lock.path}: held by pid {pid} while no daemon runs (a 'zeroclaw "
                        "memory' command writing?); the daemon cannot start until it lets go",
                        f"wait for it, or see what it is: ps -o pid,args -p {pid}",
                    )
                )
            else:
                results.append(
                    CheckResult(
                        name,
                        "fail",
                        f"{lock.path}: held by pid {pid}, which does not answer on the control "
                        "socket; no daemon can start while it holds it",
                        f"see what it is (ps -o pid,args -p {pid}); if it is a hung zeroclaw "
                        f"daemon, kill {pid}",
                    )
                )
        elif lock.recorded_pid is not None:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{lock.path}: stale, left by pid {lock.recorded_pid}, which no longer "
                    "holds it (the daemon was killed, or crashed)",
                    f"harmless: the next daemon takes it over; rm {path} to clear this, and "
                    "look at the log for why it died",
                )
            )
        else:
            results.append(CheckResult(name, "ok", f"{lock.path}: free"))
    return results


def _size(n: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.0f} B" if i == 0 else f"{n:.1f} {units[i]}"


def check_lmdb(facts: Facts) -> list[CheckResult]:
    results = []
    for s in facts.lmdb:
        name = f"{s.what} store"
        where = shlex.quote(str(s.path))
        if s.unreadable is not None:
            results.append(
                CheckResult(name, "warn", f"cannot look at {s.path}: {s.unreadable}", DENIED_FIX)
            )
            continue
        if not s.present:
            results.append(CheckResult(name, "ok", f"{s.path}: not created yet"))
            continue
        if s.problem is not None:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{s.path} is damaged: {s.problem}",
                    f"stop the daemon, move it aside (mv {where} {where}.damaged) and start "
                    "again with an empty store, or put back a copy from your backups",
                )
            )
            continue
        if s.format_found > s.format_expected:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{s.path} was written by a newer zeroclaw (format {s.format_found}, this "
                    f"version reads up to {s.format_expected})",
                    "upgrade zeroclaw",
                )
            )
        elif s.format_found < s.format_expected:
            found = f"format {s.format_found}" if s.format_found else "no format key"
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{s.path}: {found}, older than {s.format_expected}",
                    "the daemon upgrades it when it next starts (restart it)",
                )
            )
        else:
            results.append(
                CheckResult(
                    name,
                    "ok",
                    f"{s.path}: {_size(s.size_bytes)} on disk, format {s.format_found}",
                )
            )
        use = s.used_bytes / s.map_size if s.map_size else 0.0
        message = f"{_size(s.used_bytes)} of a {_size(s.map_size)} map ({use:.0%})"
        if use > MAP_USE_WARN:
            results.append(
                CheckResult(
                    f"{name}: map",
                    "warn",
                    f"{message}; it doubles to {_size(2 * s.map_size)} when full",
                    "make sure the filesystem has room for the doubled map; for the memory "
                    "store, raise [daemon] memory_map_size to start bigger",
                )
            )
        else:
            results.append(CheckResult(f"{name}: map", "ok", message))
        dead = tuple(r.pid for r in s.readers if not r.alive)
        if s.readers_problem is not None:
            results.append(
                CheckResult(
                    f"{name}: readers",
                    "warn",
                    f"cannot count readers: {s.readers_problem}",
                    "none needed if the daemon runs well; report it if it does not",
                )
            )
        elif dead:
            results.append(
                CheckResult(
                    f"{name}: readers",
                    "warn",
                    f"{len(dead)} reader slot(s) of dead processes (pid {_pids(dead)}) pin old "
                    "pages, so the file grows",
                    "restart the daemon: LMDB clears them when it next opens the store (doctor "
                    "never clears them)",
                )
            )
        else:
            results.append(
                CheckResult(f"{name}: readers", "ok", f"{len(s.readers)} live reader(s)")
            )
    return results


def check_landlock(facts: Facts) -> list[CheckResult]:
    abi = facts.landlock_abi
    if abi < 1:
        return [
            CheckResult(
                "landlock",
                "warn",
                "this kernel offers no Landlock: agents and their commands are not confined "
                "by the kernel",
                "run a kernel >= 5.13 with Landlock enabled (lsm=...,landlock) and allow the "
                "landlock_* syscalls in any seccomp filter",
            )
        ]
    results = [CheckResult("landlock", "ok", f"Landlock ABI {abi}")]
    if abi < ABSTRACT_UNIX_SCOPE_ABI:
        results.append(
            CheckResult(
                "landlock_abstract_unix_scope",
                "warn",
                f"Landlock ABI {abi} < {ABSTRACT_UNIX_SCOPE_ABI}: the kernel cannot keep agents "
                "from abstract unix sockets; the control socket relies on the daemon's peer "
                "check",
                "run Linux >= 6.12 for the abstract-unix-socket scope",
            )
        )
    else:
        results.append(
            CheckResult("landlock_abstract_unix_scope", "ok", "abstract unix sockets can be scoped")
        )
    return results


def _sandbox_mode(facts: Facts, alias: str) -> str | None:
    config = facts.config
    if config is None or alias not in config.agents or config.agents[alias].risk_profile is None:
        return None
    return effective_risk_policy(config, alias, os.environ, facts.base_dir).sandbox


def check_agent_sandboxes(facts: Facts) -> list[CheckResult]:
    if facts.config is None:
        return []
    results = []
    for alias, agent in sorted(facts.config.agents.items()):
        if not agent.enabled or agent.risk_profile is None:
            continue
        mode = _sandbox_mode(facts, alias)
        name = f"agent {alias}: sandbox"
        if mode == "landlock" and facts.landlock_abi < 1:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    'sandbox = "landlock" but this kernel has no Landlock: the agent cannot start',
                    f'use a kernel with Landlock, or set sandbox = "auto" in risk profile '
                    f"{agent.risk_profile!r} (and accept unconfined commands)",
                )
            )
        elif mode == "none" or facts.landlock_abi < 1:
            why = 'sandbox = "none"' if mode == "none" else "no Landlock"
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{why}: {UNCONFINED}",
                    f'set sandbox = "auto" in risk profile {agent.risk_profile!r} on a kernel '
                    "with Landlock",
                )
            )
        else:
            results.append(CheckResult(name, "ok", f"Landlock ABI {facts.landlock_abi} ({mode})"))
    return results


def check_sandbox_in_force(facts: Facts) -> list[CheckResult]:
    """What each running agent reported about its own Landlock ruleset."""
    d = facts.daemon
    if d is None or d.status is None:
        return []
    results = []
    for agent in sorted(d.status.agents, key=lambda a: a.alias):
        if agent.pid is None:
            continue
        name = f"agent {agent.alias}: sandbox in force"
        required = _sandbox_mode(facts, agent.alias) == "landlock"
        if agent.sandbox_in_force is True:
            results.append(CheckResult(name, "ok", f"pid {agent.pid}: {agent.sandbox}"))
        elif agent.sandbox_in_force is False:
            results.append(
                CheckResult(
                    name,
                    "fail" if required else "warn",
                    f"pid {agent.pid} runs without a Landlock ruleset"
                    + (' although its profile says sandbox = "landlock"' if required else ""),
                    f"restart it ('zeroclaw agents restart {agent.alias}') and read its log for "
                    "why Landlock was not applied",
                )
            )
        else:
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"pid {agent.pid} has not reported whether its sandbox is in force",
                    "an agent reports it once started: run doctor again in a moment, or "
                    "upgrade a daemon too old to ask",
                )
            )
    return results


def check_daemon_user(facts: Facts) -> list[CheckResult]:
    """Root is reported (ADR 0043): the running daemon's owner, else the system unit's User=."""
    name = "daemon user"
    d = facts.daemon
    if d is not None and d.uid is not None:
        warning = root_warning(d.uid)
        if warning is None:
            return [CheckResult(name, "ok", f"the daemon runs as uid {d.uid}, not root")]
        return [CheckResult(name, "warn", warning, ROOT_FIX)]
    s = facts.systemd
    if s is None or not s.system_unit_present or s.dynamic_user:
        return []
    if s.service_user not in (None, "root") and s.service_uid != 0:
        return []
    consequence = (root_warning(0) or "").removeprefix("the daemon runs as root: ")
    return [
        CheckResult(
            name,
            "warn",
            f"{s.system_unit} runs the daemon as root: {consequence}",
            "set User= to an unprivileged user in the unit, or reinstall it with "
            "'zeroclaw service install'",
        )
    ]


def check_systemd(facts: Facts) -> list[CheckResult]:
    s = facts.systemd
    if s is None:
        return []
    name = "systemd unit"
    units = [(s.system_unit, s.system_state, "")] if s.system_unit_present else []
    if s.user_unit_present:
        units.append((s.user_unit, s.user_state, " --user"))
    if not units:
        return [
            CheckResult(
                name,
                "warn",
                f"no {UNIT_NAME} in {s.system_unit.parent} or {s.user_unit.parent}",
                "'zeroclaw service install' (or 'zeroclaw service install --user'), if "
                "zeroclaw should start with the machine",
            )
        ]
    results = []
    if s.system_unit_present and s.service_user and s.service_uid is None and not s.dynamic_user:
        results.append(
            CheckResult(
                "systemd unit: user",
                "fail",
                f"{s.system_unit} runs the daemon as user {s.service_user!r}, which does not "
                "exist: the service cannot start",
                f"create it (useradd --system --no-create-home {shlex.quote(s.service_user)}), "
                "or reinstall the unit with 'zeroclaw service install'",
            )
        )
    for path, state, flag in units:
        if not s.running:
            results.append(
                CheckResult(
                    name, "ok", f"{path} installed; systemd is not running here, state unknown"
                )
            )
        elif state == "active":
            results.append(CheckResult(name, "ok", f"{path} installed, active"))
        else:
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{path} installed, {state or 'state unknown'}",
                    f"systemctl{flag} start zeroclaw; see journalctl{flag} -u zeroclaw for why "
                    "it stopped",
                )
            )
    return results


def check_providers_reachable(facts: Facts) -> list[CheckResult]:
    if facts.probes is None:
        return [CheckResult("providers reachable", "ok", "not checked; use --network to check")]
    results = []
    for p in facts.probes:
        name = f"provider {p.provider}: reachable"
        if p.status_code is None:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"GET {p.url} failed: {p.error}",
                    "check base_url, and that this machine reaches it (DNS, proxy, firewall)",
                )
            )
        elif p.status_code in (401, 403):
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"GET {p.url} answered HTTP {p.status_code}: the key was refused",
                    f"check that {p.key_env} holds a valid key"
                    if p.key_env
                    else "set api_key_env for this provider",
                )
            )
        elif 200 <= p.status_code < 300:
            results.append(
                CheckResult(name, "ok", f"GET {p.url}: HTTP {p.status_code} in {p.secs:.2f}s")
            )
        else:
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"GET {p.url} answered HTTP {p.status_code} (reachable, but not a models list)",
                    "check base_url",
                )
            )
    return results


def check_mcp_pins(facts: Facts) -> list[CheckResult]:
    p = facts.mcp_pins
    if p is None:
        return []
    if p.unreadable is not None:
        return [
            CheckResult("mcp pins", "warn", f"cannot look at {p.path}: {p.unreadable}", DENIED_FIX)
        ]
    if p.problem:
        return [
            CheckResult(
                "mcp pins",
                "fail",
                p.problem,
                f"put back a backup of {p.path}, or move it aside to pin every tool anew",
            )
        ]
    if not p.exists:
        return [CheckResult("mcp pins", "ok", f"{p.path}: no tool pinned yet")]
    text = f"{p.path}: {p.pinned} tools pinned"
    if p.withheld:
        message = f"{text}, {p.withheld} withheld: their schema changed since it was trusted"
        fix = "review them ('zeroclaw mcp tools'), then 'zeroclaw mcp trust SERVER'"
        return [CheckResult("mcp pins", "warn", message, fix)]
    return [CheckResult("mcp pins", "ok", text)]


Check = Callable[[Facts], list[CheckResult]]
CHECKS: tuple[Check, ...] = (
    check_config,
    check_provider_keys,
    check_dirs,
    check_daemon,
    check_locks,
    check_lmdb,
    check_landlock,
    check_agent_sandboxes,
    check_sandbox_in_force,
    check_daemon_user,
    check_systemd,
    check_providers_reachable,
    check_mcp_pins,
)


def run_checks(facts: Facts, checks: tuple[Check, ...] = CHECKS) -> list[CheckResult]:
    return [result for check in checks for result in check(facts)]


# --------------------------------------------------------------------------- pure parsers

LMDB_LOCK_MAGIC = 0xBEEFC0DE
# MDB_LOCK_VERSION 1 with robust POSIX mutexes, as py-lmdb's bundled LMDB 0.9 builds on
# Linux; any other format is reported as not understood rather than misread.
LMDB_LOCK_FORMAT = 0x10001
_CACHELINE = 64
_READERS_AT = 2 * _CACHELINE  # after the txbody and the write mutex, each cache-line padded
_READER = struct.Struct("<Qi")  # mr_txnid, mr_pid (then mr_tid, padding)


def parse_lock_readers(data: bytes) -> list[tuple[int, int]]:
    """`[(pid, txnid)]` of the used reader slots in an LMDB lock.mdb; ValueError if the
    file is not a lock file of the layout we know."""
    if len(data) < _READERS_AT:
        raise ValueError(f"lock.mdb is {len(data)} bytes, shorter than its header")
    magic, fmt = struct.unpack_from("<II", data, 0)
    if magic != LMDB_LOCK_MAGIC or fmt != LMDB_LOCK_FORMAT:
        raise ValueError(f"lock.mdb format {magic:#x}/{fmt:#x} is not one doctor knows")
    (numreaders,) = struct.unpack_from("<I", data, 56)
    available = (len(data) - _READERS_AT) // _CACHELINE
    slots = []
    for i in range(min(numreaders, available)):
        txnid, pid = _READER.unpack_from(data, _READERS_AT + i * _CACHELINE)
        if pid:
            slots.append((pid, txnid))
    return slots


def parse_proc_locks(text: str, device: int, inode: int) -> tuple[int, ...]:
    """Pids holding a lock on the file `(device, inode)`, from /proc/locks's text."""
    want = f"{os.major(device):02x}:{os.minor(device):02x}:{inode}"
    pids = []
    for line in text.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a blocked waiter has "->".
        if len(fields) < 6 or "->" in fields:
            continue
        if fields[5].lower() == want and fields[4].isdigit():
            pids.append(int(fields[4]))
    return tuple(sorted(set(pids)))


# --------------------------------------------------------------------------- gathering (I/O)


@dataclass(frozen=True)
class UnitInfo:
    """What doctor reads from a unit file's [Service] section."""

    user: str | None = None
    dynamic_user: bool = False
    environment: tuple[str, ...] = ()  # names assigned by Environment=
    environment_files: tuple[tuple[str, bool], ...] = ()  # (path, optional: a leading '-')


def parse_unit(text: str) -> UnitInfo:
    user, dynamic, section = None, False, ""
    names: list[str] = []
    files: list[tuple[str, bool]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith(("#", ";")):
            key, _, value = (part.strip() for part in line.partition("="))
            if key == "User":
                user = value or None  # an empty assignment resets it
            elif key == "DynamicUser":
                dynamic = value.lower() in ("yes", "true", "on", "1")
            elif key == "Environment":
                with contextlib.suppress(ValueError):
                    names += [a.partition("=")[0] for a in shlex.split(value) if "=" in a]
            elif key == "EnvironmentFile" and value:
                files.append((value.removeprefix("-"), value.startswith("-")))
    return UnitInfo(user, dynamic, tuple(names), tuple(files))


def env_file_names(text: str) -> tuple[str, ...]:
    """The variable names an EnvironmentFile= assigns (`NAME=value` lines)."""
    names = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        name = line.partition("=")[0].strip()
        if name.isidentifier():
            names.append(name)
    return tuple(names)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dir_facts(what: str, path: Path) -> DirFacts:
    try:
        info = path.stat()
    except FileNotFoundError:
        return DirFacts(what, path, exists=False)
    except OSError as exc:
        return DirFacts(what, path, exists=True, unreadable=exc.strerror)
    return DirFacts(
        what, path, True, stat.S_ISDIR(info.st_mode), info.st_uid, stat.S_IMODE(info.st_mode)
    )


def _lock_facts(what: str, path: Path, proc_locks: str, record_pid: bool) -> LockFacts:
    try:
        info = path.stat()
        text = path.read_bytes()[:32].decode("ascii", "replace").strip() if record_pid else ""
    except FileNotFoundError:
        return LockFacts(what, path, exists=False)
    except OSError as exc:
        return LockFacts(what, path, exists=True, unreadable=exc.strerror)
    pid = int(text) if text.isdigit() else None
    return LockFacts(what, path, True, pid, parse_proc_locks(proc_locks, info.st_dev, info.st_ino))


def _daemon_facts(runtime_dir: Path) -> DaemonFacts:
    router = runtime_dir / "router.sock"
    try:
        kind: Literal["socket", "missing", "other"] = (
            "socket" if stat.S_ISSOCK(router.stat().st_mode) else "other"
        )
    except FileNotFoundError:
        kind = "missing"
    client = ControlClient(runtime_dir, timeout=CONTROL_TIMEOUT_SECS)
    try:
        reply = client.call(Status())
    except UntrustedDaemon as exc:
        return DaemonFacts(runtime_dir, "untrusted", str(exc), router_socket=kind)
    except DaemonUnreachable as exc:
        return DaemonFacts(runtime_dir, "down", str(exc), router_socket=kind)
    except TimeoutError:
        return DaemonFacts(runtime_dir, "timeout", router_socket=kind)
    except OSError as exc:
        return DaemonFacts(runtime_dir, "error", str(exc), router_socket=kind)
    if not reply.ok and reply.error in ("forbidden", "busy"):
        return DaemonFacts(
            runtime_dir, "refused", f"{reply.error}: {reply.message}", router_socket=kind
        )
    if not reply.ok or reply.data is None:
        return DaemonFacts(
            runtime_dir, "error", f"{reply.error}: {reply.message}", router_socket=kind
        )
    uid = None
    with contextlib.suppress(OSError):
        uid = Path(f"/proc/{reply.data.daemon.pid}").stat().st_uid
    return DaemonFacts(runtime_dir, "answered", "", reply.data, uid, kind)


def _lmdb_facts(what: str, path: Path, key: bytes, expected: int) -> LmdbFacts:
    try:
        return _read_lmdb(what, path, key, expected)
    except PermissionError as exc:
        return LmdbFacts(what, path, True, format_expected=expected, unreadable=exc.strerror)


def _read_lmdb(what: str, path: Path, key: bytes, expected: int) -> LmdbFacts:
    data = path / "data.mdb"
    if not data.exists():
        return LmdbFacts(what, path, present=False, format_expected=expected)
    size = sum(p.stat().st_size for p in (data, path / "lock.mdb") if p.exists())
    readers: tuple[ReaderSlot, ...] = ()
    readers_problem = None
    try:
        slots = parse_lock_readers((path / "lock.mdb").read_bytes())
        readers = tuple(ReaderSlot(pid, txnid, _alive(pid)) for pid, txnid in slots)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        readers_problem = str(exc)
    base = LmdbFacts(
        what,
        path,
        True,
        size,
        format_expected=expected,
        readers=readers,
        readers_problem=readers_problem,
    )
    problem = data_file_problem(data, os.sysconf("SC_PAGE_SIZE"))
    if problem is not None:
        return replace(base, problem=problem)
    # The daemon may commit while we read without a reader slot (see _read_env): a read
    # error is read again once before it is called damage.
    outcome = _read_env(path, key)
    if isinstance(outcome, str):
        outcome = _read_env(path, key)
    if isinstance(outcome, str):
        return replace(base, problem=outcome)
    used, map_size, found = outcome
    return replace(base, used_bytes=used, map_size=map_size, format_found=found)


def _read_env(path: Path, key: bytes) -> str | tuple[int, int, int]:
    """`(used bytes, map size, format)` of the environment at `path`, or its problem."""
    import lmdb  # only here: the CLI's other commands do not need it

    # Read-only and without lock.mdb: nothing is written, no reader slot is taken, and a
    # lock table with stale readers is left as it is. map_size=0 takes the size the
    # daemon last committed. What we read is the meta page and one key: a short window.
    try:
        env = lmdb.open(str(path), readonly=True, lock=False, map_size=0, create=False, max_dbs=0)
    except lmdb.Error as exc:
        return f"LMDB cannot open it ({exc})"
    try:
        info, st = env.info(), env.stat()
        used = (int(info["last_pgno"]) + 1) * int(st["psize"])
        size = (path / "data.mdb").stat().st_size
        if size < used:
            return f"data.mdb is {size} bytes but its last commit uses {used} (it was truncated)"
        with env.begin() as txn:
            raw = txn.get(key)
    except lmdb.Error as exc:
        return f"a page cannot be read ({exc})"
    finally:
        env.close()
    found = struct.unpack("<I", raw)[0] if raw and len(raw) == 4 else 0
    return used, int(info["map_size"]), found


def _systemd_facts(env: Mapping[str, str], system_unit_dir: Path) -> SystemdFacts:
    config_home = Path(
        env.get("XDG_CONFIG_HOME") or Path(env.get("HOME") or "~").expanduser() / ".config"
    )
    system_unit = system_unit_dir / UNIT_NAME
    user_unit = config_home / "systemd" / "user" / UNIT_NAME
    running = Path("/run/systemd/system").is_dir()

    def state(*flags: str) -> str | None:
        try:
            done = subprocess.run(
                ["systemctl", *flags, "is-active", UNIT_NAME],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() or None

    sys_present, user_present = system_unit.is_file(), user_unit.is_file()
    unit, uid = UnitInfo(), None
    unit_env: dict[str, str] = {}
    if sys_present:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            unit = parse_unit(system_unit.read_text())
        if unit.user is not None:
            with contextlib.suppress(KeyError):
                uid = int(unit.user) if unit.user.isdigit() else pwd.getpwnam(unit.user).pw_uid
        unit_env = {name: str(system_unit) for name in unit.environment}
        for path, _optional in unit.environment_files:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                for name in env_file_names(Path(path).read_text()):
                    unit_env.setdefault(name, path)
    return SystemdFacts(
        system_unit,
        sys_present,
        user_unit,
        user_present,
        running,
        state() if running and sys_present else None,
        state("--user") if running and user_present else None,
        unit.user,
        uid,
        unit.dynamic_user,
        unit_env,
    )


def _probe(
    provider: str, kind: str, base_url: str, key_env: str | None, env: Mapping[str, str]
) -> ProbeFacts:
    import httpx

    base = base_url.rstrip("/")
    url = f"{base}/models" if kind == "openai" else f"{base}/v1/models"
    headers = {}
    key = env.get(key_env) if key_env else None
    if key:  # sent to check it, never shown
        if kind == "anthropic":
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        else:
            headers = {"authorization": f"Bearer {key}"}
    start = time.monotonic()
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_SECS, follow_redirects=False) as client:
            response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return ProbeFacts(
            provider,
            url,
            key_env,
            error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
            secs=time.monotonic() - start,
        )
    return ProbeFacts(provider, url, key_env, response.status_code, secs=time.monotonic() - start)


def _probes(config: Config, env: Mapping[str, str]) -> tuple[ProbeFacts, ...]:
    used = sorted({ref for a in config.agents.values() if a.enabled for ref in a.provider_chain})
    out = []
    for ref in used:
        kind = ref.partition(".")[0]
        provider = config.provider(ref)
        base_url = getattr(provider, "base_url", None)
        if kind not in ("openai", "anthropic") or base_url is None:
            continue  # the offline provider needs no network
        out.append(_probe(ref, kind, str(base_url), getattr(provider, "api_key_env", None), env))
    return tuple(out)


def gather_facts(
    config_path: Path | None,
    *,
    env: Mapping[str, str] | None = None,
    network: bool = False,
    system_unit_dir: Path = SYSTEM_UNIT_DIR,
    locate_errors: tuple[str, ...] = (),
) -> Facts:
    """Look at the machine once: the only I/O of doctor. `config_path` None: none was
    found (`locate_errors` say where doctor looked)."""
    env = os.environ if env is None else env
    config: Config | None = None
    errors = locate_errors
    if config_path is not None:
        try:
            config = load_config(config_path, env)
        except ConfigError as exc:
            errors = tuple(exc.lines())
    base = Path(os.path.abspath(config_path)).parent if config_path is not None else None
    facts = Facts(
        config_path,
        config,
        errors,
        abi_version(),
        base,
        euid=os.geteuid(),
        systemd=_systemd_facts(env, system_unit_dir),
    )
    if config is None:
        runtime_dir = None
        if config_path is not None:
            with contextlib.suppress(ConfigError):
                runtime_dir = runtime_dir_hint(config_path, env)
        if runtime_dir is None:
            return facts
        return replace(facts, daemon=_daemon_facts(runtime_dir))
    paths = daemon_paths(config, env)
    keys = {k for k, _ in key_variables(config).values()}
    try:
        proc_locks = Path("/proc/locks").read_text()
    except OSError:
        proc_locks = ""
    return replace(
        facts,
        env_set=frozenset(k for k in keys if env.get(k)),
        dirs=(
            _dir_facts("state dir", paths.state_dir),
            _dir_facts("runtime dir", paths.runtime_dir),
        ),
        daemon=_daemon_facts(paths.runtime_dir),
        locks=(
            _lock_facts("daemon lock", paths.runtime_dir / "zeroclaw.lock", proc_locks, True),
            _lock_facts("memory lock", paths.state_dir / "memory.lock", proc_locks, False),
            _lock_facts(
                "sub-agent store lock",
                paths.state_dir / "subagents" / "owner.lock",
                proc_locks,
                True,
            ),
        ),
        lmdb=tuple(
            _lmdb_facts(what, paths.state_dir / sub, key, version)
            for what, sub, key, version in LMDB_STORES
        ),
        probes=_probes(config, env) if network else None,
        mcp_pins=_mcp_pin_facts(paths.state_dir)
        if any(agent.mcp for agent in config.agents.values())
        else None,
    )


def _mcp_pin_facts(state_dir: Path) -> McpPinFacts:
    store = PinStore(pins_path(state_dir))
    try:
        # Read only: `load` removes leftovers of a cut write, which doctor must not.
        book = store.read()
    except PinStoreCorrupt as exc:
        return McpPinFacts(store.path, True, problem=str(exc))
    except OSError as exc:
        return McpPinFacts(store.path, True, unreadable=exc.strerror or str(exc))
    if book is None:
        return McpPinFacts(store.path, False)
    pins = book.items()
    return McpPinFacts(store.path, True, len(pins), sum(pin.withheld for _, pin in pins))
