"""The turn service driven directly: a real router, a real agent runtime or a hand-built
client with an agent's keys, no control socket."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.bodies import raw
from tests.conversations.helpers import bench, read_all
from zeroclaw._ops import decode_body
from zeroclaw.bus import AgentBus, Origin, Request, Response
from zeroclaw.conversations import AgentDown, TurnCancelled, TurnOverflow, TurnRefused
from zeroclaw.turns import (
    TURN_SERVICE,
    ApprovalAnswer,
    ApprovalAsked,
    ApprovalQuestion,
    ContextArgs,
    ContextTurn,
    Delta,
    MemoryContext,
    PrefetchedContext,
    ToolUsed,
    TurnCancel,
    TurnDone,
    TurnEventPost,
    TurnInput,
    context_id,
)

CLI = Origin("cli.local")


def post(bus: AgentBus, body: object, op: str = "event") -> None:
    bus.send_frame(Request(id=bus.new_id(), service=TURN_SERVICE, op=op, body=raw(body)))


async def test_a_turn_streams_the_agents_events_and_ends_with_its_done(
    root: Path, tmp_path: Path
) -> None:
    async with bench(root) as b:
        await b.agent(tmp_path)
        async with b.service.open_turn("alpha", "hello", session="s", origin=CLI) as turn:
            events = await read_all(turn)
    *deltas, done = events
    assert deltas and all(isinstance(e, Delta) for e in deltas)
    assert isinstance(done, TurnDone) and done.reply.startswith("Hello, I am alpha")
    assert "".join(e.text for e in deltas if isinstance(e, Delta)) == done.reply


async def test_an_approval_is_answered_once_and_only_if_pending(root: Path, tmp_path: Path) -> None:
    async with bench(root) as b:
        await b.agent(tmp_path)
        async with b.service.open_turn(
            "alpha", "write notes.txt: hi", session="s", origin=CLI, interactive=True
        ) as turn:
            events = turn.events()
            asked = await anext(events)
            assert isinstance(asked, ApprovalAsked) and asked.what == "write notes.txt"
            assert turn.pending_approvals == (asked.rid,)
            assert not turn.answer_approval("not-asked", True)
            assert turn.answer_approval(asked.rid, True)
            assert not turn.answer_approval(asked.rid, True)  # already answered
            rest = [e async for e in events]
    assert (tmp_path / "ws" / "notes.txt").read_text() == "hi"
    assert rest[0] == ToolUsed("file_write", {"path": "notes.txt", "content": "hi"}, True, None)
    assert isinstance(rest[-1], TurnDone) and rest[-1].tool_calls[0].ok


async def test_a_cancelled_turn_ends_with_the_agents_cancelled_done(
    root: Path, tmp_path: Path
) -> None:
    async with bench(root) as b:
        runtime = await b.agent(tmp_path)
        async with b.service.open_turn(
            "alpha", "write notes.txt: hi", session="s", origin=CLI, interactive=True
        ) as turn:
            events = turn.events()
            assert isinstance(await anext(events), ApprovalAsked)  # the agent waits on it
            turn.cancel()
            rest = [e async for e in events]
        assert rest == [TurnDone("", cancelled=True)]
        assert runtime.chats == {}
    assert (tmp_path / "ws" / "notes.txt").read_text() == "the plan is to ship"


async def test_a_cancel_the_agent_does_not_confirm_ends_after_the_grace(root: Path) -> None:
    async with bench(root, cancel_grace=0.0) as b:
        _, inbox = await b.client("alpha")  # it never answers
        async with b.service.open_turn("alpha", "hi", session=None, origin=CLI) as turn:
            chat = await inbox.receive()
            turn.cancel()
            assert await read_all(turn) == [TurnCancelled()]
            cancel = await inbox.receive()
    assert decode_body(chat.body, TurnInput) == TurnInput("hi", budgeted=False)  # no budgets here
    assert cancel.kind == "cancel" and decode_body(cancel.body, TurnCancel).turn == chat.id


async def test_leaving_a_turn_early_cancels_the_agents_work_and_denies_its_approvals(
    root: Path,
) -> None:
    async with bench(root) as b:
        alpha, inbox = await b.client("alpha")
        answered = trio.Event()
        answers: list[Response] = []

        async def ask(turn_id: str) -> None:
            question = ApprovalQuestion(turn_id, "write x")
            answers.append(await alpha.request(TURN_SERVICE, "approve", question))
            answered.set()

        async with b.service.open_turn("alpha", "hi", session=None, origin=CLI) as turn:
            chat = await inbox.receive()
            b.nursery.start_soon(ask, chat.id)
            assert isinstance(await anext(turn.events()), ApprovalAsked)
        cancel = await inbox.receive()
        await answered.wait()
    assert decode_body(cancel.body, TurnCancel).turn == chat.id
    assert decode_body(answers[0].body, ApprovalAnswer) == ApprovalAnswer(False)


async def test_only_the_addressed_agent_speaks_into_a_turn(root: Path) -> None:
    async with bench(root) as b:
        alpha, inbox = await b.client("alpha")
        beta, _ = await b.client("beta")
        async with b.service.open_turn("alpha", "hi", session=None, origin=CLI) as turn:
            turn_id = (await inbox.receive()).id
            post(beta, TurnEventPost(turn_id, Delta("spoofed")))
            post(beta, TurnEventPost(turn_id, TurnDone("spoofed")))
            # An approval question waits for its answer: beta's frames before it were taken.
            refused = await beta.request(TURN_SERVICE, "approve", ApprovalQuestion(turn_id, "x"))
            assert (refused.ok, refused.error) == (False, "unknown_turn")
            post(alpha, {"turn": turn_id, "event": {"event": "exec", "cmd": "x"}})
            post(alpha, "not a post")
            post(alpha, TurnEventPost(turn_id, Delta("real")))
            post(alpha, TurnEventPost(turn_id, TurnDone("real")))
            assert await read_all(turn) == [Delta("real"), TurnDone("real")]
    assert b.service.spoofed == 3
    assert b.service.malformed == 2


async def test_a_turn_that_outruns_its_reader_is_cut_off_and_cancelled(root: Path) -> None:
    async with bench(root, max_buffered=5) as b:
        alpha, inbox = await b.client("alpha")
        async with b.service.open_turn("alpha", "hi", session=None, origin=CLI) as turn:
            turn_id = (await inbox.receive()).id
            for i in range(10):
                post(alpha, TurnEventPost(turn_id, Delta(str(i))))
            post(alpha, TurnEventPost(turn_id, TurnDone("late")))
            cancel = await inbox.receive()  # the service stopped the agent's work
            assert cancel.kind == "cancel"
            # Its question comes after every event on alpha's socket: all were taken.
            answer = await alpha.request(TURN_SERVICE, "approve", ApprovalQuestion(turn_id, "x"))
            assert decode_body(answer.body, ApprovalAnswer) == ApprovalAnswer(False)
            events = await read_all(turn)
    assert events == [*(Delta(str(i)) for i in range(5)), TurnOverflow(5)]


async def test_an_agent_that_exits_ends_its_turns(root: Path) -> None:
    async with bench(root) as b:
        _, inbox = await b.client("alpha")
        async with b.service.open_turn("alpha", "hi", session=None, origin=CLI) as turn:
            await inbox.receive()
            b.router.agent_down("alpha")
            assert await read_all(turn) == [AgentDown()]


async def test_a_turn_for_an_unknown_or_stopped_agent_is_refused(root: Path) -> None:
    async with bench(root) as b:
        async with b.service.open_turn("zeta", "hi", session=None, origin=CLI) as turn:
            (refused,) = await read_all(turn)
        assert isinstance(refused, TurnRefused) and refused.code == "unknown_agent"
        assert "known: alpha, beta, gamma" in refused.detail
        async with b.service.open_turn("gamma", "hi", session=None, origin=CLI) as turn:
            (refused,) = await read_all(turn)
        assert isinstance(refused, TurnRefused) and refused.code == "unavailable"
        assert b.service.turns == {}


async def test_the_turns_session_is_the_daemons_key_inside_its_origin(root: Path) -> None:
    async with bench(root) as b:
        _, inbox = await b.client("alpha")
        sessions = []
        for session in (None, "default", "work"):
            async with b.service.open_turn("alpha", "hi", session=session, origin=CLI):
                while (delivered := await inbox.receive()).kind != "chat":
                    pass  # the previous turn's cancel
                sessions.append(delivered.session)
    # The operator keeps its names; `default` when it gives none.
    assert sessions == ["default", "default", "work"]


async def test_a_chat_turns_context_follows_its_message_unless_too_large(root: Path) -> None:
    """ADR 0068: the chat message says its context follows; the reader's context, read for
    the daemon's session key and the turn's grant, comes behind it as the Response the
    agent expects; one that would crowd the bus frame comes as a refusal (the agent asks
    memory), and a sub-agent invocation's input is told of none."""
    asked: list[tuple[str, str, str, tuple[str, ...] | None]] = []
    size = {"content": "x"}

    async def reader(
        agent: str, session: str, text: str, tools: tuple[str, ...] | None
    ) -> PrefetchedContext:
        asked.append((agent, session, text, tools))
        turn = ContextTurn(1, "assistant", size["content"], 0.0)
        return PrefetchedContext(ContextArgs(session=session), MemoryContext([turn], last_seq=1))

    async with bench(root, context=reader) as b:
        bus, inbox = await b.client("alpha")
        told, followed = [], []
        for content, given in (("x", None), ("y" * (1 << 20), None), ("x", {"task": 1})):
            size["content"] = content
            async with b.service.open_turn(
                "alpha", "hi", session="work", origin=CLI, input=given
            ):
                while (delivered := await inbox.receive()).kind != "chat":
                    pass  # the previous turn's cancel
                chat = decode_body(delivered.body, TurnInput)
                told.append(chat.context_follows)
                if chat.context_follows:
                    followed.append(await bus.expect(context_id(delivered.id), wait_secs=30))
    assert told == [True, True, False]
    small, large = followed
    assert small is not None and small.ok
    context = decode_body(small.body, PrefetchedContext)
    assert context.found.turns[0].content == "x" and context.args.session == "work"
    assert large is not None and not large.ok
    assert asked == [("alpha", "work", "hi", None)] * 2
