"""The dashboard's views through a real daemon, read with a plain HTTP client signed in as
the operator: the agents (state, pid, resident memory, restarts), a sub-agent invocation,
the day's usage by origin (an API turn among them), and each agent's memory, read-only,
whatever its records hold. (The browser tests drive the live parts: events, approvals.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.helpers import client, gateway_daemon, sign_in
from tests.subagents.helpers import invocation, write_bundle
from tests.supervisor.harness import Daemon

Gateway = tuple[Daemon, int]
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def with_a_subagent(doc: dict[str, Any]) -> None:
    root = Path(doc["agents"]["alpha"]["workspace"]["path"]).parent
    doc["subagents"] = {"dir": str(root / "subagents")}
    write_bundle(root / "subagents", "summariser", callers=("cli",))
    # a schedule that is never due while the tests run: the agents row shows its next run
    doc["agents"]["alpha"]["schedules"] = {"digest": {"every": "24h", "text": "the digest"}}


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with gateway_daemon(with_a_subagent) as running:
        yield running


@pytest.fixture
def operator(gateway: Gateway) -> Iterator[httpx.Client]:
    _, port = gateway
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as browser:
        assert sign_in(browser, port).status_code == 303
        yield browser


def section(page: str, name: str) -> str:
    found = re.search(rf'<section id="{name}">(.*?)</section>', page, re.S)
    assert found is not None, page
    return found.group(1)


def test_the_overview_shows_the_agents_an_invocation_and_the_days_usage(
    gateway: Gateway, operator: httpx.Client
) -> None:
    daemon, port = gateway
    client(port).chat.completions.create(
        model="alpha", messages=[{"role": "user", "content": "hello"}], user="dashboard"
    )
    dispatched = invocation(daemon, "summariser", "summarise this")
    status = json.loads(daemon.cli("status", "--json").stdout)
    alpha = next(a for a in status["agents"] if a["alias"] == "alpha")

    page = operator.get("/ui")
    assert page.status_code == 200
    agents = section(page.text, "agents")
    row = re.search(r'<tr data-agent="alpha">(.*?)</tr>', agents, re.S)
    assert row is not None, agents
    assert 'data-state="running"' in row.group(1)
    assert f'<td class="pid">{alpha["pid"]}</td>' in row.group(1)
    assert re.search(r'<td class="rss">[0-9.]+ (KiB|MiB|GiB)</td>', row.group(1)), row.group(1)
    assert f'<td class="restarts">{alpha["restarts"]}</td>' in row.group(1)
    assert "next start" in agents
    assert re.search(r'<td class="next-run">digest at [0-9-]+ [0-9:]+</td>', row.group(1))
    assert dispatched["id"] in section(page.text, "invocations")
    usage = section(page.text, "usage")
    assert "api.ci:ci-bot" in usage  # the API turn's origin
    assert "summariser" in usage  # the sub-agent's own account


def test_memory_is_browsed_per_agent_read_only_and_as_text(
    gateway: Gateway, operator: httpx.Client
) -> None:
    daemon, _ = gateway
    stored = daemon.cli("memory", "store", "-a", "alpha", "motto", f"teal {HOSTILE}")
    assert stored.returncode == 0, stored.stderr

    page = operator.get("/ui/memory", params={"agent": "alpha"})
    assert page.status_code == 200
    memory = section(page.text, "memory")
    assert "teal &lt;script&gt;alert(1)&lt;/script&gt;&lt;img" in memory
    assert "<script>alert" not in page.text and "<img" not in page.text
    assert "teal" not in section(operator.get("/ui/memory?agent=beta").text, "memory")
    assert operator.get("/ui/memory?agent=nobody").status_code == 404
    # Read-only: no way to write through the dashboard.
    assert operator.post("/ui/memory?agent=alpha", data={"key": "x"}).status_code == 405
    listed = json.loads(daemon.cli("memory", "list", "-a", "alpha", "--json").stdout)
    assert [r["key"] for r in listed["records"]] == ["motto"]
