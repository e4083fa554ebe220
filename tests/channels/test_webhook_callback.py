"""The webhook's callback mode over real HTTP both ways on loopback: the adapter serves a
real ChannelHost on the turns bench (alpha, offline provider) and POSTs its replies to a
receiving server of the test's own (hypercorn, trio), which records each callback and
answers what the test scripts (500 first, then 200; or nothing at all when it is down)."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import hypercorn.config
import hypercorn.trio
import msgspec
import pytest
import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope

from tests.channels.test_webhook import ENV, SECRET, signed, with_webhooks
from tests.conftest import PATIENCE
from tests.conversations.helpers import bench
from zeroclaw.channels import ChannelHost, WebhookAdapter, sign
from zeroclaw.config import WebhookChannel

CALLBACK_PATH = "/zc/replies"


@dataclass
class Callback:
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        value = msgspec.json.decode(self.body)
        assert isinstance(value, dict)
        return value

    def verifies(self, secret: str) -> bool:
        stamp = self.headers["x-zeroclaw-timestamp"]
        return self.headers["x-zeroclaw-signature"] == sign(secret.encode(), stamp, self.body)


@dataclass
class Receiver:
    """Records every POST; answers the statuses in `script` in turn, then 200."""

    script: list[int] = field(default_factory=list)
    received: list[Callback] = field(default_factory=list)
    _send: trio.MemorySendChannel[Callback] | None = None
    _recv: trio.MemoryReceiveChannel[Callback] | None = None

    def __post_init__(self) -> None:
        self._send, self._recv = trio.open_memory_channel[Callback](100)

    async def next(self) -> Callback:
        assert self._recv is not None
        with trio.fail_after(PATIENCE):
            return await self._recv.receive()

    async def app(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message["body"])
            if not message.get("more_body", False):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        callback = Callback(headers, b"".join(chunks))
        assert scope["path"] == CALLBACK_PATH and scope["method"] == "POST"
        self.received.append(callback)
        status = self.script.pop(0) if self.script else 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        assert self._send is not None
        await self._send.send(callback)


async def serve_receiver(receiver: Receiver, nursery: trio.Nursery) -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port: int = sock.getsockname()[1]
    config = hypercorn.config.Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    config.errorlog = logging.getLogger("tests.receiver")
    await nursery.start(partial(hypercorn.trio.serve, receiver.app, config))
    return port


def a_closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens there now: connections are refused


async def settled(adapter: WebhookAdapter, outcome: str) -> None:
    """Until a callback has ended so (delivered, failed, dropped)."""
    with trio.fail_after(PATIENCE):
        while adapter.callbacks[outcome] == 0:
            await adapter.callback_settled.wait()


def with_callback_hook(doc: dict[str, Any]) -> None:
    with_webhooks(doc)
    # The config the router reads; the adapter gets its own entry with the real port.
    doc["channels"]["webhook"]["cb"] = {
        "listen": "127.0.0.1:8787",
        "secret_env": "HOOK_KEY",
        "callback_url": "http://127.0.0.1:9/zc/replies",
    }
    doc["agents"]["alpha"]["channels"].append("webhook.cb")
    doc["peer_groups"]["cbhooks"] = {
        "channel": "webhook.cb",
        "agents": ["alpha"],
        "external_peers": ["bob"],
        # These tests pin the sender's own approval path: granted explicitly (by
        # default no tool, and every approval goes to the operator, ADR 0042).
        "tools": ["file_write", "file_read", "memory_store", "memory_recall"],
        "approvals": "sender",
    }


@dataclass
class CallbackServed:
    adapter: WebhookAdapter
    host: ChannelHost
    http: httpx.AsyncClient

    async def post(self, value: Any) -> httpx.Response:
        body = msgspec.json.encode(value)
        return await self.http.post("/v1/channels/cb/messages", content=body, headers=signed(body))


@asynccontextmanager
async def served(
    tmp_path: Path, callback_port: int, attempts: int = 5, **adapter_options: Any
) -> AsyncIterator[CallbackServed]:
    async with bench(tmp_path, configure=with_callback_hook) as b:
        await b.agent(tmp_path)
        host = ChannelHost(b.service, lambda: b.router.policy)
        hook = WebhookChannel(
            listen="127.0.0.1:8787",  # the adapter binds the address it is given
            secret_env="HOOK_KEY",
            callback_url=f"http://127.0.0.1:{callback_port}{CALLBACK_PATH}",
            callback_max_attempts=attempts,
        )
        options = {"callback_backoff_secs": 0.01, **adapter_options}
        adapter = WebhookAdapter("127.0.0.1:0", {"webhook.cb": hook}, ENV, **options)
        await b.nursery.start(adapter.serve, host)
        url = f"http://127.0.0.1:{adapter.port}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            yield CallbackServed(adapter, host, http)


@asynccontextmanager
async def receiving(script: list[int] | None = None) -> AsyncIterator[tuple[Receiver, int]]:
    receiver = Receiver(list(script or []))
    async with trio.open_nursery() as nursery:
        port = await serve_receiver(receiver, nursery)
        yield receiver, port
        nursery.cancel_scope.cancel()


async def test_callback_mode_answers_202_and_posts_the_signed_reply(tmp_path: Path) -> None:
    async with receiving() as (receiver, port), served(tmp_path, port) as s:
        response = await s.post({"sender": "bob", "text": "good morning"})
        assert response.status_code == 202, response.text
        message_id = response.json()["message_id"]
        assert list(response.json()) == ["message_id"]
        callback = await receiver.next()
        assert callback.verifies(SECRET)
        assert not callback.verifies("wrong")
        assert callback.headers["content-type"] == "application/json"
        assert callback.json() == {
            "message_id": message_id,
            "status": 200,
            "agent": "alpha",
            "reply": "alpha (offline) heard: good morning",
            "tool_calls": [],
        }
        await settled(s.adapter, "delivered")
        assert s.adapter.callbacks == {"delivered": 1}


async def test_a_routing_refusal_is_still_answered_in_the_response(tmp_path: Path) -> None:
    async with receiving() as (receiver, port), served(tmp_path, port) as s:
        response = await s.post({"sender": "carol", "text": "hi"})
        assert response.status_code == 403, response.text
        assert response.json()["error"] == "sender_not_accepted"
        assert s.host.delivered["webhook.cb"] == 0
        assert s.adapter.stats()["callbacks_in_flight"] == 0
    assert receiver.received == []


async def test_a_receiver_failing_twice_gets_the_third_attempt(tmp_path: Path) -> None:
    async with receiving([500, 503]) as (receiver, port), served(tmp_path, port) as s:
        response = await s.post({"sender": "bob", "text": "again"})
        assert response.status_code == 202
        attempts = [await receiver.next() for _ in range(3)]
        assert [a.json()["reply"] for a in attempts] == ["alpha (offline) heard: again"] * 3
        assert all(a.verifies(SECRET) for a in attempts)
        await settled(s.adapter, "delivered")
        assert len(receiver.received) == 3  # delivered: the attempts end there
        assert s.adapter.callbacks == {"delivered": 1}


async def test_a_4xx_from_the_receiver_ends_the_delivery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with receiving([404]) as (receiver, port), served(tmp_path, port) as s:
        assert (await s.post({"sender": "bob", "text": "x"})).status_code == 202
        await receiver.next()
        await settled(s.adapter, "failed")
        assert len(receiver.received) == 1
    assert "not delivered after 1 attempt(s) (last: HTTP 404)" in caplog.text


async def test_a_receiver_that_is_down_gets_every_attempt_then_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with served(tmp_path, a_closed_port(), attempts=3) as s:
        response = await s.post({"sender": "bob", "text": "anyone?"})
        assert response.status_code == 202
        message_id = response.json()["message_id"]
        await settled(s.adapter, "failed")
        assert s.adapter.stats()["callbacks_in_flight"] == 0
    line = f"webhook.cb: callback for message {message_id} not delivered after 3 attempt(s)"
    assert line in caplog.text
    assert "ConnectError" in caplog.text and SECRET not in caplog.text


async def test_beyond_the_callbacks_in_flight_one_is_dropped_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # A receiver that is down and a long backoff keep the first callback in flight.
    async with served(tmp_path, a_closed_port(), max_callbacks=1, callback_backoff_secs=30.0) as s:
        assert (await s.post({"sender": "bob", "text": "one"})).status_code == 202
        assert (await s.post({"sender": "bob", "text": "two"})).status_code == 202
        await settled(s.adapter, "dropped")
    assert "1 callbacks in flight, dropped the one for message" in caplog.text


async def test_an_approval_in_callback_mode_is_a_callback_then_the_reply(tmp_path: Path) -> None:
    async with receiving() as (receiver, port), served(tmp_path, port) as s:
        response = await s.post({"sender": "bob", "text": "write note.txt: hi"})
        assert response.status_code == 202, response.text
        message_id = response.json()["message_id"]
        asked = await receiver.next()
        assert asked.verifies(SECRET)
        ask = asked.json()
        assert ask["message_id"] == message_id and ask["status"] == 202
        assert "note.txt" in ask["what"]
        assert ask["status_url"].startswith("/v1/channels/cb/turns/")
        body = msgspec.json.encode({"approved": True})
        approved = await s.http.post(
            f"/v1/channels/cb/approvals/{ask['approval_id']}", content=body, headers=signed(body)
        )
        assert approved.status_code == 200, approved.text
        final = (await receiver.next()).json()
        assert final["message_id"] == message_id and final["status"] == 200
        assert [(c["name"], c["ok"]) for c in final["tool_calls"]] == [("file_write", True)]
        # The turn's URL gives the same result.
        url = ask["status_url"]
        result = await s.http.get(url, headers=signed(url.encode()))
        assert result.status_code == 200 and result.json()["tool_calls"] == final["tool_calls"]
