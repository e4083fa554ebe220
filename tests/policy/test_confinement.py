"""What a process gets besides its file rules (ADR 0043), decided purely for every kernel
ABI: scopes, TCP rules and ports, capabilities to drop; the ruleset attribute each ABI
takes; the ports an agent's provider needs; what `status` says an agent runs without;
and the system secrets no plan grants."""

from __future__ import annotations

import os
import platform
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import get_args

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.agent.helpers import agent_spec
from tests.conftest import REPO
from zeroclaw.agent import McpServerSpec, SubagentRuntime
from zeroclaw.agent._sandbox import agent_confinement, connect_ports
from zeroclaw.policy import (
    PROCESS_KINDS,
    SYSTEM_SECRETS,
    Gap,
    confinement_gaps,
    decide_confinement,
    plan_command_sandbox,
    plan_for,
    plan_readonly,
    process_gaps,
    url_port,
)
from zeroclaw.policy._confine import (
    NET_BIND_TCP,
    NET_CONNECT_TCP,
    SCOPE_ABSTRACT_UNIX_SOCKET,
    SCOPE_SIGNAL,
)
from zeroclaw.policy._landlock import ruleset_attr
from zeroclaw.providers import OpenAISpec

BOTH_SCOPES = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
TCP = NET_BIND_TCP | NET_CONNECT_TCP


@given(
    kind=st.sampled_from(PROCESS_KINDS),
    abi=st.integers(0, 12),
    last=st.integers(0, 63),
    ports=st.lists(st.integers(1, 65535), max_size=4),
)
def test_every_kind_gets_the_scopes_tcp_rules_and_cap_drop_its_kernel_offers(
    kind: str, abi: int, last: int, ports: list[int]
) -> None:
    got = decide_confinement(kind, abi, cap_last_cap=last, connect_ports=ports)  # type: ignore[arg-type]
    assert got.scopes == (BOTH_SCOPES if abi >= 6 else 0)
    assert got.drop_caps == tuple(range(last + 1))  # every capability, whatever the kind
    assert got.no_new_privs and got.no_user_namespaces
    # A command inherits its agent's TCP rules (a nested domain): it handles none itself.
    assert got.handled_net == (TCP if abi >= 4 and kind != "command" else 0)
    if kind in ("agent", "subagent_runtime") and abi >= 4:
        assert got.connect_ports == tuple(sorted(set(ports)))
    else:  # a probe connects nowhere; without TCP rules there is nothing to allow
        assert got.connect_ports == ()
    expected: list[Gap] = []
    if abi < 6:
        expected += ["signal_scope", "abstract_unix_socket_scope"]
    if abi < 4:
        expected.append("tcp_rules")
    assert got.missing == tuple(expected)
    assert bool(got.describe()) == bool(expected)


def test_an_offline_agent_on_this_kernels_abi_may_connect_nowhere() -> None:
    got = decide_confinement("agent", 7, cap_last_cap=40)
    assert (got.scopes, got.handled_net, got.connect_ports) == (BOTH_SCOPES, TCP, ())
    assert got.drop_caps == tuple(range(41)) and got.missing == ()


@pytest.mark.parametrize(
    ("abi", "layout"),
    [(1, "=Q"), (3, "=Q"), (4, "=QQ"), (5, "=QQ"), (6, "=QQQ"), (7, "=QQQ")],
)
def test_the_ruleset_attribute_has_the_fields_each_abi_knows(abi: int, layout: str) -> None:
    confinement = decide_confinement("agent", abi, cap_last_cap=40, connect_ports=[443])
    attr = ruleset_attr(0xFF, abi, confinement)
    fields = struct.unpack(layout, attr)
    assert fields[0] == 0xFF
    if abi >= 4:
        assert fields[1] == TCP
    if abi >= 6:
        assert fields[2] == BOTH_SCOPES
    # The older callers (no confinement): no TCP rule, the abstract-socket scope only.
    legacy = struct.unpack(layout, ruleset_attr(0xFF, abi))
    assert legacy[1:] == ((0,) if abi >= 4 else ()) + (
        (SCOPE_ABSTRACT_UNIX_SOCKET,) if abi >= 6 else ()
    )


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("https://api.openai.com/v1", 443),
        ("http://127.0.0.1:11434/v1", 11434),
        ("HTTP://localhost/v1", 80),
        ("https://[::1]:8443/", 8443),
        ("ftp://example.com/", None),
        ("http://host:99999/", None),
    ],
)
def test_the_port_a_base_url_connects_to(url: str, port: int | None) -> None:
    assert url_port(url) == port


def test_an_agents_ports_come_from_its_provider(tmp_path: Path) -> None:
    offline = agent_spec(tmp_path)
    assert connect_ports(offline) == ()
    networked = msgspec.structs.replace(
        offline,
        provider="openai.local",
        provider_config=OpenAISpec("http://127.0.0.1:8080/v1", "m", None, 30, 1),
    )
    assert connect_ports(networked) == (8080,)
    agent = agent_confinement(networked, 7, 40)
    assert agent.kind == "agent" and agent.connect_ports == (8080,)
    runtime = msgspec.structs.replace(
        networked, subagent=SubagentRuntime("helper", "d" * 64, str(tmp_path), 4, 30)
    )
    assert agent_confinement(runtime, 7, 40).kind == "subagent_runtime"
    assert agent_confinement(runtime, 7, 40).connect_ports == (8080,)
    assert agent_confinement(offline, 3, 40).missing == get_args(Gap)


def test_an_agents_http_mcp_servers_add_their_ports_and_stdio_ones_none(tmp_path: Path) -> None:
    servers = (
        McpServerSpec("remote", "http", url="http://127.0.0.1:9000/mcp"),
        McpServerSpec("tls", "http", url="https://mcp.example.org/mcp"),
        McpServerSpec("time", "stdio", command="mcp-server-time"),
    )
    agent = msgspec.structs.replace(agent_spec(tmp_path), mcp_servers=servers)
    assert connect_ports(agent) == (443, 9000)
    assert agent_confinement(agent, 7, 40).connect_ports == (443, 9000)


@pytest.mark.parametrize(
    ("mode", "abi", "gaps"),
    [
        ("auto", 7, ()),
        ("landlock", 6, ()),
        ("auto", 5, ("signal_scope", "abstract_unix_socket_scope")),
        ("auto", 3, ("signal_scope", "abstract_unix_socket_scope", "tcp_rules")),
        # sandbox = "none" turns off the file rules, not the scopes nor the TCP rules
        ("none", 7, ()),
        ("none", 5, ("signal_scope", "abstract_unix_socket_scope")),
        ("auto", 0, ("signal_scope", "abstract_unix_socket_scope", "tcp_rules")),
    ],
)
def test_status_says_what_an_agent_runs_without(mode: str, abi: int, gaps: tuple[str, ...]) -> None:
    assert process_gaps(mode, abi) == gaps
    if abi >= 1:
        assert confinement_gaps(abi) == gaps


def test_no_plan_grants_a_system_secret(tmp_path: Path) -> None:
    """A root agent without capabilities still owns /etc/shadow (root:shadow 0640): only
    the ruleset keeps it out, for agents (`full` too), runtimes and commands."""
    ws = tmp_path / "ws"
    ws.mkdir()
    plans = [
        plan_for(str(ws)),
        plan_for(str(ws), anywhere=True),
        plan_readonly(str(ws)),
        plan_command_sandbox(workspace=str(ws), home=str(tmp_path), executables=()),
    ]
    for plan in plans:
        granted = [path for path, rights in plan.rules if rights & ~(1 << 3)]  # beyond listing
        for secret in SYSTEM_SECRETS:
            assert not any(
                secret == p or secret.startswith(p.rstrip("/") + "/") for p in granted
            ), (secret, plan)
        assert any(p.startswith("/etc/") for p in granted)  # /etc itself stays readable


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_user_namespace_filter_is_a_whole_bpf_program(machine: str) -> None:
    from zeroclaw.policy._seccomp import user_namespace_filter

    program = user_namespace_filter(machine)
    assert program is not None and len(program) % 8 == 0
    last = struct.unpack("=HBBI", program[-8:])
    assert last == (0x06, 0, 0, 0x7FFF0000)  # everything not refused is allowed
    assert user_namespace_filter("sparc") is None


COMPAT_UNSHARE = """
import ctypes, mmap, sys
from zeroclaw._prctl import prctl
from zeroclaw.policy._seccomp import forbid_user_namespaces
prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
assert forbid_user_namespaces()
# mov eax, 310 (i386 unshare); mov ebx, CLONE_NEWUSER; int 0x80; ret
code = b"\\xb8" + (310).to_bytes(4, "little") + b"\\xbb" + (0x10000000).to_bytes(4, "little")
code += b"\\xcd\\x80\\xc3"
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print("unshare", call(), open("/proc/self/status").read().count("CapEff:\\t000001ff"))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 compat ABI is x86_64's")
def test_no_user_namespace_through_the_i386_compat_abi() -> None:
    """Found by the attack pass: the filter allowed every syscall of another ABI, so
    `int 0x80` with i386's unshare number made a user namespace (every capability inside
    it) past a filter that knew only x86_64's numbers. Now such a syscall kills."""
    result = subprocess.run(
        [sys.executable, "-c", COMPAT_UNSHARE],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=60,
    )
    assert result.returncode == -signal.SIGSYS, (result.returncode, result.stdout, result.stderr)
    assert "unshare" not in result.stdout


def test_only_a_process_with_a_port_to_reach_gets_ip_sockets() -> None:
    """Landlock governs TCP only: an offline agent sent UDP anywhere (attack pass)."""
    offline = decide_confinement("agent", 7, cap_last_cap=40)
    networked = decide_confinement("subagent_runtime", 7, cap_last_cap=40, connect_ports=[443])
    assert offline.no_inet_sockets and not networked.no_inet_sockets
    assert decide_confinement("subagent_runtime", 3, cap_last_cap=40).no_inet_sockets
    assert not decide_confinement("command", 7, cap_last_cap=40).no_inet_sockets  # inherits
