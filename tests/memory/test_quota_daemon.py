"""Memory quotas end to end (issue 24, found 9): signed webhook messages cannot grow an
agent's transcripts past its configured caps, a `remember:` past `max_records` is a
`quota_exceeded` tool refusal, and both are counted in `memory stats` and the metrics."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.channels.test_channels_daemon import SECRET, free_port, post, wait_serving
from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]
QUOTAS = {
    "max_records": 3,
    "max_bytes": 1 << 20,
    "max_session_turns": 8,
    "max_session_bytes": 16 * 1024,
    "max_transcript_bytes": 48 * 1024,
    "max_sender_bytes": 24 * 1024,
}


def quota_config(root: Path, port: int) -> dict[str, object]:
    agents = {"alpha": agent_entry(channels=["cli.local", "webhook.ops"], memory=QUOTAS)}
    doc = make_config(root, agents)
    doc["channels"]["webhook"] = {  # type: ignore[index]
        "ops": {
            "listen": f"127.0.0.1:{port}",
            "secret_env": "HOOK_SECRET",
            "rate_limit_per_minute": 10_000,
        }
    }
    doc["peer_groups"] = {
        "hooks": {"channel": "webhook.ops", "agents": ["alpha"], "external_peers": ["*"]}
    }
    return doc


def alpha_stats(daemon: Daemon) -> dict[str, object]:
    result = daemon.cli("memory", "stats", "--agent", "alpha", "--json")
    assert result.returncode == 0, (result.stderr, daemon.log())
    counts: dict[str, object] = json.loads(result.stdout)["namespaces"]["alpha"]
    return counts


def test_webhook_messages_and_remembers_cannot_grow_an_agent_past_its_caps(
    root: Path, daemons: DaemonFactory
) -> None:
    port = free_port()
    daemon = daemons(quota_config(root, port), faults=False).start(HOOK_SECRET=SECRET)
    wait_serving(daemon, "webhook.ops")
    # 200 signed messages of 2 KB from 4 senders over 20 sessions: 800 KB of transcript
    # offered, 48 KB allowed. Each is answered: a transcript that is not saved loses the
    # session its turn, never the reply.
    for i in range(200):
        body = {"sender": f"bot{i % 4}", "session": f"s{i % 20}", "text": f"{i} " + "x" * 2000}
        answer = post(port, "ops", body)
        assert answer.status_code == 200, answer.text
    stats = alpha_stats(daemon)
    assert isinstance(stats["transcript_bytes"], int)
    assert 0 < stats["transcript_bytes"] <= QUOTAS["max_transcript_bytes"], stats
    assert stats["quota"] == QUOTAS, stats
    refusals = stats["quota_refusals"]
    assert isinstance(refusals, dict) and refusals, stats
    # Which cap refuses first depends on how sessions are keyed by origin.
    assert set(refusals) <= {"transcript_bytes", "sender_bytes"}, refusals
    # Records are refused at max_records, as the tool's typed refusal.
    calls = []
    for n in range(4):
        chat = daemon.cli("--agent", "alpha", "chat", "-m", f"remember: fact number {n}", "--json")
        assert chat.returncode == 0, (chat.stderr, daemon.log())
        [call] = json.loads(chat.stdout)["tool_calls"]
        calls.append((call["name"], call["ok"], call.get("error_code")))
    assert calls[:3] == [("memory_store", True, None)] * 3, calls
    assert calls[3] == ("memory_store", False, "quota_exceeded"), calls
    stats = alpha_stats(daemon)
    assert stats["records"] == 3 and stats["quota_refusals"]["records"] == 1, stats  # type: ignore[index]
    text = daemon.cli("memory", "stats", "--agent", "alpha").stdout
    assert "records: 3/3" in text and "quota_exceeded: " in text and "records 1" in text, text
    metrics = daemon.cli("metrics")
    assert metrics.returncode == 0, metrics.stderr
    assert (
        'zeroclaw_memory_quota_refusals_total{agent="alpha",quota="records"} 1.0' in metrics.stdout
    ), metrics.stdout
    assert 'zeroclaw_memory_operations_total{op="store",outcome="quota_exceeded"} 1.0' in (
        metrics.stdout
    )
