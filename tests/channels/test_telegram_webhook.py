"""Telegram's webhook mode (ADR 0065): the bot's updates POSTed to the gateway's
`/telegram/<alias>` with the secret token the channel gave setWebhook, on a real gateway
and a real ChannelHost, against the loopback Bot API (tests/channels/fake_bot_api.py).
The tests POST each update as Telegram would, with httpx."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.channels.test_telegram import (
    ALICE,
    Bench,
    bot_doc,
    final_text,
    issues_of,
    telegram_bench,
)
from zeroclaw.channels import ChannelStartFailed, TelegramAdapter
from zeroclaw.config import GatewayConfig
from zeroclaw.control import Reply, Request
from zeroclaw.events import EventSink
from zeroclaw.gateway import Gateway

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


async def _no_operator(request: Request[Any], /) -> Reply[Any]:
    raise AssertionError("the dashboard is not used here")


class Hooked:
    """A bench with the gateway serving on loopback and a webhook-mode adapter factory."""

    def __init__(self, bench: Bench, gateway: Gateway, http: httpx.AsyncClient) -> None:
        self.t = bench
        self.gateway = gateway
        self.http = http

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gateway.port}/telegram/chat"

    def adapter(self, tmp_path: Path) -> TelegramAdapter:
        return self.t.adapter(tmp_path, mode="webhook", webhook_url=self.url)

    def secret(self) -> str:
        assert self.t.api.webhook is not None, "no webhook set"
        secret: str = self.t.api.webhook["secret_token"]
        return secret

    def update(self, user: dict[str, Any], text: str) -> dict[str, Any]:
        """A message as Telegram would POST it (the fake keeps it from any getUpdates)."""
        self.t.api.message(user, text)
        return self.t.api.updates.pop()

    async def post(
        self, update: dict[str, Any], secret: str | None, *, path: str | None = None
    ) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if secret is not None:
            headers[SECRET_HEADER] = secret
        return await self.http.post(
            path or self.url, content=json.dumps(update).encode(), headers=headers
        )


@asynccontextmanager
async def hooked_bench(tmp_path: Path) -> AsyncIterator[Hooked]:
    async with telegram_bench(tmp_path) as t:
        # port 0 (the config asks for a real one): the test reads the port bound
        settings = GatewayConfig().model_copy(update={"listen": "127.0.0.1:0"})
        gateway = Gateway(lambda: settings, {}, _no_operator, EventSink())
        await t.nursery.start(gateway.serve, t.host)
        async with httpx.AsyncClient() as http:
            yield Hooked(t, gateway, http)


async def test_an_update_posted_with_the_secret_runs_a_turn_and_the_reply_is_sent(
    tmp_path: Path,
) -> None:
    async with hooked_bench(tmp_path) as h:
        adapter = h.adapter(tmp_path)
        await h.t.start(adapter)
        webhook = h.t.api.of("setWebhook")[-1]
        assert webhook["url"] == h.url
        assert webhook["max_connections"] == 1
        assert len(webhook["secret_token"]) >= 32
        answer = await h.post(h.update(ALICE, "hello by webhook"), h.secret())
        assert answer.status_code == 200
        await h.t.reply_to(ALICE["id"])
        await adapter.wait_turns(1)
        assert "alpha" in final_text(h.t.api, ALICE["id"])
        assert not h.t.api.of("getUpdates")  # nothing polled in webhook mode


async def test_a_forged_update_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    async with hooked_bench(tmp_path) as h:
        adapter = h.adapter(tmp_path)
        await h.t.start(adapter)
        update = h.update(ALICE, "write a file for me")
        secret = h.secret()
        base = f"http://127.0.0.1:{h.gateway.port}/telegram/"
        assert (await h.post(update, None)).status_code == 401
        # (a first character that differs: "x" + secret[1:] was the secret itself whenever
        # the random secret began with "x", one run in 64)
        forged = ("y" if secret[0] == "x" else "x") + secret[1:]
        assert (await h.post(update, forged)).status_code == 401
        assert (await h.post(update, secret[:-1])).status_code == 401
        assert (await h.post(update, "")).status_code == 401
        # another bot's path (none is bound), or a path under this one's: no such endpoint
        assert (await h.post(update, secret, path=base + "other")).status_code == 404
        assert (await h.post(update, secret, path=base + "chat/x")).status_code == 404
        assert (await h.http.get(h.url, headers={SECRET_HEADER: secret})).status_code == 405
        assert adapter.pushes == 0
        assert h.gateway.rejected["telegram_secret_mismatch"] == 4
        assert not h.t.api.sent()
        # the same update with the secret is then taken: nothing above marked it seen
        assert (await h.post(update, secret)).status_code == 200
        await adapter.wait_turns(1)
        assert adapter.pushes == 1


async def test_a_body_over_the_cap_is_refused_before_the_channel(tmp_path: Path) -> None:
    async with hooked_bench(tmp_path) as h:
        adapter = h.adapter(tmp_path)
        await h.t.start(adapter)
        big = h.update(ALICE, "x" * (2 << 20))
        assert (await h.post(big, h.secret())).status_code == 413
        assert (await h.post({"not": "an update"}, h.secret())).status_code == 400
        assert adapter.pushes == 0


async def test_a_replayed_update_runs_once(tmp_path: Path) -> None:
    async with hooked_bench(tmp_path) as h:
        adapter = h.adapter(tmp_path)
        await h.t.start(adapter)
        update = h.update(ALICE, "once only")
        secret = h.secret()
        async with trio.open_nursery() as nursery:  # Telegram retrying while it runs
            for _ in range(3):
                nursery.start_soon(h.post, update, secret)
        await adapter.wait_turns(1)
        assert (await h.post(update, secret)).status_code == 200  # after it ran, too
        assert adapter.pushes == 1
        assert adapter.skipped["repeated"] == 3
        assert adapter.turns_done == 1


async def test_a_restart_keeps_the_updates_seen_and_makes_a_new_secret(tmp_path: Path) -> None:
    async with hooked_bench(tmp_path) as h:
        first = h.adapter(tmp_path)
        scope = await h.t.start(first)
        update = h.update(ALICE, "before the restart")
        old = h.secret()
        assert (await h.post(update, old)).status_code == 200
        await first.wait_turns(1)
        scope.cancel()
        await h.t.api.until(lambda: h.t.api.webhook is None)  # deleteWebhook at the stop
        # stopped: the path is gone with the channel
        assert (await h.post(update, old)).status_code == 404

        second = h.adapter(tmp_path)
        await h.t.start(second)
        new = h.secret()
        assert new != old
        assert (await h.post(update, old)).status_code == 401
        assert (await h.post(update, new)).status_code == 200
        assert second.pushes == 0
        assert second.skipped["repeated"] == 1
        later = h.update(ALICE, "after the restart")
        assert (await h.post(later, new)).status_code == 200
        await second.wait_turns(1)
        assert second.pushes == 1


async def test_back_to_polling_removes_the_webhook_and_goes_on_from_its_updates(
    tmp_path: Path,
) -> None:
    async with hooked_bench(tmp_path) as h:
        hooked = h.adapter(tmp_path)
        scope = await h.t.start(hooked)
        update = h.update(ALICE, "by webhook")
        assert (await h.post(update, h.secret())).status_code == 200
        await hooked.wait_turns(1)
        scope.cancel()
        await h.t.api.until(lambda: h.t.api.webhook is None)
        # Telegram would still hold the update had the answer been lost: the poll skips it
        h.t.api.updates.append(update)
        polled = h.t.adapter(tmp_path)
        await h.t.start(polled)
        h.t.api.message(ALICE, "by polling")
        await polled.wait_turns(1)
        assert polled.turns_done == 1
        assert h.t.api.of("deleteWebhook")


async def test_a_refused_set_webhook_fails_the_channel_and_nothing_is_served(
    tmp_path: Path,
) -> None:
    async with hooked_bench(tmp_path) as h:
        h.t.api.failing["setWebhook"] = 502
        adapter = h.adapter(tmp_path)
        with pytest.raises(ChannelStartFailed) as failed:
            await adapter.serve(h.t.host)
        assert "setWebhook failed" in str(failed.value)
        assert "telegram.chat" not in h.t.host.hooks
        update = h.update(ALICE, "anyone there?")
        assert (await h.post(update, "")).status_code == 404


# ------------------------------------------------------------------ the config's rules


def test_webhook_mode_needs_the_gateway_and_a_url_to_it(tmp_path: Path) -> None:
    doc = bot_doc(tmp_path, mode="webhook")
    issues = issues_of(doc)
    assert any("channels.telegram.chat.mode" in i and "[gateway]" in i for i in issues)
    assert any("channels.telegram.chat.webhook_url" in i and "public URL" in i for i in issues)
    doc["gateway"] = {}
    doc["channels"]["telegram"]["chat"]["webhook_url"] = "https://bot.example.org/telegram/chat"
    assert issues_of(doc) == []


def test_a_webhook_url_is_https_unless_loopback_and_ends_at_the_bots_path(
    tmp_path: Path,
) -> None:
    def issues(url: str, **bot: Any) -> list[str]:
        doc = bot_doc(tmp_path, mode="webhook", webhook_url=url, **bot)
        doc["gateway"] = {}
        return issues_of(doc)

    [clear] = issues("http://bot.example.org/telegram/chat")
    assert "channels.telegram.chat.webhook_url" in clear and "https://" in clear
    assert issues("http://127.0.0.1:8788/telegram/chat") == []
    assert issues("https://example.org/zc/telegram/chat") == []  # behind a proxy's prefix
    assert "must end with /telegram/chat" in issues("https://example.org/telegram/chat/")[0]
    [elsewhere] = issues("https://bot.example.org/telegram/other")
    assert "must end with /telegram/chat" in elsewhere
    # URL tricks: read as loopback here, as plain http to another host by a WHATWG parser
    # (a backslash ends the host there), or with a user part: refused, never "loopback"
    for tricky in (
        "http://evil.example\\@127.0.0.1/telegram/chat",
        "http://evil.example\\@127.0.0.1:8788/telegram/chat",
        "https://127.0.0.1@bot.example.org/telegram/chat",
        "http://user:pw@127.0.0.1/telegram/chat",
    ):
        [refused] = issues(tricky)
        assert "backslash or a user@ part" in refused, tricky
    doc = bot_doc(tmp_path, webhook_url="https://bot.example.org/telegram/chat")
    [unused] = issues_of(doc)  # poll mode: a URL it would never use is a mistake
    assert 'set mode = "webhook"' in unused


# ------------------------------------------------------------------ the attack pass


async def test_a_reload_that_restarts_the_bot_leaves_the_new_webhook_set(tmp_path: Path) -> None:
    """A reload that changes any channel cancels the old adapter and starts the new one at
    once (ChannelSupervisor.replace). The old one's deleteWebhook at its stop (slowed here
    by flood control) must not land after the new one's setWebhook: the bot would then be
    deaf (Telegram keeps the updates; nothing is POSTed) while `status` says serving."""
    async with hooked_bench(tmp_path) as h:
        old = h.adapter(tmp_path)
        old_scope = trio.CancelScope()
        old_done = trio.Event()

        async def run_old(task_status: trio.TaskStatus[None]) -> None:
            with old_scope:
                await old.serve(h.t.host, task_status=task_status)
            old_done.set()

        await h.t.nursery.start(run_old)
        h.t.api.flood("deleteWebhook", 1)
        new = h.adapter(tmp_path)
        old_scope.cancel()  # as replace() does: the old cancelled, the new started at once
        await h.t.start(new)
        await old_done.wait()
        assert h.t.api.webhook is not None, "the old adapter's stop removed the new webhook"
        answer = await h.post(h.update(ALICE, "after the reload"), h.secret())
        assert answer.status_code == 200
        await new.wait_turns(1)
        assert "alpha" in final_text(h.t.api, ALICE["id"])


async def test_a_refusal_closes_its_connection_so_the_next_update_is_not_lost_on_it(
    tmp_path: Path,
) -> None:
    """A refusal is answered with the body unread (the secret is checked first): the body
    stays on the connection, so the gateway closes it, and must say so. Else the client
    (Telegram, between a restart and its setWebhook, POSTing with the old secret) sends
    its next update on a connection closed under it: 'Server disconnected'."""
    async with hooked_bench(tmp_path) as h:
        adapter = h.adapter(tmp_path)
        await h.t.start(adapter)
        secret = h.secret()
        big = h.update(ALICE, "x" * 200_000)  # more than one read of the server's
        base = f"http://127.0.0.1:{h.gateway.port}/telegram/"
        for round in range(10):
            for refused in (
                await h.post(big, "wrong"),
                await h.post(big, secret, path=base + "other"),
                await h.post(h.update(ALICE, "y" * (2 << 20)), secret),  # 413
            ):
                assert refused.status_code in (401, 404, 413)
                assert refused.headers["connection"] == "close"
            answer = await h.post(h.update(ALICE, f"taken {round}"), secret)
            assert answer.status_code == 200
            assert "connection" not in answer.headers  # a body read: kept alive
        assert adapter.pushes == 10


async def test_the_secret_is_in_no_log_line_state_file_repr_or_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only Telegram and the daemon's memory hold the secret: not the debug log (httpx's
    and the gateway's included), the state file, the hook's repr or the gateway's stats,
    whatever is refused, taken or fails on the way."""
    caplog.set_level(logging.DEBUG)
    async with hooked_bench(tmp_path) as h:
        adapter = h.adapter(tmp_path)
        scope = await h.t.start(adapter)
        secret = h.secret()
        assert (await h.post(h.update(ALICE, "hi"), secret[:-1])).status_code == 401
        assert (await h.post({"update_id": "x"}, secret)).status_code == 400
        assert (await h.post(h.update(ALICE, "hello"), secret)).status_code == 200
        await adapter.wait_turns(1)
        hook = h.t.host.hooks["telegram.chat"]
        shown = [repr(hook), str(h.gateway.stats()), adapter.state_path.read_text()]
        scope.cancel()
        await h.t.api.until(lambda: h.t.api.webhook is None)
    for text in (*shown, caplog.text):
        assert secret not in text
        assert secret[:16] not in text


async def test_a_reload_whose_set_webhook_is_refused_still_removes_the_old_webhook(
    tmp_path: Path,
) -> None:
    """The new adapter's setWebhook refused during a reload: the old adapter's webhook (its
    secret gone with it, so every POST is now refused) is still removed at its stop, and
    Telegram keeps the updates for the next start rather than retrying them into refusals
    until it drops them."""
    async with hooked_bench(tmp_path) as h:
        old = h.adapter(tmp_path)
        old_scope = trio.CancelScope()
        old_done = trio.Event()

        async def run_old(task_status: trio.TaskStatus[None]) -> None:
            with old_scope:
                await old.serve(h.t.host, task_status=task_status)
            old_done.set()

        await h.t.nursery.start(run_old)
        h.t.api.failing["setWebhook"] = 502
        new = h.adapter(tmp_path)
        with pytest.raises(ChannelStartFailed):  # the new one's start came first
            await new.serve(h.t.host)
        old_scope.cancel()
        await old_done.wait()
        assert h.t.api.webhook is None
