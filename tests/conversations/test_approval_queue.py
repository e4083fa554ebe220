"""The operator's approval queue, event by event (ADR 0042): each approval is decided
once; a yes only before its deadline; a timeout, an abandoned turn, a second answer and an
unknown id never approve anything. Then the trio shell: a waiter hears the operator's
answer, or its deadline, and every request and decision is published."""

from __future__ import annotations

import itertools

import trio
import trio.testing

from zeroclaw.bus import Origin
from zeroclaw.conversations import ApprovalQueue, Decided, NotPending, OperatorApprovals
from zeroclaw.events import ApprovalRequested, ApprovalResolved, EventSink


def queue() -> ApprovalQueue:
    ids = (f"ap-{n}" for n in itertools.count(1))
    return ApprovalQueue(lambda: next(ids))


def test_an_approval_is_pending_until_answered_and_answered_once() -> None:
    q = queue()
    a = q.ask("alpha", "webhook.ops", "bob", "write note.txt", now=10.0, timeout=5.0)
    assert (a.id, a.deadline) == ("ap-1", 15.0)
    assert q.pending() == (a,) and q.get("ap-1") == a
    assert q.answer("ap-1", True, now=11.0) == Decided(a, "approved")
    assert q.pending() == ()
    # A second answer, either way, changes nothing.
    assert q.answer("ap-1", False, now=11.5) == NotPending("ap-1")
    assert q.answer("ap-1", True, now=11.5) == NotPending("ap-1")
    assert q.close("ap-1", now=20.0) == NotPending("ap-1")


def test_a_full_queue_denies_a_new_approval_at_once() -> None:
    ids = (f"ap-{n}" for n in itertools.count(1))
    q = ApprovalQueue(lambda: next(ids), max_pending=2)
    first = q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0)
    assert first is not None
    assert q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0) is not None
    assert q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0) is None
    assert len(q.pending()) == 2
    q.answer(first.id, False, now=1.0)
    assert q.ask("alpha", "webhook.ops", "bob", "w", now=1.0, timeout=5.0) is not None


async def test_the_shell_denies_beyond_its_bound_without_waiting() -> None:
    approvals = OperatorApprovals(max_pending=0)
    assert await approvals.ask("alpha", Origin("webhook.ops", "bob"), "w", wait_secs=600) is False
    assert approvals.pending() == ()


def test_a_no_is_a_denial() -> None:
    q = queue()
    a = q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0)
    decided = q.answer(a.id, False, now=1.0)
    assert decided == Decided(a, "denied") and not decided.approved


def test_a_yes_after_the_deadline_is_a_timeout_not_an_approval() -> None:
    q = queue()
    a = q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0)
    decided = q.answer(a.id, True, now=5.0)
    assert decided == Decided(a, "timed_out") and not decided.approved


def test_expire_decides_every_due_approval_and_only_those() -> None:
    q = queue()
    first = q.ask("alpha", "webhook.ops", "bob", "w1", now=0.0, timeout=1.0)
    second = q.ask("alpha", "serial.desk", "serial:desk", "w2", now=0.0, timeout=10.0)
    assert q.expire(now=0.5) == []
    assert q.expire(now=1.0) == [Decided(first, "timed_out")]
    assert q.pending() == (second,)
    assert q.answer(first.id, True, now=1.1) == NotPending(first.id)


def test_a_waiter_that_leaves_abandons_it_before_its_deadline_and_times_it_out_after() -> None:
    q = queue()
    a = q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0)
    b = q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0)
    assert q.close(a.id, now=1.0) == Decided(a, "abandoned")
    assert q.close(b.id, now=6.0) == Decided(b, "timed_out")
    assert q.pending() == ()


def test_unknown_ids_are_not_pending_and_ids_never_collide() -> None:
    ids = iter(["same", "same", "other"])
    q = ApprovalQueue(lambda: next(ids))
    a = q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0)
    b = q.ask("alpha", "webhook.ops", "bob", "w", now=0.0, timeout=5.0)
    assert (a.id, b.id) == ("same", "other")
    assert q.answer("nope", True, now=0.0) == NotPending("nope")
    assert len(q.pending()) == 2


def published(sink: EventSink) -> list[object]:
    return [p.event for p in sink.recent()]


async def test_the_waiter_hears_the_operators_answer_and_the_events_say_so() -> None:
    sink = EventSink()
    approvals = OperatorApprovals(sink)
    origin = Origin("webhook.ops", "bob")
    results: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            results.append(await approvals.ask("alpha", origin, "write x", wait_secs=600))

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        [asked] = published(sink)
        assert isinstance(asked, ApprovalRequested)
        assert (asked.agent, asked.channel, asked.external_sender) == (
            "alpha",
            "webhook.ops",
            "bob",
        )
        [pending] = approvals.pending()
        assert pending.id == asked.id and approvals.remaining(pending) > 0
        assert isinstance(approvals.decide(asked.id, True), Decided)
        assert isinstance(approvals.decide(asked.id, False), NotPending)
    assert results == [True]
    assert published(sink) == [
        asked,
        ApprovalResolved(asked.id, "alpha", "webhook.ops", "approved"),
    ]
    assert approvals.pending() == ()


async def test_no_answer_by_the_deadline_is_a_denial(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sink = EventSink()
    approvals = OperatorApprovals(sink)
    approved = await approvals.ask("alpha", Origin("webhook.ops", "bob"), "w", wait_secs=30)
    asked, resolved = published(sink)
    assert approved is False and approvals.pending() == ()
    assert isinstance(asked, ApprovalRequested)
    assert resolved == ApprovalResolved(asked.id, "alpha", "webhook.ops", "timed_out")


async def test_a_cancelled_wait_abandons_the_approval() -> None:
    approvals = OperatorApprovals()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: approvals.ask("alpha", Origin("webhook.ops", "bob"), "w", wait_secs=600)
        )
        await trio.testing.wait_all_tasks_blocked()
        [pending] = approvals.pending()
        nursery.cancel_scope.cancel()
    assert approvals.pending() == ()
    assert isinstance(approvals.decide(pending.id, True), NotPending)


def test_one_sender_or_channel_gets_only_its_share_of_the_queue() -> None:
    ids = (f"ap-{n}" for n in itertools.count(1))
    q = ApprovalQueue(lambda: next(ids), max_pending=10, max_per_sender=2, max_per_channel=5)

    def ask(channel: str, sender: str) -> object:
        return q.ask("alpha", channel, sender, "w", now=0.0, timeout=5.0)

    assert ask("webhook.ops", "mallory") and ask("webhook.ops", "mallory")
    assert ask("webhook.ops", "mallory") is None  # its share is taken, not the queue
    assert ask("webhook.ops", "alice") is not None
    assert ask("webhook.ci", "mallory") is not None  # a sender is one per channel
    # many names on one channel take at most the channel's share
    assert ask("webhook.ops", "m1") and ask("webhook.ops", "m2")
    assert ask("webhook.ops", "m3") is None
    assert ask("serial.desk", "serial:desk") is not None
    # an answer gives the place back
    first = q.pending()[0]
    q.answer(first.id, False, now=1.0)
    assert ask("webhook.ops", "mallory") is not None
