"""An attacker with only what Telegram gives anyone: an account, a username of their
choosing, groups they share with the bot, and inline buttons they can press with any
callback data. Against the real adapter and host (tests/channels/test_telegram.py's bench)."""

from __future__ import annotations

from pathlib import Path

from tests.channels.fake_bot_api import BOT
from tests.channels.test_telegram import ALICE, BOB, GROUP, MALLORY, final_text, telegram_bench


def mention(text: str) -> tuple[str, list[dict[str, object]]]:
    said = f"@{BOT['username']} {text}"
    return said, [{"type": "mention", "offset": 0, "length": len(BOT["username"]) + 1}]


async def test_two_senders_in_one_group_never_read_each_others_session(tmp_path: Path) -> None:
    peers = [str(ALICE["id"]), str(BOB["id"])]
    async with telegram_bench(tmp_path, peers=peers) as t:
        adapter = t.adapter(tmp_path, stream=False)
        await t.start(adapter)
        text, entities = mention("note: alice-secret-7731")
        t.api.message(ALICE, text, chat=GROUP, entities=entities)
        await adapter.wait_turns(1)
        text, entities = mention("history")
        t.api.message(BOB, text, chat=GROUP, entities=entities)
        await adapter.wait_turns(2)
        said = t.api.sent(GROUP["id"])[-1]["text"]
        assert "alice-secret-7731" not in said and "no earlier messages" in said


async def test_a_stranger_replying_to_the_bot_in_a_shared_group_is_refused(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        adapter = t.adapter(tmp_path, stream=False)
        await t.start(adapter)
        text, entities = mention("ping")
        t.api.message(ALICE, text, chat=GROUP, entities=entities)
        await adapter.wait_turns(1)
        bots = [m for m in t.api.messages.values() if m["from"] == BOT]
        t.api.message(MALLORY, "read notes.txt", chat=GROUP, reply_to=bots[-1]["message_id"])
        await t.api.until(lambda: "does not take" in t.api.sent(GROUP["id"])[-1]["text"])
        assert t.host.refused[("telegram.chat", "sender_not_accepted")] == 1
        assert t.host.delivered["telegram.chat"] == 1


async def test_forged_button_data_answers_nothing(tmp_path: Path) -> None:
    async with telegram_bench(tmp_path) as t:
        adapter = t.adapter(tmp_path, approvers=(MALLORY["id"],))
        await t.start(adapter)
        t.api.message(ALICE, "write forged.txt: x")
        await t.api.until(lambda: any("reply_markup" in m for m in t.api.sent(ALICE["id"])))
        asked = next(
            m
            for m in t.api.messages.values()
            if "reply_markup" in m and m["chat"]["id"] == ALICE["id"]
        )
        # an approver, but with data the bot never gave out: guessed tokens, other forms
        for data in ("zc:AAAAAAAAAAAAAAAA:y", "zc::y", "zc:x:yes", "y", "", "zc:" + "a" * 60):
            t.api.press(MALLORY, data, ALICE["id"], asked["message_id"])
        await t.api.until(lambda: len(t.api.of("answerCallbackQuery")) == 6)
        assert adapter.answered_presses == {"unknown": 6}
        assert all("no longer pending" in a["text"] for a in t.api.of("answerCallbackQuery"))
        assert "reply_markup" in t.api.messages[(ALICE["id"], asked["message_id"])]


async def test_a_username_taken_over_after_a_rename_admits_nobody_new(tmp_path: Path) -> None:
    """Bob is admitted as @bob_zc; he renames, Mallory takes the name: Mallory is refused
    and Bob, by id, is refused too (his new name is not listed), until the operator lists
    his id."""
    async with telegram_bench(tmp_path, peers=["@bob_zc"]) as t:
        adapter = t.adapter(tmp_path, stream=False)
        await t.start(adapter)
        t.api.message(BOB, "ping")
        await adapter.wait_turns(1)
        t.api.message({**MALLORY, "username": "bob_zc"}, "read notes.txt")
        t.api.message({**BOB, "username": "bob_renamed"}, "ping")
        await t.api.until(
            lambda: (
                "does not take" in final_text(t.api, MALLORY["id"])
                and len(t.api.sent(BOB["id"])) == 2
            )
        )
        assert "does not take" in t.api.sent(BOB["id"])[-1]["text"]
        assert t.host.delivered["telegram.chat"] == 1
        assert adapter.state.pins == {"bob_zc": BOB["id"]}


async def test_one_sender_holding_many_turns_leaves_room_for_the_others(tmp_path: Path) -> None:
    """Turns queue per chat and a turn may wait minutes (an approval, a slow model): one
    admitted sender, within a generous rate, held every one of the channel's 64 turn slots
    and everyone else was answered `Busy`. Each sender has a few slots of their own."""
    peers = [str(ALICE["id"]), str(BOB["id"])]
    async with telegram_bench(tmp_path, peers=peers) as t:
        for n in range(64):  # each asks an approval nobody gives: the turns wait
            t.api.message(ALICE, f"write hog{n}.txt: x")
        adapter = t.adapter(tmp_path, rate_limit_per_minute=1000, stream=False)
        await t.start(adapter)
        await t.api.until(lambda: any("reply_markup" in m for m in t.api.sent(ALICE["id"])))
        t.api.message(BOB, "ping")
        await adapter.wait_turns(1)
        assert "heard: ping" in final_text(t.api, BOB["id"])
        busy = [m for m in t.api.sent(ALICE["id"]) if m["text"].startswith("Busy")]
        assert busy and "still being answered" in busy[0]["text"]
