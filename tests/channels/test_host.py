"""The channel host on a real router and turn service with alpha as a real agent runtime:
an inbound message reaches its owner and the reply comes back; a refused sender never
reaches an agent; an approval nobody gives in time is a denial."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from tests.conftest import PATIENCE
from tests.conversations.helpers import bench
from zeroclaw.channels import ChannelAnswer, ChannelHost, ChannelRefused, Inbound
from zeroclaw.events import EventSink, Published


@asynccontextmanager
async def aclosing_subscription(sink: EventSink) -> AsyncIterator[AsyncIterator[Published]]:
    with sink.subscribe() as subscription:
        iterator = aiter(subscription)
        try:
            yield iterator
        finally:
            await iterator.aclose()  # type: ignore[attr-defined]


def with_webhook(doc: dict[str, Any]) -> None:
    doc["channels"]["webhook"] = {"ops": {"listen": "127.0.0.1:8787", "secret_env": "HOOK_KEY"}}
    doc["agents"]["alpha"]["channels"] = ["cli.local", "webhook.ops"]
    doc["peer_groups"]["hooks"] = {
        "channel": "webhook.ops",
        "agents": ["alpha"],
        "external_peers": ["bob", "mallory"],
        "ignore": ["mallory"],
        # The sender's own approval path is what these tests pin: granted explicitly
        # (the default sends no tool and every approval to the operator, ADR 0042).
        "tools": ["file_write"],
        "approvals": "sender",
    }


async def test_an_accepted_sender_gets_the_owners_reply(tmp_path: Path) -> None:
    async with bench(tmp_path, configure=with_webhook) as b:
        await b.agent(tmp_path)
        host = ChannelHost(b.service, lambda: b.router.policy)
        outcome = await host.converse(Inbound("webhook.ops", "@Bob", "hello"))
    assert isinstance(outcome, ChannelAnswer) and outcome.agent == "alpha"
    assert "alpha" in outcome.reply


async def test_refused_senders_and_targets_never_reach_an_agent(tmp_path: Path) -> None:
    async with bench(tmp_path, configure=with_webhook) as b:
        runtime = await b.agent(tmp_path)
        host = ChannelHost(b.service, lambda: b.router.policy)
        cases = {
            "sender_ignored": Inbound("webhook.ops", "mallory", "hi"),
            "sender_not_accepted": Inbound("webhook.ops", "carol", "hi"),
            "unknown_channel": Inbound("webhook.nope", "bob", "hi"),
            "agent_not_bound": Inbound("webhook.ops", "bob", "hi", agent="beta"),
            "unknown_agent": Inbound("webhook.ops", "bob", "hi", agent="zed"),
        }
        for code, inbound in cases.items():
            outcome = await host.converse(inbound)
            assert isinstance(outcome, ChannelRefused) and outcome.code == code, outcome
        assert runtime.busy.count == 0
        refused_here = dict.fromkeys(set(cases) - {"unknown_channel"}, 1)
        assert host.counts(("webhook.ops",)) == (0, refused_here)
        assert host.counts(("webhook.nope",)) == (0, {"unknown_channel": 1})
        assert b.service.turns == {}


async def test_an_approval_not_given_in_time_is_a_denial(tmp_path: Path) -> None:
    asked: list[str] = []

    async def never_answers(rid: str, what: str) -> bool:
        asked.append(what)
        await trio.sleep_forever()
        raise AssertionError

    async with bench(tmp_path, configure=with_webhook) as b:
        await b.agent(tmp_path)
        host = ChannelHost(b.service, lambda: b.router.policy, approval_timeout=0.2)
        outcome = await host.converse(
            Inbound("webhook.ops", "bob", "write note.txt: hi"), ask=never_answers
        )
    assert isinstance(outcome, ChannelAnswer), outcome
    assert asked and [c.error_code for c in outcome.tool_calls] == ["approval_denied"]


async def test_the_agents_own_approval_timeout_bounds_the_channels_question(
    tmp_path: Path,
) -> None:
    async def never_answers(rid: str, what: str) -> bool:
        await trio.sleep_forever()
        raise AssertionError

    async with bench(tmp_path, configure=with_webhook) as b:
        runtime = await b.agent(tmp_path)
        runtime.engine.approval_timeout = 0.2  # the profile's approval_timeout_secs
        host = ChannelHost(b.service, lambda: b.router.policy, approval_timeout=3600)
        with trio.fail_after(PATIENCE):
            outcome = await host.converse(
                Inbound("webhook.ops", "bob", "write note.txt: hi"), ask=never_answers
            )
    assert isinstance(outcome, ChannelAnswer), outcome
    assert [c.error_code for c in outcome.tool_calls] == ["approval_denied"]


async def test_an_outside_origins_approval_goes_to_the_operator_never_to_the_sender(
    tmp_path: Path,
) -> None:
    from zeroclaw.conversations import Decided, OperatorApprovals
    from zeroclaw.events import ApprovalRequested

    def operator_answers(doc: dict[str, Any]) -> None:
        with_webhook(doc)
        del doc["peer_groups"]["hooks"]["approvals"]  # the default: the operator answers

    sender_asked: list[str] = []

    async def sender_says_yes(rid: str, what: str) -> bool:
        sender_asked.append(what)
        return True

    async with bench(tmp_path, configure=operator_answers) as b:
        await b.agent(tmp_path)
        sink = EventSink()
        queue = OperatorApprovals(sink)
        host = ChannelHost(b.service, lambda: b.router.policy, approvals=queue)
        outcomes: list[Any] = []
        async with trio.open_nursery() as nursery, aclosing_subscription(sink) as events:

            async def converse(text: str) -> None:
                inbound = Inbound("webhook.ops", "bob", text)
                outcomes.append(await host.converse(inbound, ask=sender_says_yes))

            nursery.start_soon(converse, "write note.txt: hi")
            async for published in events:  # the queue says when the agent asked
                if isinstance(published.event, ApprovalRequested):
                    break
            [pending] = queue.pending()
            assert (pending.agent, pending.channel, pending.sender) == (
                "alpha",
                "webhook.ops",
                "bob",
            )
            assert isinstance(queue.decide(pending.id, False), Decided)
        # Without the queue nobody answers: denied, and still never asked of the sender.
        host_without = ChannelHost(b.service, lambda: b.router.policy)
        outcomes.append(
            await host_without.converse(
                Inbound("webhook.ops", "bob", "write other.txt: hi"), ask=sender_says_yes
            )
        )
    assert sender_asked == []
    for outcome in outcomes:
        assert isinstance(outcome, ChannelAnswer), outcome
        assert [c.error_code for c in outcome.tool_calls] == ["approval_denied"]
