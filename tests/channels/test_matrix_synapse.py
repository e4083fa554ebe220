"""The Matrix channel against a real Synapse on loopback (tests/channels/synapse.py): a real
ChannelHost on the turns bench, alpha owning matrix.home, the bot `@zcbot` logging in by
password, `@alice` the admitted outside sender, `@ops` the approver, `@mallory` nobody's.
Every wait is on an event the homeserver delivers (a long-polled /sync), bounded by
PATIENCE."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.agent.helpers import local_engine
from tests.channels.synapse import (
    Homeserver,
    MatrixUser,
    is_edit_of,
    is_member,
    is_notice_from,
    is_reply_to,
)
from tests.conftest import PATIENCE
from tests.conversations.helpers import Bench, bench
from tests.known_secrets import MATRIX_PASSWORD
from zeroclaw.agent._runtime import AgentInbox, AgentRuntime, BusReach
from zeroclaw.channels import ChannelHost, ChannelStartFailed, ChannelSupervisor, MatrixAdapter
from zeroclaw.channels._matrix_core import ENCRYPTED_REFUSAL, Taken, decode_state
from zeroclaw.channels._types import RESTARTED
from zeroclaw.config import MatrixChannel
from zeroclaw.providers import OfflineProvider, Step
from zeroclaw.providers._types import Conversation, OnDelta

PASSWORD_ENV = "ZC_TEST_MATRIX_PASSWORD"


def matrix_entry(server: Homeserver, **settings: Any) -> dict[str, Any]:
    return {
        "homeserver": server.url,
        "user_id": server.user_id("zcbot"),
        "password_env": PASSWORD_ENV,
        "device_id": "ZCTEST",
        "approvers": [server.user_id("ops")],
        "edit_interval_secs": 0.2,
        **settings,
    }


class StreamingProvider:
    """A model that streams its answer in two pieces, the second only once the test has
    seen the first in the room (so the reply is posted, then edited)."""

    name = "stream.test"

    def __init__(self) -> None:
        self.gate = trio.Event()

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        await on_delta("first part")
        await self.gate.wait()
        await on_delta(", second part")
        return Step(text="first part, second part", streamed=True)

    async def aclose(self) -> None:
        return None


@dataclass
class Room:
    adapter: MatrixAdapter
    bench: Bench
    alice: MatrixUser
    bot: str
    state: Path


async def _agent(b: Bench, tmp_path: Path, provider: Any) -> None:
    bus, _ = await b.client("alpha")
    engine, _ = await b.nursery_enter(local_engine(provider, tmp_path))
    inbox = AgentInbox()
    bus.on_message, bus.on_late_refusal = inbox.message, inbox.late_refusal
    b.nursery.start_soon(AgentRuntime(bus, engine, BusReach(bus), inbox).run)


@asynccontextmanager
async def matrix_bench(
    tmp_path: Path,
    server: Homeserver,
    provider: Any = None,
    adapter_type: type[MatrixAdapter] = MatrixAdapter,
    **settings: Any,
) -> AsyncIterator[tuple[Bench, ChannelHost, MatrixAdapter]]:
    entry = matrix_entry(server, **settings)

    def configure(doc: dict[str, Any]) -> None:
        doc["channels"]["matrix"] = {"home": entry}
        doc["agents"]["alpha"]["channels"] = ["cli.local", "matrix.home"]
        doc["peer_groups"]["home"] = {
            "channel": "matrix.home",
            "agents": ["alpha"],
            "external_peers": [server.user_id("alice"), server.user_id("ops")],
            "tools": ["file_write", "file_read"],
            "approvals": "sender",
        }

    async with bench(tmp_path, configure=configure) as b:
        await _agent(b, tmp_path, provider or OfflineProvider())
        host = ChannelHost(b.service, lambda: b.router.policy, approval_timeout=PATIENCE)
        adapter = adapter_type(
            "home", MatrixChannel(**entry), {PASSWORD_ENV: MATRIX_PASSWORD}, tmp_path / "state"
        )
        with trio.fail_after(PATIENCE):
            # The channel stops before the bench: a turn in flight ends with it, not with
            # the router closing under it.
            async with trio.open_nursery() as channel:
                await channel.start(adapter.serve, host)
                yield b, host, adapter
                channel.cancel_scope.cancel()


@asynccontextmanager
async def user(server: Homeserver, localpart: str) -> AsyncIterator[MatrixUser]:
    person = server.user(localpart)
    try:
        await person.sync_once(0)  # from now on: what happens later
        yield person
    finally:
        await person.aclose()


async def _room_with_bot(alice: MatrixUser, server: Homeserver, **kwargs: Any) -> str:
    bot = server.user_id("zcbot")
    room = await alice.create_room(invite=[bot], **kwargs)
    await alice.wait_for(room, is_member(bot, "join"))
    return room


async def test_an_admitted_senders_invite_is_accepted_and_a_strangers_refused(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    bot = homeserver.user_id("zcbot")
    async with (
        matrix_bench(tmp_path, homeserver),
        user(homeserver, "alice") as alice,
        user(homeserver, "mallory") as mallory,
    ):
        theirs = await mallory.create_room(invite=[bot])
        await mallory.wait_for(theirs, is_member(bot, "leave"))  # the invite rejected
        ours = await _room_with_bot(alice, homeserver)
        assert any(is_member(bot, "join")(e) for r, e in alice.seen if r == ours)
        # The stranger's room was never joined: no join of the bot there, ever.
        assert not any(is_member(bot, "join")(e) for r, e in mallory.seen if r == theirs)


async def test_a_message_gets_its_reply_as_an_escaped_notice_and_no_secret_is_logged(
    tmp_path: Path, homeserver: Homeserver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bot = homeserver.user_id("zcbot")
    async with (
        matrix_bench(tmp_path, homeserver) as (_b, host, adapter),
        user(homeserver, "alice") as alice,
    ):
        room = await _room_with_bot(alice, homeserver)
        mark = alice.mark()
        await alice.send(room, "say <b>bold</b> & more")
        reply = await alice.wait_for(room, is_notice_from(bot, "heard:"), after=mark)
        content = reply["content"]
        assert content["body"] == "alpha (offline) heard: say <b>bold</b> & more"
        assert content["format"] == "org.matrix.custom.html"
        assert "&lt;b&gt;bold&lt;/b&gt; &amp; more" in content["formatted_body"]
        assert "<b>" not in content["formatted_body"]
        token = adapter._token
        assert host.counts(("matrix.home",))[0] == 1  # delivered, as the metrics count it
    assert token and token not in caplog.text
    assert MATRIX_PASSWORD not in caplog.text


async def test_a_streamed_reply_is_posted_then_edited(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    bot = homeserver.user_id("zcbot")
    provider = StreamingProvider()
    async with (
        matrix_bench(tmp_path, homeserver, provider),
        user(homeserver, "alice") as alice,
    ):
        room = await _room_with_bot(alice, homeserver)
        mark = alice.mark()
        await alice.send(room, "tell me")
        first = await alice.wait_for(room, is_notice_from(bot, "first part"), after=mark)
        assert "second" not in first["content"]["body"]
        provider.gate.set()
        edit = await alice.wait_for(room, is_edit_of(first["event_id"], "second part"), after=mark)
        assert edit["content"]["m.new_content"]["body"] == "first part, second part"
        assert edit["content"]["m.new_content"]["msgtype"] == "m.notice"


async def test_an_approval_is_answered_by_an_approvers_reply_only(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    bot, ops_id = homeserver.user_id("zcbot"), homeserver.user_id("ops")
    async with (
        matrix_bench(tmp_path, homeserver),
        user(homeserver, "alice") as alice,
        user(homeserver, "ops") as ops,
    ):
        room = await _room_with_bot(alice, homeserver)
        await alice.invite(room, ops_id)
        await ops.join(room)
        mark = alice.mark()
        await alice.send(room, "write note.txt: hi")
        prompt = await alice.wait_for(room, is_notice_from(bot, "Approval "), after=mark)
        approval_id = prompt["content"]["body"].split()[1]
        await alice.send(room, f"approve {approval_id}")  # the sender is no approver
        await alice.wait_for(room, is_notice_from(bot, "Only the configured approvers"), after=mark)
        assert not (tmp_path / "ws" / "note.txt").exists()
        answered = alice.mark()
        await ops.send(room, f"approve {approval_id}")
        await alice.wait_for(room, is_notice_from(bot, "wrote 2 bytes"), after=answered)
        assert (tmp_path / "ws" / "note.txt").read_text() == "hi"


async def test_a_stranger_in_an_admitted_room_gets_no_turn_and_cannot_approve(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    """Admission is by the Matrix user id the homeserver stamps, room by room and message by
    message: being in a room the admitted sender opened grants nothing."""
    bot, mallory_id = homeserver.user_id("zcbot"), homeserver.user_id("mallory")
    async with (
        matrix_bench(tmp_path, homeserver) as (_b, host, _adapter),
        user(homeserver, "alice") as alice,
        user(homeserver, "mallory") as mallory,
    ):
        room = await _room_with_bot(alice, homeserver)
        await alice.invite(room, mallory_id)
        await mallory.join(room)
        mark = alice.mark()
        await mallory.send(room, "write stolen.txt: x")
        await alice.send(room, "write note.txt: hi")
        prompt = await alice.wait_for(room, is_notice_from(bot, "Approval "), after=mark)
        approval_id = prompt["content"]["body"].split()[1]
        await mallory.send(room, f"approve {approval_id}")
        # alice's answer comes after mallory's in the room: its refusal says mallory's was read
        await alice.send(room, f"approve {approval_id}")
        await alice.wait_for(room, is_notice_from(bot, "Only the configured approvers"), after=mark)
        replies = [e["content"]["body"] for r, e in alice.seen[mark:] if is_notice_from(bot)(e)]
        assert len(replies) == 2, replies  # the prompt and alice's refusal: nothing for mallory
        assert not (tmp_path / "ws" / "stolen.txt").exists()
        # each of mallory's two messages refused and counted once, and neither queued a turn
        assert host.counts(("matrix.home",))[1].get("sender_not_accepted", 0) == 2


async def test_a_restart_neither_repeats_nor_loses_a_message(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    """Also from the token file of an older daemon (`next_batch`, the token alone): read
    once, then kept in the state file."""
    bot = homeserver.user_id("zcbot")
    kept = tmp_path / "state" / "channels" / "matrix" / "home"
    async with user(homeserver, "alice") as alice:
        async with matrix_bench(tmp_path, homeserver) as (_b, _host, adapter):
            room = await _room_with_bot(alice, homeserver)
            mark = alice.mark()
            await alice.send(room, "number one")
            await alice.wait_for(room, is_notice_from(bot, "heard: number one"), after=mark)
            # Its end saved (a stop between the reply and the end would cut the turn, and
            # the next start would tell it to send again).
            await adapter.wait_turns(1)
        state = decode_state((kept / "state.json").read_bytes())
        assert state.next_batch and state.inflight == []
        (kept / "state.json").unlink()
        (kept / "next_batch").write_text(state.next_batch + "\n")  # as an older daemon left it
        await alice.send(room, "number two")  # while the channel is down
        async with matrix_bench(tmp_path, homeserver):
            await alice.wait_for(room, is_notice_from(bot, "heard: number two"), after=mark)
        replies = [
            e["content"]["body"]
            for r, e in alice.seen[mark:]
            if r == room and is_notice_from(bot)(e)
        ]
        # A repeat of "number one" would have come before the answer to "number two".
        assert replies == ["alpha (offline) heard: number one", "alpha (offline) heard: number two"]
        assert (kept / "state.json").exists() and not (kept / "next_batch").exists()


async def test_a_message_cut_short_by_a_restart_is_answered_send_it_again_once(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    """Its turn was running (waiting for an approval) when the channel stopped: its reply is
    lost, and running it again could repeat what it did, so the sender is told to resend."""
    bot = homeserver.user_id("zcbot")
    kept = tmp_path / "state" / "channels" / "matrix" / "home" / "state.json"
    async with user(homeserver, "alice") as alice:
        async with matrix_bench(tmp_path, homeserver):
            room = await _room_with_bot(alice, homeserver)
            mark = alice.mark()
            cut = await alice.send(room, "write cut.txt: x")  # an approval nobody gives
            await alice.wait_for(room, is_notice_from(bot, "Approval "), after=mark)
        assert decode_state(kept.read_bytes()).inflight == [Taken(room, cut)]
        for n in (2, 3):  # told at the next start, and not again at the one after
            async with matrix_bench(tmp_path, homeserver) as (_b, _host, adapter):
                later = alice.mark()
                await alice.send(room, f"number {n}")
                await alice.wait_for(room, is_notice_from(bot, f"heard: number {n}"), after=later)
                await adapter.wait_turns(1)  # its end saved
        told = [e for r, e in alice.seen[mark:] if r == room and is_reply_to(bot, cut)(e)]
        assert [e["content"]["body"] for e in told] == [RESTARTED]
        assert decode_state(kept.read_bytes()).inflight == []
        assert not (tmp_path / "ws" / "cut.txt").exists()


class SavedFirst(MatrixAdapter):
    """Reads, as each turn starts, the state on disk: whether it holds the turn's message
    and the token of the sync that took it (a restart from then on neither runs the turn
    again nor forgets it)."""

    saved_first: list[bool]

    async def _turn(self, *args: Any) -> None:
        message = args[1]
        # At once, with no checkpoint before it: what is on disk as the turn starts.
        on_disk = decode_state((self.state_dir / "state.json").read_bytes())
        assert self._core is not None
        taken = Taken(message.room_id, message.event_id) in on_disk.inflight
        self.saved_first.append(taken and on_disk.next_batch == self._core.next_batch)
        await super()._turn(*args)


async def test_messages_taken_together_run_in_order_once_the_sync_is_saved_with_them(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    """Sent while the channel is down, four messages come in one sync. Their turns start
    once the sync's token and the messages are on disk (before, a turn could run before
    the token was saved: a restart then ran it again), and run in the order sent (trio
    runs tasks spawned together in either order)."""
    bot = homeserver.user_id("zcbot")
    SavedFirst.saved_first = []
    async with user(homeserver, "alice") as alice:
        async with matrix_bench(tmp_path, homeserver):
            room = await _room_with_bot(alice, homeserver)
        mark = alice.mark()
        for n in range(4):
            await alice.send(room, f"in order {n}")
        async with matrix_bench(tmp_path, homeserver, adapter_type=SavedFirst):
            for n in range(4):
                await alice.wait_for(room, is_notice_from(bot, f"heard: in order {n}"), after=mark)
        replies = [
            e["content"]["body"]
            for r, e in alice.seen[mark:]
            if r == room and is_notice_from(bot, "heard: in order")(e)
        ]
        assert replies == [f"alpha (offline) heard: in order {n}" for n in range(4)]
        assert SavedFirst.saved_first == [True] * 4


async def test_a_state_file_that_is_not_one_fails_the_channel_and_says_how_to_start_over(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    kept = tmp_path / "state" / "channels" / "matrix" / "home"
    kept.mkdir(parents=True)
    (kept / "state.json").write_text("{not json")
    failed = pytest.RaisesExc(ChannelStartFailed, match="not a valid state file.*move it away")
    with pytest.RaisesGroup(failed, flatten_subgroups=True):
        async with matrix_bench(tmp_path, homeserver):
            pass
    assert (kept / "state.json").read_text() == "{not json"  # nothing overwritten


async def test_an_encrypted_room_is_refused_with_a_clear_message(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    bot = homeserver.user_id("zcbot")
    async with (
        matrix_bench(tmp_path, homeserver),
        user(homeserver, "alice") as alice,
    ):
        room = await alice.create_room(invite=[bot], encrypted=True)
        notice = await alice.wait_for(room, is_notice_from(bot, "end-to-end encrypted"))
        assert notice["content"]["body"] == ENCRYPTED_REFUSAL
        await alice.wait_for(room, is_member(bot, "leave"))


class Watched:
    """The real adapter, its failures made observable to the test."""

    def __init__(self, adapter: MatrixAdapter) -> None:
        self.adapter = adapter
        self.keys = adapter.keys
        self.failures = 0
        self.failed = trio.Event()

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await self.adapter.serve(host, task_status=task_status)
        except Exception:
            self.failures += 1
            self.failed.set()
            raise


async def test_an_unreachable_homeserver_is_failed_in_status_until_its_retry(
    tmp_path: Path,
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    entry = {
        "homeserver": f"http://127.0.0.1:{port}",
        "user_id": "@zcbot:localhost",
        "access_token_env": "ZC_TEST_MATRIX_TOKEN",
    }

    def configure(doc: dict[str, Any]) -> None:
        doc["channels"]["matrix"] = {"home": entry}
        doc["agents"]["alpha"]["channels"] = ["cli.local", "matrix.home"]

    async with bench(tmp_path, configure=configure) as b:
        host = ChannelHost(b.service, lambda: b.router.policy)
        env = {"ZC_TEST_MATRIX_TOKEN": MATRIX_PASSWORD}
        watched = Watched(MatrixAdapter("home", MatrixChannel(**entry), env, tmp_path / "state"))
        # A long backoff: the channel stays failed while the test reads its status.
        supervisor = ChannelSupervisor(host, backoff_initial=600.0, backoff_max=600.0)
        with trio.fail_after(PATIENCE):
            await b.nursery.start(supervisor.run)
            supervisor.replace([watched])
            await watched.failed.wait()
            await trio.testing.wait_all_tasks_blocked()  # the supervisor has recorded it
        [status] = supervisor.status()
        assert (status.keys, status.state, status.failures) == (["matrix.home"], "failed", 1)
        assert status.retry_at is not None
        assert "cannot reach the homeserver" in (status.last_error or "")
        assert MATRIX_PASSWORD not in (status.last_error or "")


async def test_a_room_where_the_bot_may_not_post_does_not_stop_the_channel(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    """A room's admin mutes the bot (power levels); a notice it owes there is refused by the
    homeserver. That room's failure is logged, not the channel's: before, it raised out of
    the sync loop before the next-batch token was saved, and every restart replayed the
    same sync into the same refusal (every room silent for good)."""
    bot, alice_id = homeserver.user_id("zcbot"), homeserver.user_id("alice")
    async with (
        matrix_bench(tmp_path, homeserver),
        user(homeserver, "alice") as alice,
    ):
        muted = await _room_with_bot(alice, homeserver)
        other = await _room_with_bot(alice, homeserver)
        path = f"/_matrix/client/v3/rooms/{muted}/state/m.room.power_levels"
        current = await alice.http.get(path)
        current.raise_for_status()
        # alice created the room: her power is the creator's, not listed (room v12)
        users = {u: v for u, v in current.json().get("users", {}).items() if u != alice_id}
        levels = {**current.json(), "users": users, "events_default": 50}
        answer = await alice.http.put(path, json=levels)
        assert answer.status_code == 200, answer.text
        await alice.send(muted, "approve 000000")  # owed a notice the bot may not post
        mark = alice.mark()
        await alice.send(other, "still there?")
        await alice.wait_for(other, is_notice_from(bot, "heard: still there?"), after=mark)


async def test_one_sender_has_a_few_turns_queued_at_most(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    """A room's turns run one at a time and one may wait minutes on an approval: every
    message queued a task behind it, without bound. A sender's ninth turn waiting is
    answered `Busy` instead of queued."""
    bot = homeserver.user_id("zcbot")
    async with (
        matrix_bench(tmp_path, homeserver),
        user(homeserver, "alice") as alice,
    ):
        room = await _room_with_bot(alice, homeserver)
        mark = alice.mark()
        for n in range(8):  # the first asks an approval nobody gives; the others wait
            await alice.send(room, f"write hog{n}.txt: x")
        await alice.wait_for(room, is_notice_from(bot, "Approval "), after=mark)
        await alice.send(room, "one more")
        busy = await alice.wait_for(room, is_notice_from(bot, "Busy"), after=mark)
        assert "8 of your messages" in busy["content"]["body"]


async def test_a_reply_naming_someone_pings_nobody(tmp_path: Path, homeserver: Homeserver) -> None:
    """The reply is the model's text (a prompt injection's too) and may name anyone: it
    pings nobody, because it is an `m.notice` (the default push rule `.m.rule.suppress_notices`
    comes before the mention rules). Pinned by the attack pass: a reply as `m.text` would."""
    ops_id = homeserver.user_id("ops")
    bot = homeserver.user_id("zcbot")
    async with (
        matrix_bench(tmp_path, homeserver),
        user(homeserver, "alice") as alice,
        user(homeserver, "ops") as ops,
    ):
        room = await _room_with_bot(alice, homeserver)
        await alice.invite(room, ops_id)
        await ops.join(room)
        mark = alice.mark()
        await alice.send(room, f"wake up ops {ops_id}")
        reply = await alice.wait_for(room, is_notice_from(bot, "heard: wake up ops"), after=mark)
        await ops.wait_for(room, lambda e: e.get("event_id") == reply["event_id"])
        answer = await ops.http.get(
            "/_matrix/client/v3/notifications", params={"only": "highlight"}
        )
        answer.raise_for_status()
        pinged = [n["event"]["event_id"] for n in answer.json()["notifications"]]
        assert reply["event_id"] not in pinged


class LongProvider:
    """A model that streams a 30,000-character reply (code: `<`, `&`, quotes) in pieces."""

    name = "long.test"
    line = 'if a < b && c > "d": x = 1\n'
    text = line * (30_000 // len(line))

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        for at in range(0, len(self.text), 1000):
            await on_delta(self.text[at : at + 1000])
        return Step(text=self.text, streamed=True)

    async def aclose(self) -> None:
        return None


async def test_a_long_reply_arrives_whole_in_notices_the_homeserver_takes(
    tmp_path: Path, homeserver: Homeserver
) -> None:
    """An event is at most 64 KiB, and an edit carries its text four times (the body and
    the escaped HTML, again in `m.new_content`): a reply of some 15,000 characters was
    refused mid-stream and never arrived whole. It is now cut into notices that fit."""
    bot = homeserver.user_id("zcbot")
    async with (
        matrix_bench(tmp_path, homeserver, LongProvider()),
        user(homeserver, "alice") as alice,
    ):
        room = await _room_with_bot(alice, homeserver)
        mark = alice.mark()
        await alice.send(room, "the long one")
        shown: dict[str, str] = {}  # notice event id -> its text as last edited
        order: list[str] = []

        def whole() -> bool:
            for r, e in alice.seen[mark:]:
                content = e.get("content", {})
                if r != room or e.get("sender") != bot or content.get("msgtype") != "m.notice":
                    continue
                relates = content.get("m.relates_to", {})
                if relates.get("rel_type") == "m.replace":
                    shown[relates["event_id"]] = content["m.new_content"]["body"]
                elif e["event_id"] not in shown:
                    order.append(e["event_id"])
                    shown[e["event_id"]] = content["body"]
            return "".join(shown[i] for i in dict.fromkeys(order)) == LongProvider.text

        while not whole():
            await alice.sync_once()
