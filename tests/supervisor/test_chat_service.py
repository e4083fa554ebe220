"""The control socket's chat: a thin adapter between control replies and the turn service.

What the turn service itself guarantees (only the addressed agent speaks, overflow,
cancel grace, approvals) is pinned in tests/conversations/test_service.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import trio

from tests.conversations.helpers import bench
from zeroclaw._ops import decode_body
from zeroclaw.control import AnyRequest, Chat, ChatApproval, ChatCancel, ChatOpen, Reply
from zeroclaw.supervisor._chat import ChatService, cli_channel
from zeroclaw.supervisor._control_server import Exchange
from zeroclaw.turns import TurnCancel


def test_the_cli_channel_is_the_agents_own_binding() -> None:
    assert cli_channel(("webhook.ops", "cli.local")) == "cli.local"
    assert cli_channel(("cli",)) == "cli"
    assert cli_channel(("webhook.ops",)) == "cli"
    assert cli_channel(()) == "cli"


class Client:
    """The control server's side of one connection: what the client sent, what it got."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.inbox, received = trio.open_memory_channel[AnyRequest](math.inf)
        self.got_reply = trio.Event()

        async def send(reply: Reply) -> None:
            self.replies.append(reply)
            self.got_reply.set()

        self.exchange = Exchange(send, received)

    async def next_streamed(self) -> Reply:
        await self.got_reply.wait()
        self.got_reply = trio.Event()
        return self.replies[-1]


async def test_a_chat_streams_event_dicts_and_ends_with_the_result(
    root: Path, tmp_path: Path
) -> None:
    async with bench(root) as b:
        await b.agent(tmp_path)
        client = Client()
        last = await ChatService(b.service).run_turn(Chat("alpha", "hello"), client.exchange)
    assert last.ok and not last.more and last.data is not None
    [step] = last.data.pop("usage")  # what its one provider step used (issue 27)
    assert step["provider"] == "offline" and step["tokens"]["output_tokens"] > 0
    assert last.data == {"reply": last.data["reply"], "tool_calls": []}
    assert last.data["reply"].startswith("Hello, I am alpha")
    assert all(r.more and r.data and r.data["event"] == "delta" for r in client.replies)
    assert "".join(r.data["text"] for r in client.replies if r.data) == last.data["reply"]


async def test_a_chat_approval_answers_the_pending_question(root: Path, tmp_path: Path) -> None:
    async with bench(root) as b:
        await b.agent(tmp_path)
        client = Client()
        chat = ChatService(b.service)
        result: list[Reply] = []

        async def run() -> None:
            result.append(
                await chat.run_turn(
                    Chat("alpha", "write notes.txt: hi", interactive=True), client.exchange
                )
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            asked = await client.next_streamed()
            assert asked.data is not None and asked.data["event"] == "approval"
            assert asked.data["what"] == "write notes.txt"
            client.inbox.send_nowait(ChatApproval(approved=False))
    (last,) = result
    assert last.data is not None
    assert last.data["tool_calls"] == [
        {
            "name": "file_write",
            "args": {"path": "notes.txt", "content": "hi"},
            "ok": False,
            "error_code": "approval_denied",
        }
    ]


async def test_a_chat_cancel_ends_the_turn_cancelled(root: Path, tmp_path: Path) -> None:
    async with bench(root) as b:
        await b.agent(tmp_path)
        client = Client()
        chat = ChatService(b.service)
        result: list[Reply] = []

        async def run() -> None:
            request = Chat("alpha", "write notes.txt: hi", interactive=True)
            result.append(await chat.run_turn(request, client.exchange))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await client.next_streamed()  # the approval: the agent waits
            client.inbox.send_nowait(ChatCancel())
    assert result == [Reply(ok=True, data={"reply": "", "tool_calls": [], "cancelled": True})]


async def test_a_client_that_goes_away_cancels_the_agents_turn(root: Path) -> None:
    async with bench(root) as b:
        _, alpha_inbox = await b.client("alpha")
        client = Client()
        result: list[Reply] = []

        async def run() -> None:
            result.append(
                await ChatService(b.service).run_turn(Chat("alpha", "hi"), client.exchange)
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            chat = await alpha_inbox.receive()
            assert chat.channel == "cli.local"
            client.inbox.close()  # the connection closed
            cancel = await alpha_inbox.receive()
    assert decode_body(cancel.body, TurnCancel).turn == chat.id
    assert [(r.ok, r.error) for r in result] == [(False, "cancelled")]


async def test_a_chat_with_an_unknown_agent_names_the_known_ones(root: Path) -> None:
    async with bench(root) as b:
        chat = ChatService(b.service)
        refused = await chat.run_turn(Chat("zeta", "hi"), Client().exchange)
        assert (refused.error, refused.message) == (
            "unknown_agent",
            "no enabled agent 'zeta'; known: alpha, beta, gamma",
        )
        assert chat.open_session(ChatOpen("zeta")) == refused
        assert chat.open_session(ChatOpen("alpha")) == Reply(ok=True, data={"agent": "alpha"})
