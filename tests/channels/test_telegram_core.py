"""The Telegram channel's core, driven directly: updates to decisions, senders, the offset
state, the reply split, MarkdownV2 escaping, streamed edits and the approval buttons, with
Hypothesis where a property holds for every input."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.channels.fake_bot_api import _BadRequest, _check_markdown_v2
from zeroclaw.channels import ChannelAnswer, ChannelFailure, ChannelRefused
from zeroclaw.channels._telegram_core import (
    MAX_MESSAGE_UTF16,
    MAX_RECENT,
    UNSUPPORTED,
    ApiFailed,
    ApiOk,
    ApiRetry,
    Chat,
    Converse,
    Edit,
    Entity,
    Message,
    OneLine,
    PendingApprovals,
    Press,
    ReplyTo,
    Send,
    Skip,
    StreamEdits,
    TelegramState,
    Update,
    User,
    Wait,
    api_outcome,
    approval_markup,
    approval_settled,
    approval_text,
    choose_sender,
    decode_state,
    encode_state,
    escape_markdown_v2,
    outcome_text,
    parse_press,
    press_data,
    read_update,
    redact,
    split_message,
)

ME = User(777, True, "zc_bot")
ALICE = User(1001, False, "alice")
GROUP = Chat(-100, "supergroup")
PRIVATE = Chat(1001, "private")


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def message(text: str | None, chat: Chat = PRIVATE, **more: object) -> Update:
    return Update(1, message=Message(5, chat, from_=ALICE, text=text, **more))  # type: ignore[arg-type]


# ----------------------------------------------------------------- updates


def test_a_private_text_message_is_a_conversation() -> None:
    assert read_update(message("hi"), ME) == Converse(1001, 5, ALICE, "hi", False)


def test_a_group_message_is_read_only_when_it_mentions_or_replies_to_the_bot() -> None:
    assert isinstance(read_update(message("hi all", GROUP), ME), Skip)
    mention = message("@ZC_bot hi", GROUP, entities=(Entity("mention", 0, 7),))
    assert read_update(mention, ME) == Converse(-100, 5, ALICE, "hi", True)
    other = message("@someone hi", GROUP, entities=(Entity("mention", 0, 8),))
    assert isinstance(read_update(other, ME), Skip)
    reply = message("and?", GROUP, reply_to_message=ReplyTo(4, ME))
    assert isinstance(read_update(reply, ME), Converse)
    to_someone = message("and?", GROUP, reply_to_message=ReplyTo(4, ALICE))
    assert isinstance(read_update(to_someone, ME), Skip)
    command = message("/help@zc_bot", GROUP, entities=(Entity("bot_command", 0, 12),))
    assert isinstance(read_update(command, ME), Converse)


def test_a_mention_after_astral_characters_is_found_by_utf16_offsets() -> None:
    text = "😀😀 @zc_bot go"  # each emoji is two UTF-16 units
    update = message(text, GROUP, entities=(Entity("mention", 5, 7),))
    assert read_update(update, ME) == Converse(-100, 5, ALICE, "😀😀  go", True)


@given(st.text())
def test_no_group_message_without_a_mention_or_reply_is_ever_read(text: str) -> None:
    assert isinstance(read_update(message(text, GROUP), ME), Skip)


def test_media_edits_bots_and_channel_posts() -> None:
    assert read_update(message(None), ME) == OneLine(1001, 5, ALICE, UNSUPPORTED)
    assert isinstance(read_update(Update(2, edited_message=message("x").message), ME), Skip)
    bot = Update(3, message=Message(5, PRIVATE, from_=User(9, True, "other_bot"), text="hi"))
    assert isinstance(read_update(bot, ME), Skip)
    post = Update(4, message=Message(5, Chat(-5, "channel"), from_=ALICE, text="hi"))
    assert isinstance(read_update(post, ME), Skip)
    assert isinstance(read_update(Update(5), ME), Skip)
    for said in ("/start", "/start@zc_bot", "/start from-a-link"):
        start = read_update(message(said), ME)
        assert isinstance(start, OneLine) and "1001" in start.text


def test_a_button_press_is_a_press() -> None:
    from zeroclaw.channels._telegram_core import CallbackQuery

    held = Message(9, PRIVATE, from_=ME, text="approve?")
    update = Update(6, callback_query=CallbackQuery("q1", ALICE, "zc:t:y", held))
    assert read_update(update, ME) == Press("q1", ALICE, "zc:t:y", 1001, 9)


# ----------------------------------------------------------------- senders


def admits(*names: str, ignored: tuple[str, ...] = ()) -> object:
    def accepted(sender: str) -> str | None:
        if sender in ignored:
            return "sender_ignored"
        return None if sender in names else "sender_not_accepted"

    return accepted


def test_the_sender_is_the_user_id_when_it_is_listed() -> None:
    choice = choose_sender(ALICE, {}, admits("1001", "alice"))  # type: ignore[arg-type]
    assert choice.sender == "1001" and choice.pin is None


def test_a_listed_username_is_pinned_to_the_first_id_and_refused_to_another() -> None:
    first = choose_sender(ALICE, {}, admits("alice"))  # type: ignore[arg-type]
    assert first.sender == "alice" and first.pin == "alice"
    again = choose_sender(ALICE, {"alice": 1001}, admits("alice"))  # type: ignore[arg-type]
    assert again.sender == "alice" and again.pin is None
    impostor = User(2002, False, "Alice")
    taken = choose_sender(impostor, {"alice": 1001}, admits("alice"))  # type: ignore[arg-type]
    assert taken.sender == "2002" and taken.conflict is not None


@given(st.integers(1, 10**12), st.text(min_size=1, max_size=40))
def test_an_ignored_id_is_never_admitted_by_its_username(user_id: int, name: str) -> None:
    user = User(user_id, False, name)
    accepted = admits(name.casefold().lstrip("@ "), ignored=(str(user_id),))
    choice = choose_sender(user, {}, accepted)  # type: ignore[arg-type]
    assert choice.sender == str(user_id)


# ----------------------------------------------------------------- state


updates_batches = st.lists(st.lists(st.integers(1, 60), max_size=8), max_size=12)


@given(updates_batches)
def test_no_update_is_taken_twice_and_taken_ones_ascend(batches: list[list[int]]) -> None:
    state = TelegramState()
    taken: list[int] = []
    for batch in batches:  # a server that may send anything again, in any order
        got = state.take([Update(i) for i in batch])
        taken += [u.update_id for u in got]
        # the state as a restart reads it back
        state = decode_state(encode_state(state))
    assert taken == sorted(set(taken))
    assert state.offset == (max(taken) + 1 if taken else 0)


@given(st.lists(st.tuples(st.integers(1, MAX_RECENT), st.booleans()), max_size=60))
def test_a_pushed_update_is_taken_once_across_restarts(pushes: list[tuple[int, bool]]) -> None:
    """Webhook mode: Telegram may send an update again, in any order, before or after a
    restart (`restart`: the state read back from its file); each id is taken once (ids
    within the window: one far below the offset is Telegram restarting its ids)."""
    state = TelegramState()
    taken: list[int] = []
    for update_id, restart in pushes:
        if state.take_pushed(Update(update_id)):
            taken.append(update_id)
        if restart:
            state = decode_state(encode_state(state))
    assert len(taken) == len(set(taken)) == len(set(i for i, _ in pushes))
    assert state.offset == (max(taken) + 1 if taken else 0)  # a poll goes on after them


def test_a_pushed_id_below_the_offset_is_taken_as_telegram_may_restart_its_ids() -> None:
    state = TelegramState(offset=900_000)  # after a week without updates: a random next id
    assert state.take_pushed(Update(12))
    assert not state.take_pushed(Update(12))
    # A poll after a switch back goes on from the new ids: getUpdates with the old offset
    # would confirm, so drop, every update below it, all of the new ones (attack pass).
    assert state.offset == 13
    assert state.take_pushed(Update(14)) and state.take_pushed(Update(13))  # out of order
    assert state.offset == 15
    assert state.take_pushed(Update(-5_000))  # never a negative offset: getUpdates would
    assert state.offset == 15  # forget all but the last updates with one
    for update_id in range(1000, 1000 + MAX_RECENT + 5):  # the window is bounded
        state.take_pushed(Update(update_id))
    assert len(state.recent) == MAX_RECENT


def test_the_state_file_round_trips_and_a_bad_one_is_refused() -> None:
    state = TelegramState(offset=42, pins={"alice": 1001})
    assert state.started(1001, 5)
    assert decode_state(encode_state(state)) == state
    state.finished(1001, 5)
    assert state.inflight == []
    with pytest.raises(msgspec.DecodeError):
        decode_state(b'{"offset": "x"}')


# ----------------------------------------------------------------- the Bot API's answers


def test_flood_control_and_failures() -> None:
    assert api_outcome(200, b'{"ok": true, "result": 1}') == ApiOk(msgspec.Raw(b"1"))
    flood = b'{"ok":false,"error_code":429,"description":"x","parameters":{"retry_after":7}}'
    assert api_outcome(429, flood) == ApiRetry(7.0)
    assert api_outcome(429, b"<html>") == ApiRetry(1.0)
    assert api_outcome(401, b'{"ok":false,"error_code":401,"description":"Unauthorized"}') == (
        ApiFailed(401, "Unauthorized")
    )
    assert isinstance(api_outcome(502, b"Bad Gateway"), ApiFailed)


@given(st.integers(100, 599), st.binary(max_size=200))
def test_any_answer_is_an_outcome_never_an_exception(status: int, body: bytes) -> None:
    outcome = api_outcome(status, body)
    assert isinstance(outcome, ApiOk | ApiRetry | ApiFailed)
    if isinstance(outcome, ApiRetry):
        assert 1.0 <= outcome.after <= 3600.0


@given(st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=40))
def test_a_token_never_survives_redaction(secret: str) -> None:
    token = "123:" + secret
    text = f"Client error for url https://api.telegram.org/bot{token}/getUpdates ({token})"
    assert token not in redact(text, token)


# ----------------------------------------------------------------- replies


@given(st.text(max_size=3000), st.integers(2, 300))
def test_pieces_join_to_the_text_and_fit_the_limit(text: str, limit: int) -> None:
    pieces = split_message(text, limit)
    assert "".join(pieces) == text
    assert all(utf16(p) <= limit for p in pieces)
    assert all(pieces) or pieces == [""]


def test_ten_thousand_characters_are_three_messages_cut_at_newlines() -> None:
    text = "\n".join(f"line {i:04d} " + "x" * 40 for i in range(200))  # ~10,200 characters
    pieces = split_message(text)
    assert len(pieces) == 3
    assert all(utf16(p) <= MAX_MESSAGE_UTF16 and p.endswith("\n") for p in pieces[:-1])


@given(st.text())
def test_escaped_markdown_v2_is_accepted_and_reads_back_as_the_text(text: str) -> None:
    escaped = escape_markdown_v2(text)
    _check_markdown_v2(escaped.replace("*", "\\*"))
    unescaped = "".join(
        ch for i, ch in enumerate(escaped) if not (ch == "\\" and _escape_at(escaped, i))
    )
    assert unescaped == text


def _escape_at(text: str, i: int) -> bool:
    """Whether the backslash at i escapes the next character (an odd run of them)."""
    run = 0
    while i - run >= 0 and text[i - run] == "\\":
        run += 1
    return run % 2 == 1


def test_an_unescaped_reserved_character_is_what_telegram_refuses() -> None:
    with pytest.raises(_BadRequest):
        _check_markdown_v2("1.5")


def test_outcomes_read_as_one_line_codes() -> None:
    assert outcome_text(ChannelAnswer("alpha", "hi")) == "hi"
    assert outcome_text(ChannelAnswer("alpha", "  ")) == "(no reply)"
    assert outcome_text(ChannelRefused("no_owner", "x\ny")) == "Refused: no_owner: x y"
    assert outcome_text(ChannelFailure("budget_exceeded", "over")).startswith("No reply: budget")


# ----------------------------------------------------------------- streaming


@given(
    st.lists(
        st.tuples(st.text(min_size=0, max_size=50), st.floats(0, 2), st.booleans()),
        max_size=40,
    ),
    st.text(max_size=9000),
)
def test_a_stream_makes_one_call_at_a_time_at_a_bounded_rate_and_ends_whole(
    steps: list[tuple[str, float, bool]], final: str
) -> None:
    """Driven event by event: deltas arrive, time passes, calls go out and come back
    (or fail). Never two calls at once, never two within the interval, one message only;
    the finish leaves the chat with the final text."""
    stream = StreamEdits(interval=1.0, limit=100)
    now, started = 0.0, []
    sent_id: int | None = None
    for delta, later, fails in steps:
        stream.feed(delta)
        now += later
        action = stream.next(now)
        if isinstance(action, Send | Edit):
            assert stream.next(now) is None  # nothing more while it is on its way
            started.append(now)
            if isinstance(action, Send):
                assert sent_id is None
            if fails:
                stream.failed()
            else:
                sent_id = 42 if sent_id is None else sent_id
                stream.done(action.text, 42 if isinstance(action, Send) else None)
        else:
            assert action is None or (isinstance(action, Wait) and action.secs > 0)
    # as the core reckons it (last + interval <= now): b - a may round below 1.0
    assert all(a + 1.0 <= b for a, b in itertools.pairwise(started))
    shown = {42: stream.shown} if stream.message_id is not None else {}
    extra = []
    for call in stream.finish(final):
        if isinstance(call, Edit):
            shown[call.message_id] = call.text
        else:
            extra.append(call.text)
    assert "".join([*shown.values(), *extra]) == final


# ----------------------------------------------------------------- approvals


def test_only_an_approver_answers_and_only_once() -> None:
    pending = PendingApprovals(frozenset({3}))
    pending.ask("tok", "write x")
    yes = press_data("tok", True)
    assert pending.press(1001, yes) == ("not_an_approver", "tok", False)
    assert "tok" not in pending.answers
    assert pending.press(3, yes) == ("answered", "tok", True)
    assert pending.press(3, press_data("tok", False))[0] == "unknown"
    assert pending.press(3, "zc:other:y")[0] == "unknown"


@given(st.text(max_size=80), st.integers(1, 10**10))
def test_no_forged_press_answers_what_was_not_asked(data: str, user: int) -> None:
    pending = PendingApprovals(frozenset({user}))
    pending.ask("real-token", "x")
    verdict, token, _ = pending.press(user, data)
    assert verdict == "unknown" or token == "real-token"


def test_the_buttons_fit_telegrams_limits() -> None:
    markup = approval_markup("A" * 16)
    rows = markup["inline_keyboard"]
    assert isinstance(rows, list)
    for button in rows[0]:
        assert len(button["callback_data"].encode()) <= 64
        assert parse_press(button["callback_data"]) is not None
    _check_markdown_v2(approval_text("run rm -rf ./build (1.5 MB) [y/n]!"))


@given(st.text(alphabet=st.sampled_from("._-()!a😀\\"), max_size=5000))
def test_an_approval_fits_one_message_once_escaped(what: str) -> None:
    """The shown request is cut after escaping: code full of `.`, `(`, `-` escapes to
    twice its length, and 3,000 characters of it were 6,000 units, beyond one message
    (Telegram refused it, and an approval shown nowhere is denied)."""
    for text in (approval_text(what), approval_settled(what, True, "@" + "u" * 32)):
        assert len(text.encode("utf-16-le")) // 2 <= 4096
        _check_markdown_v2(text)


def test_a_long_approval_shows_its_start_and_is_marked_cut() -> None:
    for what in ("f(x)." * 1000, "." * 3000, "😀" * 3000):
        shown = approval_text(what)
        assert len(shown.encode("utf-16-le")) // 2 <= 4096
        assert shown.endswith("…")
    assert approval_text("f(x)." * 1000).startswith("*Approval needed*\nf\\(x\\)\\.")
