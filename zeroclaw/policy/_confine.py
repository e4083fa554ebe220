"""What a process the daemon starts gets, besides its file rules: Landlock scopes, TCP
rules, capabilities, no_new_privs (ADR 0043). Pure: the kernel's ABI and the highest
capability number come in as numbers, so every kernel is decided the same way in tests.

An agent, a sub-agent runtime, a shell command and a discovery probe each get the signal
and abstract-unix-socket scopes (ABI >= 6): nothing they run can signal or connect to a
process outside their own Landlock domain (the daemon, the zygote, a sibling agent),
while an agent still signals its own commands, which live in a domain nested in its own.
Every capability is dropped (bounding, ambient, effective, permitted, inheritable), so a
daemon run as root starts agents that hold none, and no user namespace can be made, in which
they would hold them all again. Where the kernel has TCP rules (ABI >= 4)
binding is denied and connecting is allowed only to the ports the process's provider
needs; a command inherits its agent's TCP rules (its domain is nested in the agent's).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args
from urllib.parse import urlsplit

# Landlock ABI bits (include/uapi/linux/landlock.h).
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPES_ABI = 6
NET_ABI = 4

ProcessKind = Literal["agent", "subagent_runtime", "command", "probe"]
PROCESS_KINDS: tuple[ProcessKind, ...] = get_args(ProcessKind)
# What a process may run without, on an older kernel (or with no Landlock at all).
Gap = Literal["signal_scope", "abstract_unix_socket_scope", "tcp_rules"]
GAP_WORDS: dict[Gap, str] = {
    "signal_scope": "signal scope",
    "abstract_unix_socket_scope": "abstract-socket scope",
    "tcp_rules": "TCP rules",
}


@dataclass(frozen=True)
class ProcessConfinement:
    """One process's confinement beyond its file rules."""

    kind: ProcessKind
    abi: int  # the kernel's Landlock ABI this was decided for (0: none)
    scopes: int  # Landlock `scoped` bits
    handled_net: int  # Landlock `handled_access_net` bits (0: TCP not restricted here)
    connect_ports: tuple[int, ...]  # TCP ports it may connect to (when handled_net)
    drop_caps: tuple[int, ...]  # every capability number, 0..cap_last_cap
    no_new_privs: bool
    missing: tuple[Gap, ...]  # what this kernel cannot give it
    # No new user namespace (a seccomp filter): inside one it would hold every capability.
    no_user_namespaces: bool = True
    # No IPv4/IPv6 socket at all (the same filter): a process with no TCP port to reach
    # would still send UDP anywhere, Landlock governing TCP only (an offline agent).
    no_inet_sockets: bool = False

    def describe(self) -> str:
        """For the agent's own report (`status`, the log): what it runs without."""
        if not self.missing:
            return ""
        return "without " + ", ".join(GAP_WORDS[g] for g in self.missing)


def decide_confinement(
    kind: ProcessKind,
    abi: int,
    *,
    cap_last_cap: int,
    connect_ports: Iterable[int] = (),
) -> ProcessConfinement:
    """What `kind` gets on a kernel with Landlock ABI `abi` (0: none) whose highest
    capability is `cap_last_cap`. `connect_ports`: the TCP ports its provider needs (an
    agent's, a runtime's); a probe needs none; a command inherits its agent's."""
    scopes = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= SCOPES_ABI else 0
    restricts_net = abi >= NET_ABI and kind != "command"
    ports = tuple(sorted(set(connect_ports))) if restricts_net and kind != "probe" else ()
    missing: list[Gap] = []
    if abi < SCOPES_ABI:
        missing += ["signal_scope", "abstract_unix_socket_scope"]
    if abi < NET_ABI:
        missing.append("tcp_rules")
    return ProcessConfinement(
        kind=kind,
        abi=abi,
        scopes=scopes,
        handled_net=NET_BIND_TCP | NET_CONNECT_TCP if restricts_net else 0,
        connect_ports=ports,
        drop_caps=tuple(range(max(cap_last_cap, 0) + 1)),
        no_new_privs=True,
        missing=tuple(missing),
        no_inet_sockets=kind in ("agent", "subagent_runtime") and not tuple(connect_ports),
    )


@dataclass(frozen=True)
class ForAgent:
    """What a process the daemon runs for an agent (a discovered adapter's program, an MCP
    adapter's server) gets of the agent's own confinement. Such a process is the daemon's
    child, outside the agent's Landlock domain, so it inherits none of it: its ruleset
    carries the agent's scopes and TCP rules (`confinement`), and one for an agent with no
    port to reach gets the agent's seccomp filter too (`seccomp`, refusing IPv4/IPv6
    sockets; b"": none), as an agent's own commands do."""

    confinement: ProcessConfinement
    seccomp: bytes


DEFAULT_PORTS = {"https": 443, "http": 80}


def url_port(url: str) -> int | None:
    """The TCP port `url` connects to (its explicit port, else its scheme's), or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if port is not None:
        return port
    return DEFAULT_PORTS.get(parts.scheme.lower())


def confinement_gaps(abi: int) -> tuple[Gap, ...]:
    """What an agent confined on a kernel with this ABI runs without (for `status`)."""
    return decide_confinement("agent", abi, cap_last_cap=0).missing


ROOT_FIX = (
    "run the daemon as an unprivileged user: 'zeroclaw service install' (the system unit "
    "runs it as user zeroclaw), or start 'zeroclaw daemon' from that user's shell"
)


def root_warning(euid: int) -> str | None:
    """What running the daemon as `euid` means, when it is root: said in the daemon's log at
    start and by `doctor` (ADR 0043). None for any other user."""
    if euid != 0:
        return None
    return (
        "the daemon runs as root: its agents, sub-agent runtimes, commands and probes are "
        "started with every capability dropped and no_new_privs, but they keep uid 0, which "
        "owns most of the system's files; only their Landlock rulesets keep them out"
    )
