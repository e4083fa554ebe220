"""Process titles (issue 14): `ps` and `top` tell the daemon, the zygote and each agent apart."""

from __future__ import annotations

from pathlib import Path

from tests.supervisor.harness import Daemon, agent_entry, make_config
from tests.supervisor.test_daemon import DaemonFactory
from zeroclaw.supervisor._zygote import agent_title, daemon_title


def cmdline(pid: int) -> str:
    """What `ps -o args` shows: the argv strings, NULs as spaces, the padding dropped."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode()


def comm(pid: int) -> str:
    """What `top` shows by default."""
    return Path(f"/proc/{pid}/comm").read_text().strip()


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_titles_of_an_agent_and_a_subagent_runtime() -> None:
    assert agent_title("alpha") == ("zeroclaw agent alpha", "zc:alpha")
    title, name = agent_title("sub:summarizer@0123456789ab")
    assert title == "zeroclaw subagent summarizer@0123456789ab"
    assert name.startswith("zc:sub:summa")
    assert daemon_title("etc/z.toml") == f"zeroclaw daemon --config {Path('etc/z.toml').resolve()}"


def test_daemon_zygote_and_agents_have_distinct_titles(root: Path, daemons: DaemonFactory) -> None:
    daemon: Daemon = daemons(make_config(root, {a: agent_entry() for a in ("alpha", "beta")}))
    daemon.start()
    assert daemon.proc is not None
    pids = daemon.pids()
    assert cmdline(daemon.proc.pid) == f"zeroclaw daemon --config {daemon.config_path}"
    assert comm(daemon.proc.pid) == "zeroclaw daemon"
    [zygote] = [c for c in children(daemon.proc.pid) if cmdline(c) == "zeroclaw zygote"]
    assert comm(zygote) == "zeroclaw zygote"
    for alias in ("alpha", "beta"):
        assert cmdline(pids[alias]) == f"zeroclaw agent {alias}"
        assert comm(pids[alias]) == f"zc:{alias}"
        assert pids[alias] in children(zygote)
