"""The Matrix channel's sans-IO core driven sync response by sync response (nio parses the
JSON a homeserver would send): invites, encrypted rooms, messages, approvals, the rate,
the content it sends and the pace of a streamed reply's edits."""

from __future__ import annotations

import html
import itertools
import json
from typing import Any

import nio
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.channels._matrix_core import (
    ENCRYPTED_REFUSAL,
    Answer,
    Deliver,
    Join,
    Leave,
    MatrixCore,
    MatrixState,
    Notice,
    ReplyStream,
    Taken,
    decode_state,
    edit_content,
    encode_state,
    formatted,
    notice_content,
    parse_answer,
    reply_content,
    split_reply,
    strip_reply_fallback,
)

BOT = "@zcbot:example.org"
ALICE = "@alice:example.org"
MALLORY = "@mallory:example.org"
OPS = "@ops:example.org"
ROOM = "!room:example.org"
_serial = iter(range(1_000_000))


def core(**kwargs: Any) -> MatrixCore:
    admitted = {ALICE, OPS}
    return MatrixCore(BOT, lambda sender: sender in admitted, frozenset({OPS}), **kwargs)


def member(user: str, membership: str, sender: str | None = None) -> dict[str, Any]:
    return {
        "type": "m.room.member",
        "state_key": user,
        "sender": sender or user,
        "content": {"membership": membership},
        "event_id": f"$m{next(_serial)}",
        "origin_server_ts": 1,
    }


def text(sender: str, body: str, **content: Any) -> dict[str, Any]:
    return {
        "type": "m.room.message",
        "sender": sender,
        "content": {"msgtype": "m.text", "body": body, **content},
        "event_id": f"$t{next(_serial)}",
        "origin_server_ts": 1,
    }


def sync(
    batch: str,
    *,
    join: dict[str, list[dict[str, Any]]] | None = None,
    state: dict[str, list[dict[str, Any]]] | None = None,
    invite: dict[str, list[dict[str, Any]]] | None = None,
    leave: tuple[str, ...] = (),
) -> nio.SyncResponse:
    rooms: dict[str, Any] = {
        "join": {
            room: {
                "timeline": {"events": events, "limited": False},
                "state": {"events": (state or {}).get(room, [])},
            }
            for room, events in (join or {}).items()
        },
        "invite": {
            room: {"invite_state": {"events": events}} for room, events in (invite or {}).items()
        },
        "leave": {room: {"timeline": {"events": []}} for room in leave},
    }
    response = nio.SyncResponse.from_dict({"next_batch": batch, "rooms": rooms})
    assert isinstance(response, nio.SyncResponse), response
    return response


def running(**kwargs: Any) -> MatrixCore:
    """A core past its first sync (it answers messages from now on), in ROOM."""
    c = core(**kwargs)
    c.restore("s0")
    return c


def test_an_admitted_senders_invite_is_accepted_and_a_strangers_refused() -> None:
    c = running()
    actions = c.on_sync(
        sync(
            "s1",
            invite={
                "!a:x": [member(BOT, "invite", sender=ALICE)],
                "!m:x": [member(BOT, "invite", sender=MALLORY)],
            },
        ),
        0.0,
    )
    assert actions[0] == Join("!a:x")
    assert isinstance(actions[1], Leave) and actions[1].room_id == "!m:x"


def test_a_first_sync_without_a_token_answers_no_history() -> None:
    c = core()
    assert c.on_sync(sync("s1", join={ROOM: [text(ALICE, "old")]}), 0.0) == []
    assert c.next_batch == "s1"
    [deliver] = c.on_sync(sync("s2", join={ROOM: [text(ALICE, "new")]}), 0.0)
    assert isinstance(deliver, Deliver) and deliver.text == "new"


def test_a_room_just_joined_answers_only_what_follows_the_join() -> None:
    c = running()
    c.on_sync(sync("s1", invite={ROOM: [member(BOT, "invite", sender=ALICE)]}), 0.0)
    events = [text(ALICE, "before"), member(BOT, "join"), text(ALICE, "after")]
    [deliver] = c.on_sync(sync("s2", join={ROOM: events}), 0.0)
    assert isinstance(deliver, Deliver) and deliver.text == "after"


def test_own_notices_edits_and_other_bots_notices_are_not_messages() -> None:
    c = running()
    events = [
        text(BOT, "my own echo"),
        {**text(ALICE, "x"), "content": {"msgtype": "m.notice", "body": "a bot"}},
        text(
            ALICE,
            "* fixed",
            **{"m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}},
        ),
    ]
    assert c.on_sync(sync("s1", join={ROOM: events}), 0.0) == []


def test_media_gets_one_line_for_an_admitted_sender_and_nothing_for_a_stranger() -> None:
    c = running()
    image = {"msgtype": "m.image", "body": "cat.png", "url": "mxc://x/y"}
    events = [
        {**text(ALICE, ""), "content": image},
        {**text(MALLORY, ""), "content": image},
    ]
    [notice] = c.on_sync(sync("s1", join={ROOM: events}), 0.0)
    assert isinstance(notice, Notice) and "text messages only" in notice.text


def test_an_encrypted_room_is_refused_once_with_a_clear_message() -> None:
    c = running()
    encryption = {
        "type": "m.room.encryption",
        "state_key": "",
        "sender": ALICE,
        "content": {"algorithm": "m.megolm.v1.aes-sha2"},
        "event_id": "$e",
        "origin_server_ts": 1,
    }
    actions = c.on_sync(sync("s1", join={ROOM: [text(ALICE, "hi")]}, state={ROOM: [encryption]}), 0)
    assert actions == [
        Notice(ROOM, ENCRYPTED_REFUSAL),
        Leave(ROOM, "end-to-end encrypted rooms are not supported"),
    ]
    assert c.on_sync(sync("s2", join={ROOM: [text(ALICE, "again")]}), 0.0) == []


def test_a_megolm_event_alone_refuses_the_room() -> None:
    c = running()
    megolm = {
        "type": "m.room.encrypted",
        "sender": ALICE,
        "event_id": "$enc",
        "origin_server_ts": 1,
        "content": {
            "algorithm": "m.megolm.v1.aes-sha2",
            "ciphertext": "AwgA",
            "sender_key": "k",
            "device_id": "D",
            "session_id": "s",
        },
    }
    actions = c.on_sync(sync("s1", join={ROOM: [megolm]}), 0.0)
    assert actions[0] == Notice(ROOM, ENCRYPTED_REFUSAL)


def test_a_reply_quotes_are_dropped_from_the_message() -> None:
    c = running()
    [deliver] = c.on_sync(
        sync("s1", join={ROOM: [text(ALICE, "> <@zcbot:example.org> earlier\n\nthe answer")]}), 0.0
    )
    assert isinstance(deliver, Deliver) and deliver.text == "the answer"


def test_an_approval_is_answered_by_an_approver_only_in_its_room() -> None:
    c = running()
    approval_id, prompt = c.ask(ROOM, "file_write note.txt")
    assert f"approve {approval_id}" in prompt
    [refused] = c.on_sync(sync("s1", join={ROOM: [text(ALICE, f"approve {approval_id}")]}), 0.0)
    assert isinstance(refused, Notice) and "Only the configured approvers" in refused.text
    [elsewhere] = c.on_sync(sync("s2", join={"!o:x": [text(OPS, f"approve {approval_id}")]}), 0.0)
    assert isinstance(elsewhere, Notice) and "No approval" in elsewhere.text
    answered = c.on_sync(sync("s3", join={ROOM: [text(OPS, f"DENY {approval_id}")]}), 0.0)
    assert answered == [Answer(approval_id, False)]
    again = c.on_sync(sync("s4", join={ROOM: [text(OPS, f"approve {approval_id}")]}), 0.0)
    assert isinstance(again[0], Notice)  # answered once: nothing pending any more


def test_leaving_a_room_denies_its_pending_approvals() -> None:
    c = running()
    approval_id, _ = c.ask(ROOM, "x")
    assert c.on_sync(sync("s1", leave=(ROOM,)), 0.0) == [Answer(approval_id, False)]


def test_a_flooding_sender_is_told_once_and_refills() -> None:
    c = running(rate_per_minute=2)
    events = [text(ALICE, f"m{i}") for i in range(5)]
    actions = c.on_sync(sync("s1", join={ROOM: events}), 0.0)
    assert [type(a) for a in actions] == [Deliver, Deliver, Notice]
    [later] = c.on_sync(sync("s2", join={ROOM: [text(ALICE, "later")]}), 60.0)
    assert isinstance(later, Deliver)


@given(st.text())
def test_the_formatted_body_carries_no_markup_of_its_own(body: str) -> None:
    out = formatted(body)
    assert "<" not in out.replace("<br>", "")
    assert html.unescape(out.replace("<br>", "\n")) == body


@given(st.text())
def test_answers_parse_only_approve_or_deny_and_an_id(body: str) -> None:
    parsed = parse_answer(body)
    if parsed is not None:
        assert body.split()[0].lower() in ("approve", "deny")


def test_answer_forms() -> None:
    assert parse_answer("approve ab12cd") == ("ab12cd", True)
    assert parse_answer("  Deny AB12CD. ") == ("ab12cd", False)
    assert parse_answer("approve") is None
    assert parse_answer("approve ab12cd please") is None


def test_notice_and_edit_content() -> None:
    assert notice_content("a<b")["formatted_body"] == "a&lt;b"
    edit = edit_content("$e", "new")
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$e"}
    assert edit["m.new_content"] == notice_content("new")
    assert strip_reply_fallback("> quoted\n> more\n\nmine") == "mine"


def test_a_stream_sends_at_once_then_edits_at_most_once_per_interval() -> None:
    stream = ReplyStream(interval=1.0)
    assert stream.due(0.0) is None  # nothing yet
    stream.add("a")
    assert stream.due(0.0) == 0.0
    stream.sent("a", 0.0, "$e")
    assert stream.due(0.1) is None  # nothing new
    stream.add("b")
    assert stream.due(0.1) == 1.0  # the next edit waits its interval
    stream.sent("ab", 1.0)
    stream.add("c")
    assert stream.due(5.0) == 5.0


@given(st.lists(st.tuples(st.text(min_size=1), st.floats(0, 10)), max_size=20))
def test_edits_never_come_closer_than_the_interval(pieces: list[tuple[str, float]]) -> None:
    stream = ReplyStream(interval=0.5)
    now, sends = 0.0, []
    for piece, wait in pieces:
        now += wait
        stream.add(piece)
        due = stream.due(now)
        if due is not None:
            now = due
            sends.append(now)
            stream.sent(stream.text, now, "$e")
    assert all(b - a >= 0.5 - 1e-9 for a, b in itertools.pairwise(sends))


def test_a_stranger_spelling_answers_gets_no_word_back() -> None:
    """Anyone in a room the bot is in could make it post one notice per `approve <id>`
    (a wrong id, no approver): a stranger is answered by silence, whatever the id."""
    c = running()
    approval_id, _ = c.ask(ROOM, "file_write note.txt")
    events = [text(MALLORY, f"approve {i:06x}") for i in range(50)]
    events.append(text(MALLORY, f"approve {approval_id}"))
    assert c.on_sync(sync("s1", join={ROOM: events}), 0.0) == []
    assert approval_id in c.pending


def test_answers_and_media_count_against_the_senders_rate() -> None:
    """An admitted sender's answers and media are notices the bot posts: they are within
    the same rate as messages, told once when over it."""
    c = running(rate_per_minute=2)
    image = {"msgtype": "m.image", "body": "cat.png", "url": "mxc://x/y"}
    events = [text(ALICE, "approve 000000") for _ in range(10)]
    events += [{**text(ALICE, ""), "content": image} for _ in range(10)]
    actions = c.on_sync(sync("s1", join={ROOM: events}), 0.0)
    assert len(actions) == 3, actions  # two answers, then "too many" once
    assert isinstance(actions[2], Notice) and "Too many messages" in actions[2].text


def test_a_join_pushed_out_of_a_gappy_timeline_still_opens_the_room() -> None:
    """Past the sync filter's 50 events the timeline is cut and the bot's own join comes
    in the room's state instead: the room must not stay deaf for the rest of the run (a
    stranger flooding the room as the bot joins did that)."""
    c = running()
    c.on_sync(sync("s1", invite={ROOM: [member(BOT, "invite", sender=ALICE)]}), 0.0)
    flood = [text(MALLORY, f"spam {i}") for i in range(50)]
    c.on_sync(sync("s2", join={ROOM: flood}, state={ROOM: [member(BOT, "join")]}), 0.0)
    [deliver] = c.on_sync(sync("s3", join={ROOM: [text(ALICE, "hello")]}), 0.0)
    assert isinstance(deliver, Deliver) and deliver.text == "hello"


def test_invites_count_against_the_inviters_rate() -> None:
    """Each accepted invite is a room the bot joins and syncs for good: an admitted sender
    inviting it into room after room is held to the same rate as their messages."""
    c = running(rate_per_minute=2)
    rooms = {f"!r{i}:x": [member(BOT, "invite", sender=ALICE)] for i in range(5)}
    actions = c.on_sync(sync("s1", invite=rooms), 0.0)
    assert [type(a) for a in actions] == [Join, Join, Leave, Leave, Leave]
    assert isinstance(actions[2], Leave) and "too many invites" in actions[2].reason


@given(st.text(alphabet=st.sampled_from('a"&<\n😀'), max_size=3000), st.integers(400, 5000))
def test_a_reply_is_cut_into_pieces_whose_edits_fit(body: str, limit: int) -> None:
    pieces = split_reply(body, limit)
    assert "".join(pieces) == body
    for piece in pieces:
        assert len(json.dumps(edit_content("$" + "x" * 80, piece))) <= limit or len(piece) == 1


def test_the_kept_state_holds_the_token_and_the_turns_taken_until_each_is_answered() -> None:
    state = MatrixState("s72_1")
    state.started("!room:x", "$one")
    state.started("!room:x", "$two")
    state.finished("!room:x", "$one")
    state.finished("!room:x", "$never-taken")  # nothing to do
    again = decode_state(encode_state(state))
    assert again == MatrixState("s72_1", [Taken("!room:x", "$two")])
    assert decode_state(b"{}") == MatrixState()  # every field has a default


def test_a_reply_names_the_message_it_answers_and_is_a_notice() -> None:
    content = reply_content("$one", "please send it again")
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": "$one"}}
    assert (content["msgtype"], content["body"]) == ("m.notice", "please send it again")
