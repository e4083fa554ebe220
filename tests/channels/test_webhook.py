"""The webhook adapter over real HTTP on loopback, against a real ChannelHost on the turns
bench with alpha (a real agent runtime, offline provider) bound to the webhook channels:
signed requests get the owner's reply; every refused request gets its 4xx and reaches no
agent; approvals answer 202 and are given on their own signed endpoint."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import trio

from tests.conversations.helpers import Bench, bench
from zeroclaw.agent._runtime import AgentRuntime, BusyTurns
from zeroclaw.channels import ChannelHost, ChannelStartFailed, WebhookAdapter, sign
from zeroclaw.config import WebhookChannel

SECRET = "s3cret-for-tests"
ENV = {"HOOK_KEY": SECRET, "SLOW_KEY": "another-secret"}


HOOKS: dict[str, dict[str, Any]] = {
    "ops": {"listen": "127.0.0.1:8787", "secret_env": "HOOK_KEY", "max_body_bytes": 4096},
    "slow": {"listen": "127.0.0.1:8787", "secret_env": "SLOW_KEY", "rate_limit_per_minute": 2},
}


def with_webhooks(doc: dict[str, Any]) -> None:
    doc["channels"]["webhook"] = {alias: dict(entry) for alias, entry in HOOKS.items()}
    doc["agents"]["alpha"]["channels"] = ["cli.local", "webhook.ops", "webhook.slow"]
    doc["peer_groups"]["hooks"] = {
        "channel": "webhook.ops",
        "agents": ["alpha"],
        "external_peers": ["*"],
        "ignore": ["mallory"],
        # These tests pin the sender's own approval path: granted explicitly (by
        # default no tool, and every approval goes to the operator, ADR 0042).
        "tools": ["file_write", "file_read", "memory_store", "memory_recall"],
        "approvals": "sender",
    }
    doc["peer_groups"]["slowhooks"] = {
        "channel": "webhook.slow",
        "agents": ["alpha"],
        "external_peers": ["*"],
        # These tests pin the sender's own approval path: granted explicitly (by
        # default no tool, and every approval goes to the operator, ADR 0042).
        "tools": ["file_write", "file_read", "memory_store", "memory_recall"],
        "approvals": "sender",
    }


def only_bob(doc: dict[str, Any]) -> None:
    with_webhooks(doc)
    doc["peer_groups"]["hooks"]["external_peers"] = ["bob", "mallory"]


@dataclass
class Served:
    bench: Bench
    host: ChannelHost
    adapter: WebhookAdapter
    http: httpx.AsyncClient
    turns_started: list[int]  # the agent runtime's busy reports: what reached alpha

    async def post(
        self, alias: str, value: Any, *, secret: str = SECRET, **kw: Any
    ) -> httpx.Response:
        body = value if isinstance(value, bytes) else msgspec.json.encode(value)
        return await self.http.post(
            f"/v1/channels/{alias}/messages", content=body, headers=signed(body, secret, **kw)
        )

    async def approve(
        self, alias: str, approval_id: str, approved: bool, *, ts: int | None = None
    ) -> httpx.Response:
        body = msgspec.json.encode({"approved": approved})
        return await self.http.post(
            f"/v1/channels/{alias}/approvals/{approval_id}",
            content=body,
            headers=signed(body, ts=ts),
        )

    async def result(self, status_url: str) -> httpx.Response:
        return await self.http.get(
            status_url + "?wait=20", headers=signed(status_url.encode()), timeout=30
        )

    def nothing_reached_an_agent(self) -> bool:
        return (
            self.turns_started == []
            and self.bench.service.turns == {}
            and sum(self.host.delivered.values()) == 0
        )


def signed(body: bytes, secret: str = SECRET, *, ts: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if ts is None else ts)
    return {
        "X-Zeroclaw-Timestamp": stamp,
        "X-Zeroclaw-Signature": sign(secret.encode(), stamp, body),
        "Content-Type": "application/json",
    }


def hooks(b: Bench) -> dict[str, WebhookChannel]:
    """The webhook entries the bench's config holds (what the daemon passes the adapter)."""
    return {f"webhook.{a}": WebhookChannel(**entry) for a, entry in HOOKS.items()}


@asynccontextmanager
async def served(
    tmp_path: Path,
    configure: Any = with_webhooks,
    adapter_options: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[Served]:
    async with bench(tmp_path, configure=configure) as b:
        runtime: AgentRuntime = await b.agent(tmp_path)
        started: list[int] = []

        async def on_busy(turns: int) -> None:
            if turns:
                started.append(turns)

        runtime.busy = BusyTurns(on_busy)
        host = ChannelHost(b.service, lambda: b.router.policy, **options)
        adapter = WebhookAdapter("127.0.0.1:0", hooks(b), ENV, **(adapter_options or {}))
        await b.nursery.start(adapter.serve, host)
        url = f"http://127.0.0.1:{adapter.port}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            yield Served(b, host, adapter, http, started)


async def test_a_signed_request_gets_the_owners_reply(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        response = await s.post("ops", {"sender": "bob", "text": "good morning"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["agent"] == "alpha"
        assert body["reply"] == "alpha (offline) heard: good morning"
        assert body["tool_calls"] == [] and "error" not in body
        assert s.turns_started == [1]


async def test_health_and_readiness(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        assert (await s.http.get("/healthz")).status_code == 200
        ready = await s.http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"ready": True, "channels": ["webhook.ops", "webhook.slow"]}
        assert s.adapter.keys == ("webhook.ops", "webhook.slow")


async def test_refused_requests_get_their_4xx_and_reach_no_agent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with served(tmp_path, configure=only_bob) as s:
        hello = msgspec.json.encode({"sender": "bob", "text": "hi"})

        async def raw(alias: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
            return await s.http.post(
                f"/v1/channels/{alias}/messages", content=body, headers=headers
            )

        cases: list[tuple[str, int, httpx.Response]] = [
            ("bad_signature", 401, await s.post("ops", hello, secret="wrong")),
            ("stale_timestamp", 401, await s.post("ops", hello, ts=int(time.time()) - 301)),
            ("stale_timestamp", 401, await raw("ops", hello, {"X-Zeroclaw-Signature": "x"})),
            ("too_large", 413, await s.post("ops", {"sender": "bob", "text": "x" * 5000})),
            ("bad_json", 400, await s.post("ops", b'{"sender": "bob", "text": ')),
            ("bad_json", 400, await s.post("ops", {"sender": "bob", "text": "a", "admin": 1})),
            ("bad_json", 400, await s.post("ops", {"text": "no sender"})),
            ("unknown_channel", 404, await s.post("nope", hello)),
            ("sender_not_accepted", 403, await s.post("ops", {"sender": "carol", "text": "a"})),
            ("sender_ignored", 403, await s.post("ops", {"sender": "mallory", "text": "a"})),
            (
                "agent_not_bound",
                404,
                await s.post("ops", {"sender": "bob", "text": "a", "agent": "beta"}),
            ),
            (
                "unknown_agent",
                404,
                await s.post("ops", {"sender": "bob", "text": "a", "agent": "zed"}),
            ),
        ]
        for code, status, response in cases:
            assert response.status_code == status, (code, response.text)
            assert response.json()["error"] == code, response.text
            assert set(response.json()) == {"error", "message"}
            assert SECRET not in response.text
        assert s.nothing_reached_an_agent()
        assert s.adapter.rejected["bad_signature"] == 1
    assert "refused" in caplog.text and SECRET not in caplog.text


async def test_a_replayed_request_is_refused(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        body = msgspec.json.encode({"sender": "bob", "text": "once"})
        headers = signed(body)
        first = await s.http.post("/v1/channels/ops/messages", content=body, headers=headers)
        again = await s.http.post("/v1/channels/ops/messages", content=body, headers=headers)
        assert first.status_code == 200
        assert again.status_code == 409 and again.json()["error"] == "replay"
        assert s.turns_started == [1]


async def test_over_the_rate_a_sender_gets_429_with_retry_after(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        codes = []
        for i in range(3):
            r = await s.post("slow", {"sender": "bob", "text": f"n{i}"}, secret=ENV["SLOW_KEY"])
            codes.append(r.status_code)
        assert codes == [200, 200, 429]
        assert r.json()["error"] == "rate_limited"
        assert 1 <= int(r.headers["Retry-After"]) <= 30
        other = await s.post("slow", {"sender": "carol", "text": "n"}, secret=ENV["SLOW_KEY"])
        assert other.status_code == 200  # the limit is per sender
        # The channels sharing the listener keep their own secrets.
        crossed = await s.post("slow", {"sender": "dave", "text": "n"})
        assert crossed.status_code == 401


async def test_200_concurrent_requests_from_20_senders_get_their_own_replies(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as s:
        replies: dict[tuple[str, int], httpx.Response] = {}

        async def one(sender: str, i: int) -> None:
            text = f"{sender} says {i}"
            replies[sender, i] = await s.post("ops", {"sender": sender, "text": text})

        async with trio.open_nursery() as nursery:
            for n in range(20):
                for i in range(10):
                    nursery.start_soon(one, f"sender{n}", i)
        assert len(replies) == 200
        for (sender, i), response in replies.items():
            assert response.status_code == 200, response.text
            assert response.json()["reply"] == f"alpha (offline) heard: {sender} says {i}"


async def test_an_approved_webhook_turn_runs_the_action(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        asked = await s.post("ops", {"sender": "bob", "text": "write note.txt: hi"})
        assert asked.status_code == 202, asked.text
        pending = asked.json()
        assert "note.txt" in pending["what"]
        status_url = pending["status_url"]
        assert status_url == f"/v1/channels/ops/turns/{pending['approval_id']}"
        # The turn waits for the approval meanwhile.
        waiting = await s.http.get(status_url, headers=signed(status_url.encode()))
        assert waiting.status_code == 202 and waiting.json()["status"] == "pending"
        assert waiting.json()["approvals"][0]["approval_id"] == pending["approval_id"]
        first_ts = int(time.time())
        answer = await s.approve("ops", pending["approval_id"], True, ts=first_ts)
        assert answer.status_code == 200, answer.text
        result = await s.result(status_url)
        assert result.status_code == 200, result.text
        calls = result.json()["tool_calls"]
        assert [(c["name"], c["ok"]) for c in calls] == [("file_write", True)], calls
        # Answered once: the id is gone. The second answer's stamp differs from the first's
        # (or it would be a replay, 409) whatever time the turn took: `now - 1` is not enough
        # when a busy machine spends a second between the two.
        again = await s.approve("ops", pending["approval_id"], True, ts=first_ts - 1)
        assert again.status_code == 404 and again.json()["error"] == "unknown_approval"


async def test_a_denied_webhook_turn_is_refused(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        asked = await s.post("ops", {"sender": "bob", "text": "write note.txt: hi"})
        assert asked.status_code == 202, asked.text
        pending = asked.json()
        assert (await s.approve("ops", pending["approval_id"], False)).status_code == 200
        result = await s.result(pending["status_url"])
        calls = result.json()["tool_calls"]
        assert [c["error_code"] for c in calls] == ["approval_denied"], calls


async def test_an_approval_not_given_in_time_is_a_denial(tmp_path: Path) -> None:
    async with served(tmp_path, approval_timeout=0.3) as s:
        asked = await s.post("ops", {"sender": "bob", "text": "write note.txt: hi"})
        assert asked.status_code == 202, asked.text
        pending = asked.json()
        result = await s.result(pending["status_url"])
        assert [c["error_code"] for c in result.json()["tool_calls"]] == ["approval_denied"]
        late = await s.approve("ops", pending["approval_id"], True, ts=int(time.time()) - 1)
        assert late.status_code == 404  # a late yes finds nothing to answer


async def test_beyond_the_pending_turns_an_approval_is_denied(tmp_path: Path) -> None:
    async with served(tmp_path, adapter_options={"max_pending": 0}) as s:
        response = await s.post("ops", {"sender": "bob", "text": "write note.txt: hi"})
        assert response.status_code == 200, response.text
        assert [c["error_code"] for c in response.json()["tool_calls"]] == ["approval_denied"]
        missing = "/v1/channels/ops/turns/nope"
        gone = await s.http.get(missing, headers=signed(missing.encode()))
        assert gone.status_code == 404 and gone.json()["error"] == "unknown_approval"


async def test_approval_endpoints_are_signed_and_per_channel(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        asked = await s.post("ops", {"sender": "bob", "text": "write note.txt: hi"})
        pending = asked.json()
        body = msgspec.json.encode({"approved": True})
        url = f"/v1/channels/ops/approvals/{pending['approval_id']}"
        forged = await s.http.post(url, content=body, headers=signed(body, "wrong"))
        assert forged.status_code == 401
        other = f"/v1/channels/slow/approvals/{pending['approval_id']}"
        crossed = await s.http.post(other, content=body, headers=signed(body, ENV["SLOW_KEY"]))
        assert crossed.status_code == 404
        unsigned = await s.http.get(pending["status_url"])
        assert unsigned.status_code == 401
        assert (await s.approve("ops", pending["approval_id"], False)).status_code == 200
        await s.result(pending["status_url"])


async def test_a_port_in_use_fails_to_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with bench(tmp_path, configure=with_webhooks) as b:
            host = ChannelHost(b.service, lambda: b.router.policy)
            adapter = WebhookAdapter(f"127.0.0.1:{port}", hooks(b), ENV)
            with pytest.raises(ChannelStartFailed, match="cannot bind"):
                await adapter.serve(host)


async def test_a_missing_secret_fails_to_start(tmp_path: Path) -> None:
    async with bench(tmp_path, configure=with_webhooks) as b:
        host = ChannelHost(b.service, lambda: b.router.policy)
        adapter = WebhookAdapter("127.0.0.1:0", hooks(b), {"HOOK_KEY": SECRET})
        with pytest.raises(ChannelStartFailed, match="SLOW_KEY"):
            await adapter.serve(host)


async def test_a_chunked_body_over_the_cap_is_refused_without_reading_on(tmp_path: Path) -> None:
    async with served(tmp_path) as s:
        body = msgspec.json.encode({"sender": "bob", "text": "x" * 5000})

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked encoding
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000]

        response = await s.http.post(
            "/v1/channels/ops/messages", content=chunks(), headers=signed(body)
        )
        assert response.status_code == 413 and response.json()["error"] == "too_large"
        assert s.nothing_reached_an_agent()


async def test_the_readme_recipe_signs_with_curl_and_openssl(tmp_path: Path) -> None:
    if shutil.which("curl") is None or shutil.which("openssl") is None:
        pytest.skip("curl and openssl are needed")
    script = (
        'body=\'{"sender": "bob", "text": "status?"}\'\n'
        "ts=$(date +%s)\n"
        'sig=$(printf \'%s.%s\' "$ts" "$body" | openssl dgst -sha256 -hmac '
        "\"$ZEROCLAW_HOOK_SECRET\" -hex | sed 's/^.* //')\n"
        "curl -sS $URL/v1/channels/ops/messages -H 'Content-Type: application/json' "
        '-H "X-Zeroclaw-Timestamp: $ts" -H "X-Zeroclaw-Signature: sha256=$sig" -d "$body"\n'
    )
    async with served(tmp_path) as s:
        env = {
            "PATH": os.environ["PATH"],
            "ZEROCLAW_HOOK_SECRET": SECRET,
            "URL": str(s.http.base_url).rstrip("/"),
        }
        done = await trio.run_process(["sh", "-c", script], env=env, capture_stdout=True)
    assert msgspec.json.decode(done.stdout)["reply"] == "alpha (offline) heard: status?"
