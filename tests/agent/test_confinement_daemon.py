"""Agents confined as processes (issue 24, found 5 and 6; ADR 0043), from inside real
agent processes of a real daemon run as root here: no signal reaches the daemon, the
zygote or a sibling; no abstract socket made outside is reached; no capability is left
(raw sockets, setuid); TCP reaches only the provider's port; and the agent still times
out and kills its own commands."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.bus.test_router import plan, result_of
from tests.supervisor.harness import Daemon, agent_entry, make_config
from zeroclaw.policy import abi_version


def workspace(root: Path, alias: str) -> Path:
    return root / "state" / "agents" / alias / "workspace"


DaemonFactory = Callable[..., Daemon]
needs_scopes = pytest.mark.skipif(abi_version() < 6, reason="needs Landlock ABI >= 6")
NO_CAPS = "0000000000000000"


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


@pytest.fixture
def listeners() -> Iterator[dict[str, socket.socket]]:
    """Loopback TCP listeners (the kernel completes a connect into the backlog: nothing
    needs to accept) and an abstract unix socket made outside every agent."""
    made: dict[str, socket.socket] = {}
    for name in ("provider", "other"):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        made[name] = s
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0zc-confine-{os.getpid()}")
    abstract.listen(16)
    made["abstract"] = abstract
    yield made
    for s in made.values():
        s.close()


@needs_scopes
def test_an_agent_process_cannot_signal_reach_or_regain_what_it_was_denied(
    root: Path, daemons: DaemonFactory, listeners: dict[str, socket.socket]
) -> None:
    provider = listeners["provider"].getsockname()[1]
    other = listeners["other"].getsockname()[1]
    abstract = listeners["abstract"].getsockname()[1:].decode()
    probes = {"abstract": abstract}
    plan(root, "ro", do="confinement", tcp={"any": other}, preopen_result=True, **probes)
    plan(root, "net", do="confinement", tcp={"provider": provider, "other": other}, **probes)
    doc = make_config(
        root,
        {
            "ro": agent_entry(risk_profile="ro"),
            "net": agent_entry(model_provider="openai.local"),
            "beta": agent_entry(),
        },
    )
    doc["risk_profiles"]["ro"] = {"level": "readonly"}
    doc["providers"]["openai"] = {
        "local": {"base_url": f"http://127.0.0.1:{provider}/v1", "model": "m"}
    }
    daemon = daemons(doc).start()
    beta = daemon.pids()["beta"]
    assert daemon.proc is not None
    for alias in ("ro", "net"):
        targets = {"daemon": daemon.proc.pid, "sibling": beta}
        (workspace(root, alias) / "targets.json").write_text(json.dumps(targets))
    try:
        ro = result_of(root, "ro", timeout=60)
    except AssertionError:
        raise AssertionError(daemon.log_text()[-20000:]) from None
    net = result_of(root, "net", timeout=60)
    for seen in (ro, net):
        assert seen["sigstop_daemon"] == "EPERM", seen
        assert seen["sigkill_daemon"] == "EPERM", seen
        assert seen["sigkill_zygote"] == "EPERM", seen
        assert seen["sigkill_sibling"] == "EPERM", seen
        assert seen["abstract_connect"] == "EPERM", seen
        assert seen["setuid_1"] == "EPERM", seen
        # ... nor a user namespace of its own, in which it would hold every capability
        assert seen["unshare_user"] == "EPERM", seen
        assert seen["bind_tcp"] == "EACCES", seen
        assert seen["caps"] == [0, 0, 0]
        # Its own command: timed out and killed by the agent, with no capability either.
        assert seen["command_timed_out"] is True
        assert seen["command_killed"] == "ok" and seen["command_exit"] == -9
        assert seen["command_caps"] == [0, 0, 0]
    # uid 0 without CAP_SETUID may still "set" the uid it has: a no-op that gives nothing.
    assert ro["setuid_0"] == "ok"
    for alias in ("ro", "net"):  # what the kernel says of the agent process, from outside
        status = proc_status(daemon.pids()[alias])
        caps = {k: status[k] for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")}
        assert set(caps.values()) == {NO_CAPS}, (alias, caps)
        assert status["NoNewPrivs"] == "1"
    assert ro["tcp_any"] == "EACCES"  # offline: no TCP port at all
    # ... nor any IPv4/IPv6 socket: UDP went anywhere (Landlock governs TCP only), and
    # io_uring's socket op would pass the filter. Found by the attack pass.
    assert (ro["udp"], ro["io_uring"], ro["raw_socket"]) == ("EACCES",) * 3, ro
    # A networked agent still resolves its provider's name (DNS over UDP); no raw socket.
    assert (net["udp"], net["raw_socket"]) == ("ok", "EPERM"), net
    assert net["tcp_provider"] == "ok" and net["tcp_other"] == "EACCES"
    # Root is said at start (we run as root here), and status says nothing is missing.
    if os.geteuid() == 0:
        assert "the daemon runs as root" in daemon.log_text()
    assert all(a["without"] == [] for a in daemon.status()["agents"])
    # Nothing was hurt: the daemon answers, the sibling kept its process.
    assert daemon.pids()["beta"] == beta
    assert daemon.agent("beta")["state"] == "running"


@needs_scopes
def test_an_agent_without_a_file_sandbox_is_still_confined_as_a_process(
    root: Path, daemons: DaemonFactory, listeners: dict[str, socket.socket]
) -> None:
    """`sandbox = "none"` turns off the file rules, not the process confinement: before,
    such an agent SIGSTOPped the daemon, killed a sibling, reached the metrics listener's
    port and the control socket of any other daemon on the machine (judged there as the
    operator: no zygote of that daemon is among its ancestors)."""
    other = listeners["other"].getsockname()[1]
    abstract = listeners["abstract"].getsockname()[1:].decode()
    plan(root, "loose", do="confinement", tcp={"any": other}, abstract=abstract)
    doc = make_config(root, {"loose": agent_entry(risk_profile="loose"), "beta": agent_entry()})
    doc["risk_profiles"]["loose"] = {"level": "supervised", "sandbox": "none"}
    daemon = daemons(doc).start()
    beta = daemon.pids()["beta"]
    assert daemon.proc is not None
    targets = {"daemon": daemon.proc.pid, "sibling": beta}
    (workspace(root, "loose") / "targets.json").write_text(json.dumps(targets))
    try:
        seen = result_of(root, "loose", timeout=60)
    except AssertionError:
        raise AssertionError(daemon.log_text()[-20000:]) from None
    assert seen["sigstop_daemon"] == "EPERM", seen
    assert seen["sigkill_daemon"] == "EPERM", seen
    assert seen["sigkill_zygote"] == "EPERM", seen
    assert seen["sigkill_sibling"] == "EPERM", seen
    assert seen["abstract_connect"] == "EPERM", seen
    assert seen["tcp_any"] == "EACCES", seen
    assert seen["udp"] == "EACCES", seen
    assert seen["caps"] == [0, 0, 0]
    loose = next(a for a in daemon.status()["agents"] if a["alias"] == "loose")
    assert loose["without"] == []
    assert daemon.pids()["beta"] == beta
    assert daemon.agent("beta")["state"] == "running"
