"""The Telegram channel against a loopback server that speaks the Bot API methods it uses
(tests/channels/fake_bot_api.py): a real ChannelHost on the turns bench, alpha (supervised)
owning telegram.chat, a peer group admitting the user id of ALICE (and BOB by @username
where a test says so), approvals by the sender's channel with CAROL as the one approver."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.channels.fake_bot_api import BOT, FakeBotApi
from tests.conftest import PATIENCE
from tests.conversations.helpers import bench
from tests.tmpfs import tiny_tmpfs
from zeroclaw.channels import ChannelHost, ChannelStartFailed, ChannelSupervisor, TelegramAdapter
from zeroclaw.channels._telegram import MAX_TURNS_PER_SENDER
from zeroclaw.channels._telegram_core import UNSUPPORTED, TelegramState
from zeroclaw.channels._types import RESTARTED
from zeroclaw.config import TelegramChannel

TOKEN = "123456:zc-test-telegram-bot-token-4d9b"
ALICE = {"id": 5550001, "is_bot": False, "first_name": "Alice", "username": "alice_zc"}
BOB = {"id": 5550002, "is_bot": False, "first_name": "Bob", "username": "bob_zc"}
CAROL = {"id": 5550003, "is_bot": False, "first_name": "Carol", "username": "carol_zc"}
MALLORY = {"id": 5550666, "is_bot": False, "first_name": "Mallory", "username": "mallory_zc"}
GROUP = {"id": -1001234, "type": "supergroup", "title": "ops"}


def with_telegram(peers: list[str], *, approvals: str = "sender") -> Any:
    def configure(doc: dict[str, Any]) -> None:
        doc["channels"]["telegram"] = {"chat": {"token_env": "ZC_TEST_TG_TOKEN"}}
        doc["agents"]["alpha"]["channels"] = ["cli.local", "telegram.chat"]
        doc["peer_groups"]["phones"] = {
            "channel": "telegram.chat",
            "agents": ["alpha"],
            "external_peers": peers,
            "tools": ["file_write", "file_read"],
            "approvals": approvals,
        }

    return configure


class Bench:
    def __init__(self, api: FakeBotApi, host: ChannelHost, nursery: trio.Nursery) -> None:
        self.api = api
        self.host = host
        self.nursery = nursery

    def adapter(self, tmp_path: Path, **settings: Any) -> TelegramAdapter:
        config = TelegramChannel(
            token_env="ZC_TEST_TG_TOKEN",
            api_url=self.api.url,
            poll_timeout_secs=settings.pop("poll_timeout_secs", 1),
            edit_interval_secs=settings.pop("edit_interval_secs", 0.05),
            approvers=settings.pop("approvers", (CAROL["id"],)),
            **settings,
        )
        return TelegramAdapter("chat", config, TOKEN, tmp_path / "state")

    async def start(self, adapter: TelegramAdapter) -> trio.CancelScope:
        """Serve `adapter` until the returned scope is cancelled (a daemon stopping)."""
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[None]) -> None:
            with scope:
                await adapter.serve(self.host, task_status=task_status)

        await self.nursery.start(run)
        return scope

    async def reply_to(self, chat_id: int, after: int = 0) -> dict[str, Any]:
        """The first message the bot sent to `chat_id` after `after` of them."""
        await self.api.until(lambda: len(self.api.sent(chat_id)) > after)
        return self.api.sent(chat_id)[after]


@asynccontextmanager
async def telegram_bench(
    tmp_path: Path, peers: list[str] | None = None, **options: Any
) -> AsyncIterator[Bench]:
    api = FakeBotApi(TOKEN)
    configure = with_telegram(peers if peers is not None else [str(ALICE["id"])], **options)
    async with bench(tmp_path, configure=configure) as b:
        await b.agent(tmp_path)
        host = ChannelHost(b.service, lambda: b.router.policy, approval_timeout=30)
        await b.nursery.start(api.serve)
        with trio.fail_after(PATIENCE):
            yield Bench(api, host, b.nursery)


def final_text(api: FakeBotApi, chat_id: int) -> str:
    """What the chat shows of the bot's replies (streamed messages as last edited)."""
    return "".join(
        api.text_of(m["chat"]["id"], m["message_id"])
        for m in api.messages.values()
        if m["from"] == BOT and m["chat"]["id"] == chat_id and "reply_markup" not in m
    )


async def test_a_private_message_gets_the_owners_reply_in_the_same_chat(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        await t.start(t.adapter(tmp_path))
        t.api.message(ALICE, "hello there")
        first = await t.reply_to(ALICE["id"])
        assert first["reply_parameters"]["message_id"] >= 1000  # threads under her message
        await t.api.until(lambda: "alpha" in final_text(t.api, ALICE["id"]))
        actions = t.api.of("sendChatAction")
        assert actions and actions[0] == {"chat_id": ALICE["id"], "action": "typing"}
        assert t.host.delivered["telegram.chat"] == 1


async def test_a_sender_no_group_admits_is_refused_in_one_line(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        await t.start(t.adapter(tmp_path))
        t.api.message(MALLORY, "hello")
        refused = await t.reply_to(MALLORY["id"])
        assert str(MALLORY["id"]) in refused["text"] and "does not take" in refused["text"]
        assert t.host.refused[("telegram.chat", "sender_not_accepted")] == 1
        assert not t.host.delivered["telegram.chat"]


async def test_a_username_in_external_peers_is_pinned_to_the_first_id_seen(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    impostor = {**MALLORY, "username": BOB["username"]}  # the name, later, on another account
    caplog.set_level(logging.INFO, "zeroclaw.channels.telegram")
    async with telegram_bench(tmp_path, peers=["@Bob_ZC"]) as t:
        adapter = t.adapter(tmp_path)
        await t.start(adapter)
        t.api.message(BOB, "hello")
        await t.api.until(lambda: "alpha" in final_text(t.api, BOB["id"]))
        assert adapter.state.pins == {"bob_zc": BOB["id"]}
        assert f"@bob_zc resolved to user id {BOB['id']}" in caplog.text
        t.api.message(impostor, "hello")
        refused = await t.reply_to(MALLORY["id"])
        assert "does not take" in refused["text"]
        assert "pinned to user id" in caplog.text


async def test_in_a_group_only_a_mention_or_a_reply_to_the_bot_is_answered(
    tmp_path: Path,
) -> None:
    async with telegram_bench(tmp_path) as t:
        adapter = t.adapter(tmp_path)
        await t.start(adapter)
        chat = GROUP["id"]
        t.api.message(ALICE, "chatting among ourselves", chat=GROUP)
        mention = "@zc_test_bot hello"
        t.api.message(
            ALICE, mention, chat=GROUP, entities=[{"type": "mention", "offset": 0, "length": 12}]
        )
        await t.api.until(
            lambda: "heard: hello" in final_text(t.api, chat) or "alpha" in final_text(t.api, chat)
        )
        replies = len(t.api.sent(chat))
        bots = [m for m in t.api.messages.values() if m["from"] == BOT]
        t.api.message(ALICE, "and again", chat=GROUP, reply_to=bots[-1]["message_id"])
        await t.api.until(lambda: "heard: and again" in final_text(t.api, chat))
        t.api.message(ALICE, "a photo", chat=GROUP, photo=[{"file_id": "x"}])  # not addressed
        await adapter.wait_polls(adapter.polls + 2)
        assert adapter.skipped["a group message that neither mentions nor replies to the bot"] == 2
        assert t.host.delivered["telegram.chat"] == 2
        assert len(t.api.sent(chat)) >= replies + 1


async def test_media_gets_a_one_line_answer_and_no_turn(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        await t.start(t.adapter(tmp_path))
        t.api.message(ALICE, None, photo=[{"file_id": "AgAD", "width": 90, "height": 90}])
        answer = await t.reply_to(ALICE["id"])
        assert answer["text"] == UNSUPPORTED
        assert not t.host.delivered["telegram.chat"]


async def test_a_ten_thousand_character_reply_arrives_whole_in_pieces_under_the_limit(
    tmp_path: Path,
) -> None:
    long = "word " * 2000  # 10,000 characters; the reply repeats it after "heard: "
    async with telegram_bench(tmp_path) as t:
        await t.start(t.adapter(tmp_path))
        t.api.message(ALICE, long)
        expected = f"alpha (offline) heard: {long.strip()}"
        await t.api.until(lambda: final_text(t.api, ALICE["id"]) == expected)
        pieces = [
            m["text"]
            for m in t.api.messages.values()
            if m["from"] == BOT and m["chat"]["id"] == ALICE["id"]
        ]
        assert len(pieces) == 3 and all(len(p) <= 4096 for p in pieces)


async def test_flood_control_is_waited_out_and_the_reply_still_arrives(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        adapter = t.adapter(tmp_path, stream=False)
        await t.start(adapter)
        t.api.flood("sendMessage", 1, 1)
        start = trio.current_time()
        t.api.message(ALICE, "hello there")
        reply = await t.reply_to(ALICE["id"], after=2)  # the two refused calls are logged too
        assert "alpha" in reply["text"]
        assert adapter.api is not None and adapter.api.flood_waits == 2
        assert trio.current_time() - start >= 2.0  # each retry_after was honoured


async def test_a_flood_wait_on_one_answer_stalls_no_one_else(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        t.api.message(MALLORY, "/start")  # its answer is the first sendMessage: 429, 60 s
        t.api.message(ALICE, "ping")
        t.api.flood("sendMessage", 60)
        adapter = t.adapter(tmp_path, stream=False)
        await t.start(adapter)
        await adapter.wait_turns(1)
        assert "heard: ping" in final_text(t.api, ALICE["id"])
        assert not final_text(t.api, MALLORY["id"])  # still waiting out its 60 s
        assert adapter.api is not None and adapter.api.flood_waits == 1


async def test_an_update_is_neither_repeated_nor_lost_across_a_restart(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        first = t.adapter(tmp_path)
        scope = await t.start(first)
        t.api.message(ALICE, "ping once")
        await t.api.until(lambda: "heard: ping once" in final_text(t.api, ALICE["id"]))
        await first.wait_polls(first.polls + 1)
        scope.cancel()  # stopped before its next getUpdates could confirm the update
        saved = TelegramState()
        saved.offset = first.state.offset
        assert (tmp_path / "state" / "channels" / "telegram.chat.json").exists()
        t.api.replay_confirmed = True  # a server that sends every update again
        t.api.message(ALICE, "ping twice")  # and one sent while the daemon was down
        second = t.adapter(tmp_path)
        await t.start(second)
        await t.api.until(lambda: "heard: ping twice" in final_text(t.api, ALICE["id"]))
        await second.wait_polls(second.polls + 1)
        assert t.host.delivered["telegram.chat"] == 2
        assert second.state.offset == saved.offset + 1


async def test_a_message_whose_save_failed_at_each_start_is_answered_once_the_disk_has_room(
    tmp_path: Path,
) -> None:
    """The disk is full: each start takes the message, cannot save, and fails. Each counted
    it as one more of its sender's turns (never started), so after eight the sender was
    answered `Busy` for good; each start now counts afresh."""
    with tiny_tmpfs(tmp_path / "disk") as disk:
        async with telegram_bench(tmp_path) as t:
            adapter = t.adapter(disk)
            scope = await t.start(adapter)
            t.api.message(ALICE, "before")
            await adapter.wait_turns(1)  # its end saved: nothing left to tell at a start
            scope.cancel()
            await fill(disk / "filler")
            t.api.message(ALICE, "after the disk filled")
            full = pytest.RaisesExc(ChannelStartFailed, match="disk is full")
            for _ in range(MAX_TURNS_PER_SENDER + 1):  # the supervisor starting it again
                with pytest.RaisesGroup(full, flatten_subgroups=True, allow_unwrapped=True):
                    await adapter.serve(t.host)
            await trio.Path(disk / "filler").unlink()
            await t.start(adapter)
            shown = "heard: after the disk filled"
            await t.api.until(lambda: shown in final_text(t.api, ALICE["id"]))
            assert "Busy" not in final_text(t.api, ALICE["id"])


async def fill(path: Path) -> None:
    """Write to `path` until the filesystem has no room left."""

    def write() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"x" * 1024):
                pass
        except OSError:  # ENOSPC: full
            pass
        finally:
            os.close(fd)

    await trio.to_thread.run_sync(write)


async def test_messages_taken_together_are_answered_in_the_order_they_were_sent(
    tmp_path: Path,
) -> None:
    """Six messages in one getUpdates: their turns were spawned together and trio runs such
    a batch reversed half the time, so a lock alone answered the last one first."""
    async with telegram_bench(tmp_path) as t:
        for n in range(6):
            t.api.message(ALICE, f"in order {n}")
        await t.start(t.adapter(tmp_path))
        await t.api.until(lambda: "heard: in order 5" in final_text(t.api, ALICE["id"]))
        await t.api.until(lambda: final_text(t.api, ALICE["id"]).count("heard: in order") == 6)
        shown = final_text(t.api, ALICE["id"])
        places = [shown.index(f"heard: in order {n}") for n in range(6)]
        assert places == sorted(places), shown


async def test_a_message_cut_short_by_a_restart_is_answered_send_it_again(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        first = t.adapter(tmp_path, approvers=(CAROL["id"],))
        scope = await t.start(first)
        t.api.message(ALICE, "write cut.txt: x")  # waits for an approval nobody gives
        await t.api.until(lambda: any("reply_markup" in m for m in t.api.sent(ALICE["id"])))
        scope.cancel()  # the daemon stops while the turn waits
        second = t.adapter(tmp_path)
        await t.start(second)
        await t.api.until(lambda: any(m["text"] == RESTARTED for m in t.api.sent(ALICE["id"])))
        assert second.state.inflight == []


async def test_only_a_configured_approver_can_press_approve(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        adapter = t.adapter(tmp_path)
        await t.start(adapter)
        t.api.message(ALICE, "write pressed.txt: yes")
        await t.api.until(lambda: any("reply_markup" in m for m in t.api.sent(ALICE["id"])))
        asked = next(m for m in t.api.messages.values() if m["from"] == BOT and "reply_markup" in m)
        approve = asked["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        t.api.press(ALICE, approve, ALICE["id"], asked["message_id"])  # the sender: not one
        t.api.press(MALLORY, approve, ALICE["id"], asked["message_id"])
        await t.api.until(lambda: len(t.api.of("answerCallbackQuery")) == 2)
        refusals = t.api.of("answerCallbackQuery")
        assert all(r["show_alert"] and "approvers" in r["text"] for r in refusals)
        assert adapter.answered_presses["not_an_approver"] == 2
        await t.api.until(lambda: len(t.api.sent(CAROL["id"])) == 1)  # her own copy
        [copy] = [m for m in t.api.messages.values() if m["chat"]["id"] == CAROL["id"]]
        t.api.press(CAROL, approve, CAROL["id"], copy["message_id"])  # pressed in her chat
        await adapter.wait_turns(1)
        assert "refused" not in final_text(t.api, ALICE["id"])
        for chat, held in ((ALICE["id"], asked), (CAROL["id"], copy)):
            assert t.api.text_of(chat, held["message_id"]).startswith("*Approved* by @carol")
        written = await trio.to_thread.run_sync(lambda: list(tmp_path.rglob("pressed.txt")))
        assert [p.read_text() for p in written] == ["yes"]
        t.api.press(CAROL, approve, ALICE["id"], asked["message_id"])  # pressed again
        await t.api.until(lambda: len(t.api.of("answerCallbackQuery")) == 4)
        assert "no longer pending" in t.api.of("answerCallbackQuery")[-1]["text"]


async def test_a_sender_over_its_rate_is_told_once_and_gets_no_turn(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        for n in ("one", "two", "three"):  # one batch, read at the first poll
            t.api.message(ALICE, f"ping {n}")
        adapter = t.adapter(tmp_path, rate_limit_per_minute=1, stream=False)
        await t.start(adapter)
        await adapter.wait_turns(1)
        texts = [m["text"] for m in t.api.sent(ALICE["id"])]
        assert sum(text.startswith("Slow down") for text in texts) == 1  # not once a message
        assert "heard: ping one" in final_text(t.api, ALICE["id"])
        assert t.host.delivered["telegram.chat"] == 1


async def test_a_wrong_token_fails_the_start_and_never_shows_the_token(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        adapter = t.adapter(tmp_path)
        adapter._token = "999999:zc-test-wrong-telegram-token-77"
        with pytest.raises(ChannelStartFailed) as failed:
            await adapter.serve(t.host)
        assert "getMe" in str(failed.value) and "401" in str(failed.value)
        assert "zc-test-wrong" not in str(failed.value)


async def test_an_api_that_goes_down_shows_failed_and_the_channel_comes_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with telegram_bench(tmp_path) as t:
        supervisor = ChannelSupervisor(t.host, backoff_initial=0.05, backoff_max=0.2)
        await t.nursery.start(supervisor.run)
        adapter = t.adapter(tmp_path)
        supervisor.replace([adapter])
        await t.api.until(lambda: supervisor.records[0].state == "serving" and adapter.polls > 0)
        t.api.failing["getUpdates"] = 502
        record = supervisor.records[0]
        # seen at its next start's getMe: it failed, and starts again after the backoff
        # (`status` shows `failed` meanwhile: tests/channels/test_supervise.py)
        await t.api.until(lambda: record.failures > 0)
        assert "getUpdates failed" in (record.last_error or "")
        del t.api.failing["getUpdates"]
        t.api.message(ALICE, "hello after")
        await t.api.until(
            lambda: (
                "heard: hello after" in final_text(t.api, ALICE["id"])
                or "alpha" in final_text(t.api, ALICE["id"])
            )
        )
        assert supervisor.records[0].state == "serving"
    assert TOKEN not in caplog.text
    assert TOKEN.split(":")[1] not in caplog.text


# ------------------------------------------------------------------ the config's rules


def bot_doc(tmp_path: Path, **bot: Any) -> dict[str, Any]:
    from tests.supervisor.harness import agent_entry, make_config

    doc = make_config(tmp_path, {"alpha": agent_entry()})
    with_telegram([str(ALICE["id"])])(doc)
    doc["channels"]["telegram"]["chat"].update(bot)
    return doc


def issues_of(doc: dict[str, Any]) -> list[str]:
    from zeroclaw.config import ConfigError, validate_document

    try:
        validate_document(doc)
    except ConfigError as exc:
        return list(exc.lines())
    return []


def test_plain_http_to_another_host_would_carry_the_token_in_clear(tmp_path: Path) -> None:
    doc = bot_doc(tmp_path, api_url="http://bots.example.org")
    [issue] = issues_of(doc)
    assert "channels.telegram.chat.api_url" in issue and "https" in issue
    assert issues_of(bot_doc(tmp_path, api_url="http://127.0.0.1:8081")) == []


def test_a_token_variable_shared_with_a_provider_or_another_bot_is_refused(
    tmp_path: Path,
) -> None:
    doc = bot_doc(tmp_path)
    doc["channels"]["telegram"]["other"] = {"token_env": "ZC_TEST_TG_TOKEN"}
    assert any("one bot is polled by one channel" in i for i in issues_of(doc))
    doc = bot_doc(tmp_path, token_env="OPENAI_API_KEY")
    doc["providers"]["openai"] = {
        "gpt": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": "OPENAI_API_KEY"}
    }
    assert any("also a provider's api_key_env" in i for i in issues_of(doc))


def test_the_daemon_refuses_a_bound_bot_without_its_token(tmp_path: Path) -> None:
    from zeroclaw.config import daemon_refusals, validate_document

    config = validate_document(bot_doc(tmp_path))
    path = tmp_path / "zeroclaw.toml"
    [issue] = [i for i in daemon_refusals(config, {}, path) if "telegram" in i.message]
    assert "ZC_TEST_TG_TOKEN is not set" in issue.message
    assert not [
        i
        for i in daemon_refusals(config, {"ZC_TEST_TG_TOKEN": TOKEN}, path)
        if "telegram" in i.message
    ]


async def test_a_damaged_state_file_stops_the_channel_with_the_fix(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        adapter = t.adapter(tmp_path)
        await trio.Path(adapter.state_path.parent).mkdir(parents=True)
        await trio.Path(adapter.state_path).write_bytes(b'{"offset": 12, "pins": [')
        with pytest.raises(ChannelStartFailed) as failed:
            await adapter.serve(t.host)
        assert "move it away to start over" in str(failed.value)
        assert not t.api.of("getUpdates")  # nothing was read, so nothing acted on again


def test_config_show_names_the_token_variable_never_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zeroclaw.cli.config_cmd import secret_references
    from zeroclaw.config import validate_document

    config = validate_document(bot_doc(tmp_path))
    assert secret_references(config)["ZC_TEST_TG_TOKEN"] == "missing"
    monkeypatch.setenv("ZC_TEST_TG_TOKEN", TOKEN)
    shown = secret_references(config)
    assert shown["ZC_TEST_TG_TOKEN"] == "set" and TOKEN not in str(shown)
