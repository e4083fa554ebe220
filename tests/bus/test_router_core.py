"""The router's core without sockets or a daemon: a fake clock, frames in, actions out."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import (
    DAEMON_SENDER,
    EMPTY_BODY,
    MAX_DELEGATION_DEPTH,
    Message,
    Origin,
    Request,
    session_key,
)
from zeroclaw.bus._router_core import (
    PENDING_START_LIMIT,
    SEEN_QUESTIONS_LIMIT,
    Action,
    AgentJoined,
    CallService,
    Forward,
    InjectOutcome,
    Refuse,
    RequestStart,
    Respond,
    RouterCore,
    SendAck,
    Traffic,
)
from zeroclaw.bus._wire import SalvagedIds
from zeroclaw.config import Config, validate_document

ROOT = Path("/nonexistent/zeroclaw-core-test")
AGENTS = ("alpha", "beta", "gamma", "lazy")
TIMEOUT = 5.0


def config(*, gamma_in_group: bool = True, **agents: dict[str, Any]) -> Config:
    members = ["alpha", "beta", "lazy", *(["gamma"] if gamma_in_group else [])]
    doc = make_config(
        ROOT,
        {
            "alpha": agent_entry(delegates=["beta"]),
            "beta": agent_entry(),
            "gamma": agent_entry(),
            "lazy": agent_entry(runtime_profile="lazy"),
            **agents,
        },
        groups={"all": {"channel": "cli", "agents": members}},
        extra_profiles={"lazy": {"activation": "on-demand", "idle_stop_secs": 60}},
    )
    doc["daemon"]["delivery_timeout_secs"] = TIMEOUT
    return validate_document(doc)


CONFIG = config()
RELOADED = config(gamma_in_group=False)
OPERATOR = Origin.operator()
SENDER = Origin("webhook.ops", "ci-bot")  # an outside sender's chat


def message(
    id: str, to: str, kind: Any = "message", body: Any = None, channel: str = "cli.local"
) -> Message:
    raw = msgspec.Raw(msgspec.msgpack.encode(body))  # whatever a test's sender claims
    return Message(id=id, to=to, channel=channel, body=raw, sent_at=0.0, kind=kind)


def connected_core(*aliases: str, cfg: Config = CONFIG) -> RouterCore:
    core = RouterCore(cfg, frozenset({"memory"}))
    for alias in aliases:
        core.hello(alias, alias.encode(), 100, 0.0)
    core.take()
    return core


def only(actions: list[Action], kind: type[Any]) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


# --- exactly one outcome per send ---------------------------------------------------------


class OneOutcomePerSend(RuleBasedStateMachine):
    """Any interleaving of sends, injections, acks, replies, exits, starts, reloads and
    deadlines ends every send in exactly one outcome (ADR 0005)."""

    def __init__(self) -> None:
        super().__init__()
        self.core = RouterCore(CONFIG, frozenset({"memory"}))
        self.now = 0.0
        self.ids = itertools.count()
        self.generation = itertools.count()
        self.senders: dict[str, str] = {}  # message id -> sender
        self.outcomes: Counter[str] = Counter()
        self.lost_questions: Counter[str] = Counter()
        self.acked_questions: set[str] = set()
        self.deliveries: dict[bytes, list[int]] = {}  # conn -> rids delivered to it
        self.conns: dict[str, bytes] = {}
        self.refuse_starts = False
        self.questions: set[str] = set()

    def run(self) -> None:
        """Execute what the core decided, as the router would, recording outcomes."""
        for action in self.core.take():
            if isinstance(action, Forward):
                self.deliveries.setdefault(action.conn, []).append(action.frame.rid)
                message = action.frame.message
                assert message is not None and message.from_ == self.senders[message.id]
                if message.kind in ("ask", "delegate") and message.from_ != DAEMON_SENDER:
                    assert 1 <= message.depth < MAX_DELEGATION_DEPTH
            elif isinstance(action, SendAck):
                for message_id in action.ids:
                    self.outcomes[message_id] += 1
                    if message_id in self.questions:
                        self.acked_questions.add(message_id)
            elif isinstance(action, Refuse):
                assert action.sender == self.senders.get(action.message_id, action.sender)
                if action.after_ack:
                    self.lost_questions[action.message_id] += 1
                else:
                    self.outcomes[action.message_id] += 1
            elif isinstance(action, InjectOutcome):
                self.outcomes[action.message_id] += 1
            elif isinstance(action, RequestStart) and self.refuse_starts:
                self.core.start_refused(action.alias)
                self.run()

    def new_id(self, sender: str) -> str:
        message_id = f"m{next(self.ids)}"
        self.senders[message_id] = sender
        return message_id

    @rule(
        sender=st.sampled_from(AGENTS),
        to=st.sampled_from((*AGENTS, "nobody")),
        kind=st.sampled_from(["message", "probe", "ask", "delegate", "reply"]),
        channel=st.sampled_from(["cli.local", "", "cli.elsewhere"]),
    )
    def send(self, sender: str, to: str, kind: Any, channel: str) -> None:
        body = None
        if kind == "reply" and self.acked_questions:
            body = {"in_reply_to": sorted(self.acked_questions)[0]}
        message_id = self.new_id(sender)
        if kind in ("ask", "delegate"):
            self.questions.add(message_id)
        self.core.send(sender, message(message_id, to, kind, body, channel), self.now)
        self.run()

    @rule(
        to=st.sampled_from((*AGENTS, "nobody")),
        origin=st.sampled_from([Origin("cli"), Origin("cli.local"), Origin("webhook.x", "bob")]),
    )
    def inject(self, to: str, origin: Origin) -> None:
        self.core.inject(
            message(self.new_id(DAEMON_SENDER), to, "chat", {"text": "hi"}), origin, self.now
        )
        self.run()

    @rule(alias=st.sampled_from(AGENTS))
    def hello(self, alias: str) -> None:
        conn = f"{alias}-{next(self.generation)}".encode()
        self.conns[alias] = conn
        self.core.hello(alias, conn, 1, self.now)
        self.run()

    @rule(alias=st.sampled_from(AGENTS))
    def agent_down(self, alias: str) -> None:
        self.core.agent_down(alias)
        self.run()

    @rule(alias=st.sampled_from(AGENTS), data=st.data())
    def ack(self, alias: str, data: st.DataObject) -> None:
        conn = self.conns.get(alias)
        rids = self.deliveries.get(conn, []) if conn is not None else []
        chosen = data.draw(st.lists(st.sampled_from(rids), max_size=5)) if rids else []
        stray = data.draw(st.lists(st.integers(0, 50), max_size=2))
        self.core.ack(alias, (*chosen, *stray))
        self.run()

    @rule()
    def flush_acks(self) -> None:
        self.core.flush_acks()
        self.run()

    @rule(data=st.data())
    def dropped(self, data: st.DataObject) -> None:
        conns = sorted(self.deliveries)
        if not conns:
            return
        conn = data.draw(st.sampled_from(conns))
        rid = data.draw(st.sampled_from([None, *self.deliveries[conn]]))
        self.core.dropped(conn, rid, "peer gone")
        self.run()

    @rule(alias=st.sampled_from(AGENTS))
    def start_failed(self, alias: str) -> None:
        self.core.start_failed(alias, "it is fatal")
        self.run()

    @rule(refuse=st.booleans())
    def starts_refused(self, refuse: bool) -> None:
        self.refuse_starts = refuse

    @rule(reloaded=st.booleans())
    def reload(self, reloaded: bool) -> None:
        self.core.update_config(RELOADED if reloaded else CONFIG)

    @rule(seconds=st.sampled_from([0.5, 2.0, TIMEOUT, 2 * TIMEOUT]))
    def tick(self, seconds: float) -> None:
        self.now += seconds
        if self.core.next_deadline() <= self.now:
            self.core.on_deadline(self.now)
        self.run()

    @invariant()
    def at_most_one_outcome(self) -> None:
        assert all(n == 1 for n in self.outcomes.values()), self.outcomes.most_common(3)
        assert all(n == 1 for n in self.lost_questions.values())

    def teardown(self) -> None:
        for alias in AGENTS:
            self.core.agent_down(alias)
        self.core.flush_acks()
        self.run()
        self.now += 2 * TIMEOUT
        self.core.on_deadline(self.now)
        self.run()
        missing = [m for m in self.senders if self.outcomes[m] != 1]
        assert not missing, f"sends without exactly one outcome: {missing}"
        assert self.core.next_deadline() == float("inf")


TestOneOutcomePerSend = OneOutcomePerSend.TestCase
TestOneOutcomePerSend.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


# --- the router decides delegation and depth (ADR 0018) --------------------------------------


def test_a_delegation_outside_the_senders_delegates_is_refused() -> None:
    core = connected_core("alpha", "beta", "gamma")
    core.send("alpha", message("d1", "gamma", "delegate", {"text": "x"}), 0.0)
    core.send("alpha", message("d2", "beta", "delegate", {"text": "x"}), 0.0)
    actions = core.take()
    [refused] = only(actions, Refuse)
    assert (refused.message_id, refused.code) == ("d1", "delegation_not_allowed")
    [forward] = only(actions, Forward)
    assert forward.frame.message.id == "d2"
    assert core.counters["delegation_not_allowed"] == 1


def test_an_ask_to_anyone_needs_no_delegation() -> None:
    core = connected_core("alpha", "gamma")
    core.send("alpha", message("a1", "gamma", "ask", {"text": "x"}), 0.0)
    assert only(core.take(), Forward)


def ask(core: RouterCore, sender: str, to: str, question: str, claimed: int = 0) -> Action:
    """`sender` asks `to`, claiming `claimed` in the body; `to` acks. The core's decision."""
    core.send(sender, message(question, to, "ask", {"text": "x", "depth": claimed}), 0.0)
    [decision] = [a for a in core.take() if isinstance(a, Forward | Refuse)]
    if isinstance(decision, Forward):
        core.ack(to, (decision.frame.rid,))
        core.flush_acks()
        core.take()
    return decision


def test_the_depth_is_the_routers_count_not_the_body() -> None:
    core = connected_core("alpha", "beta", "gamma")
    first = ask(core, "alpha", "beta", "q1")
    second = ask(core, "beta", "gamma", "q2", claimed=-5)
    third = ask(core, "gamma", "alpha", "q3", claimed=0)
    assert isinstance(first, Forward) and first.frame.message.depth == 1
    assert isinstance(second, Forward) and second.frame.message.depth == 2
    assert isinstance(third, Refuse) and third.code == "depth_exceeded"
    assert MAX_DELEGATION_DEPTH == 3


def test_a_question_not_acked_yet_counts_for_the_depth() -> None:
    core = connected_core("alpha", "beta", "gamma")
    core.send("alpha", message("q1", "beta", "ask", {"text": "x"}), 0.0)
    core.take()  # delivered to beta, which asks on before it acks
    second = ask(core, "beta", "gamma", "q2")
    assert isinstance(second, Forward) and second.frame.message.depth == 2


def test_answering_a_question_ends_its_depth() -> None:
    core = connected_core("alpha", "beta", "gamma")
    ask(core, "alpha", "beta", "q1")
    core.send("beta", message("r1", "alpha", "reply", {"in_reply_to": "q1"}), 0.0)
    core.take()
    again = ask(core, "beta", "gamma", "q2")
    assert isinstance(again, Forward) and again.frame.message.depth == 1


def test_the_router_stamps_sender_and_depth_over_what_a_sender_claims() -> None:
    core = connected_core("alpha", "beta")
    forged = Message(
        id="m", to="beta", channel="cli.local", body=EMPTY_BODY, sent_at=0.0, from_="beta", depth=7
    )
    core.send("alpha", forged, 0.0)
    [forward] = only(core.take(), Forward)
    assert (forward.frame.message.from_, forward.frame.message.depth) == ("alpha", 0)


@pytest.mark.parametrize("claimed", [None, "default", "peer:gamma/default", "webhook.x:bob/d"])
def test_the_router_names_a_peers_session_inside_the_askers_namespace(
    claimed: str | None,
) -> None:
    core = connected_core("alpha", "beta")
    for kind in ("ask", "message"):
        sent = Message(
            id=f"m-{kind}",
            to="beta",
            channel="cli.local",
            body=EMPTY_BODY,
            sent_at=0.0,
            kind=kind,
            session=claimed,
        )
        core.send("alpha", sent, 0.0)
    ask, plain = (f.frame.message for f in only(core.take(), Forward))
    # the asker's turn's session names one of the asker's own, in the peer namespace
    assert ask.session == session_key(Origin.peer("alpha"), claimed)
    assert ask.session.startswith("peer:alpha/")
    assert plain.session is None
    core.inject(message("c1", "beta", "chat"), Origin("cli"), 0.0)
    injected = msgspec.structs.replace(message("c2", "beta", "chat"), session="webhook.x:b/d")
    core.inject(injected, Origin("cli"), 0.0)
    daemon = [f.frame.message.session for f in only(core.take(), Forward)]
    assert daemon == [None, "webhook.x:b/d"]  # the daemon's own word stands


def test_an_exited_callee_refuses_its_open_questions_after_their_ack() -> None:
    core = connected_core("alpha", "beta")
    ask(core, "alpha", "beta", "q1")
    core.agent_down("beta")
    [lost] = only(core.take(), Refuse)
    assert (lost.message_id, lost.code, lost.after_ack) == ("q1", "unavailable", True)


# --- the origin of an injected conversation ----------------------------------------------------


def origin_config() -> Config:
    doc = make_config(
        ROOT,
        {
            "alpha": agent_entry(channels=["cli.local", "webhook.ops"]),
            "beta": agent_entry(channels=["cli.local"]),
        },
        groups={
            "hooks": {
                "channel": "webhook",
                "agents": ["alpha"],
                "external_peers": ["@Bob", "mallory"],
                "ignore": ["mallory"],
            }
        },
    )
    doc["channels"]["webhook"] = {"ops": {"listen": "127.0.0.1:8787", "secret_env": "HOOK_KEY"}}
    return validate_document(doc)


@pytest.mark.parametrize(
    ("to", "origin", "rule"),
    [
        ("alpha", Origin("cli"), None),
        ("alpha", Origin("cli.local"), None),
        ("alpha", Origin("webhook.ops"), "operator_off_cli"),
        ("alpha", Origin("webhook.ops", "bob"), None),
        ("alpha", Origin("webhook.ops", "@BOB"), None),
        ("alpha", Origin("webhook.ops", "mallory"), "sender_ignored"),
        ("alpha", Origin("webhook.ops", "carol"), "sender_not_accepted"),
        ("beta", Origin("webhook.ops", "bob"), "not_owner"),
        ("alpha", Origin("webhook.nowhere", "bob"), "not_owner"),
    ],
)
def test_an_injected_conversation_is_admitted_by_its_origin(
    to: str, origin: Origin, rule: str | None
) -> None:
    core = connected_core("alpha", "beta", cfg=origin_config())
    core.inject(message("c1", to, "chat", {"text": "hi"}), origin, 0.0)
    actions = core.take()
    if rule is None:
        [forward] = only(actions, Forward)
        assert forward.frame.message.from_ == DAEMON_SENDER
    else:
        [outcome] = only(actions, InjectOutcome)
        assert outcome.code == "origin_not_allowed"
        assert core.counters[f"origin_refused.{rule}"] == 1
        assert core.stats().outcomes["origin_not_allowed"] == 1


# --- delivery, start, services -----------------------------------------------------------------


def test_a_message_for_an_on_demand_agent_waits_for_its_hello() -> None:
    core = connected_core("alpha")
    core.send("alpha", message("m1", "lazy"), 0.0)
    assert only(core.take(), RequestStart) == [RequestStart("lazy")]
    core.send("alpha", message("m2", "lazy"), 0.1)
    assert core.take() == []  # one start request per queue
    core.hello("lazy", b"lazy", 42, 1.0)
    actions = core.take()
    assert [f.frame.message.id for f in only(actions, Forward)] == ["m1", "m2"]
    assert only(actions, Traffic) and only(actions, AgentJoined) == [AgentJoined("lazy", 42)]


def test_a_start_the_supervisor_refuses_ends_what_waits_as_unavailable() -> None:
    core = connected_core("alpha")
    core.send("alpha", message("m1", "lazy"), 0.0)
    core.take()
    core.start_refused("lazy")
    [refused] = only(core.take(), Refuse)
    assert (refused.code, refused.detail) == ("unavailable", "agent 'lazy' is not running")


def test_waiting_for_a_start_times_out_and_is_bounded() -> None:
    core = connected_core("alpha")
    for i in range(PENDING_START_LIMIT + 1):
        core.send("alpha", message(f"m{i}", "lazy"), 0.0)
    [full] = only(core.take(), Refuse)
    assert (full.message_id, full.code) == (f"m{PENDING_START_LIMIT}", "unavailable")
    assert core.next_deadline() == TIMEOUT
    core.on_deadline(TIMEOUT)
    assert {r.code for r in only(core.take(), Refuse)} == {"timeout"}
    assert core.next_deadline() == float("inf")


def test_no_ack_in_time_is_a_timeout_and_a_late_ack_is_stray() -> None:
    core = connected_core("alpha", "beta")
    core.send("alpha", message("m1", "beta"), 10.0)
    [forward] = only(core.take(), Forward)
    assert core.next_deadline() == 10.0 + TIMEOUT
    core.on_deadline(10.0 + TIMEOUT)
    [refused] = only(core.take(), Refuse)
    assert refused.code == "timeout"
    core.ack("beta", (forward.frame.rid,))
    core.flush_acks()
    assert core.take() == [] and core.counters["stray_acks"] == 1


def test_acks_are_batched_per_sender_until_the_burst_ends() -> None:
    core = connected_core("alpha", "beta")
    for i in range(3):
        core.send("alpha", message(f"m{i}", "beta"), 0.0)
    rids = tuple(f.frame.rid for f in only(core.take(), Forward))
    core.ack("beta", rids)
    assert core.take() == []
    core.flush_acks()
    assert core.take() == [SendAck(b"alpha", ("m0", "m1", "m2"))]


def test_services_known_to_the_core_are_called_and_others_answered() -> None:
    core = connected_core("alpha")
    known = Request(id="r1", service="memory", op="recall")
    core.request("alpha", known)
    core.request("alpha", Request(id="r2", service="nope"))
    call, respond = core.take()
    assert call == CallService("memory", "alpha", known)
    assert isinstance(respond, Respond) and respond.response.error == "unknown_service"


def test_an_injected_message_over_the_frame_limit_is_too_large() -> None:
    core = connected_core("alpha")
    core.inject(message("c1", "alpha", "chat", "x" * (2 * core.max_frame)), Origin("cli"), 0.0)
    [outcome] = only(core.take(), InjectOutcome)
    assert outcome.code == "too_large"


def test_a_salvaged_id_of_a_bad_frame_is_refused_and_counted_once() -> None:
    core = connected_core("alpha")
    core.bad_frame("alpha", "malformed", SalvagedIds("m1", None), "broken")
    core.bad_frame("alpha", "malformed", SalvagedIds(None, None), "broken")
    [refused] = only(core.take(), Refuse)
    assert refused.message_id == "m1" and core.counters["malformed"] == 2


def test_a_request_that_cannot_be_read_is_answered_when_its_id_can_be() -> None:
    # Its caller waits for a response by id: without one it waited out its own timeout.
    core = connected_core("alpha")
    core.bad_frame("alpha", "malformed", SalvagedIds(None, "r1"), "nested too deeply")
    [respond] = only(core.take(), Respond)
    assert (respond.response.id, respond.response.ok, respond.response.error) == (
        "r1",
        False,
        "malformed",
    )
    assert core.counters["malformed"] == 1


# --- confined identities: sub-agent runtimes (issue 12) ------------------------------------

RUNTIME = "sub:summarizer@0123456789ab"


def confined_core() -> RouterCore:
    core = RouterCore(CONFIG, frozenset({"memory", "chat"}), confined_services=frozenset({"chat"}))
    core.confine(RUNTIME)
    core.hello("alpha", b"alpha", 100, 0.0)
    core.take()
    return core


def test_a_confined_identity_starts_at_the_daemons_first_message_and_then_gets_it() -> None:
    core = confined_core()
    core.inject(message("i1", RUNTIME, "chat", {"text": "task"}), Origin("subagent"), 0.0)
    assert core.take() == [RequestStart(RUNTIME)]
    core.hello(RUNTIME, b"rt", 200, 0.1)
    forwards = only(core.take(), Forward)
    assert [f.frame.message.id for f in forwards] == ["i1"]
    assert forwards[0].frame.message.from_ == DAEMON_SENDER


def test_a_confined_identity_messages_nobody_and_nobody_messages_it() -> None:
    core = confined_core()
    core.hello(RUNTIME, b"rt", 200, 0.0)
    core.take()
    for kind in ("message", "ask", "delegate", "reply", "probe"):
        core.send(RUNTIME, message(f"out-{kind}", "alpha", kind), 0.0)
        [refused] = only(core.take(), Refuse)
        assert refused.code == "not_peers"
        core.send("alpha", message(f"in-{kind}", RUNTIME, kind), 0.0)
        [refused] = only(core.take(), Refuse)
        assert refused.code == "unknown_agent"


def test_a_confined_identity_reaches_only_the_confined_services() -> None:
    core = confined_core()
    core.hello(RUNTIME, b"rt", 200, 0.0)
    core.take()
    allowed = Request(id="r1", service="chat", op="event")
    core.request(RUNTIME, allowed)
    assert core.take() == [CallService("chat", RUNTIME, allowed)]
    core.request(RUNTIME, Request(id="r2", service="memory", op="recall"))
    [respond] = core.take()
    assert isinstance(respond, Respond) and respond.response.error == "unknown_service"
    assert core.counters["confined_request_refused"] == 1
    core.request("alpha", Request(id="r3", service="memory", op="recall"))
    assert only(core.take(), CallService)  # agents keep their services


def test_a_released_identity_refuses_what_waited_and_cannot_be_started() -> None:
    core = confined_core()
    core.inject(message("i1", RUNTIME, "chat", {"text": "task"}), Origin("subagent"), 0.0)
    core.take()
    core.release(RUNTIME)
    [outcome] = only(core.take(), InjectOutcome)
    assert outcome.code == "unavailable"
    core.inject(message("i2", RUNTIME, "chat", {"text": "task"}), Origin("subagent"), 0.0)
    [outcome] = only(core.take(), InjectOutcome)
    assert outcome.code == "unknown_agent"


def test_confinement_survives_a_reload() -> None:
    core = confined_core()
    core.update_config(RELOADED)
    core.inject(message("i1", RUNTIME, "chat", {"text": "task"}), Origin("subagent"), 0.0)
    assert core.take() == [RequestStart(RUNTIME)]


def test_a_readonly_agent_may_ask_but_not_delegate() -> None:
    """ADR 0039: a delegation hands work over, a readonly profile does no work; an ask is
    a question. The router refuses a forged delegate frame whatever the agent's tool did."""
    doc = make_config(
        ROOT,
        {"alpha": agent_entry(delegates=["beta"], risk_profile="ro"), "beta": agent_entry()},
        groups={"all": {"channel": "cli", "agents": ["alpha", "beta"]}},
    )
    doc["risk_profiles"]["ro"] = {"level": "readonly"}
    cfg = validate_document(doc)
    core = connected_core("alpha", "beta", cfg=cfg)
    core.send("alpha", message("d1", "beta", "delegate", {"text": "x"}), 0.0)
    core.send("alpha", message("a1", "beta", "ask", {"text": "x"}), 0.0)
    actions = core.take()
    [refused] = only(actions, Refuse)
    assert (refused.message_id, refused.code) == ("d1", "read_only_profile")
    [forward] = only(actions, Forward)
    assert forward.frame.message.id == "a1"


def test_a_replayed_question_is_refused_not_acted_on_twice() -> None:
    """Issue 16 (hole H1 of the conformance table): an authenticated agent that sends the
    same ask or delegate id again gets `replayed`; its peer takes one turn. Another sender
    may use the same id (ids are per sender), and the memory is bounded per sender."""
    doc = make_config(
        ROOT,
        {"alpha": agent_entry(delegates=["beta"]), "beta": agent_entry(), "gamma": agent_entry()},
        groups={"all": {"channel": "cli", "agents": ["alpha", "beta", "gamma"]}},
    )
    core = connected_core("alpha", "beta", "gamma", cfg=validate_document(doc))
    for kind in ("ask", "delegate"):
        core.send("alpha", message(f"{kind}-1", "beta", kind, {"text": "x"}), 0.0)
        core.send("alpha", message(f"{kind}-1", "beta", kind, {"text": "x"}), 0.0)
        actions = core.take()
        [forward] = only(actions, Forward)
        [refused] = only(actions, Refuse)
        assert (forward.frame.message.id, refused.code) == (f"{kind}-1", "replayed")
    core.send("gamma", message("ask-1", "beta", "ask", {"text": "x"}), 0.0)
    assert only(core.take(), Forward)
    for n in range(SEEN_QUESTIONS_LIMIT + 1):
        core.send("gamma", message(f"q{n}", "beta", "ask", {"text": "x"}), 0.0)
    core.take()
    core.send("gamma", message("q0", "beta", "ask", {"text": "x"}), 0.0)  # forgotten: the oldest
    assert only(core.take(), Forward)


# --- a question's grant: the router's stamp, from the turn the asker holds (ADR 0052) -------


def asked_tools(
    core: RouterCore, sender: str, to: str, qid: str, turn: str | None, *, ack: bool = False
) -> Any:
    """`sender` asks `to` from `turn`, claiming every tool there is on the envelope; what
    the router stamped on the delivered question (`ack`: and `to` acks it)."""
    sent = msgspec.structs.replace(message(qid, to, "ask", {"text": "x"}), turn=turn, tools=None)
    core.send(sender, sent, 0.0)
    [forward] = only(core.take(), Forward)
    # the callee's turn is named by the router: the asker's turn ids stay its own
    assert forward.frame.message.turn == f"{sender}/{qid}"
    if ack:
        core.ack(to, (forward.frame.rid,))
        core.take()
    return forward.frame.message.tools


def test_a_question_carries_the_grant_of_the_turn_it_comes_from_never_the_askers_word() -> None:
    core = connected_core("alpha", "beta", "gamma")
    core.turn_opened("alpha", "chat-op", None, OPERATOR)  # the operator's chat: not narrowed
    # (chat-hook: an outside sender's)
    core.turn_opened("alpha", "chat-hook", ("send_message_to_peer",), SENDER)
    assert asked_tools(core, "alpha", "beta", "q1", "chat-op") is None
    assert asked_tools(core, "alpha", "beta", "q2", "chat-hook") == ("send_message_to_peer",)
    # no turn, a turn nobody opened, another agent's turn: no tools at all
    assert asked_tools(core, "alpha", "beta", "q3", None) == ()
    assert asked_tools(core, "alpha", "beta", "q4", "chat-made-up") == ()
    core.turn_opened("gamma", "chat-g", None, OPERATOR)
    assert asked_tools(core, "alpha", "beta", "q5", "chat-g") == ()
    # a closed turn passes nothing on
    core.turn_closed("alpha", "chat-op")
    assert asked_tools(core, "alpha", "beta", "q6", "chat-op") == ()
    assert core.stats().other["question_from_unknown_turn"] == 4


def test_a_chain_passes_on_the_grant_of_the_question_each_hop_was_handed() -> None:
    core = connected_core("alpha", "beta", "gamma")
    core.turn_opened("alpha", "chat-hook", ("memory_recall",), SENDER)
    assert asked_tools(core, "alpha", "beta", "q1", "chat-hook") == ("memory_recall",)
    # beta asks on from the turn of q1 before acking it
    assert asked_tools(core, "beta", "gamma", "q2", "alpha/q1", ack=True) == ("memory_recall",)
    core = connected_core("alpha", "beta", "gamma")
    core.turn_opened("alpha", "chat-hook", ("memory_recall",), SENDER)
    assert asked_tools(core, "alpha", "beta", "q1", "chat-hook", ack=True) == ("memory_recall",)
    # and after
    assert asked_tools(core, "beta", "gamma", "q2", "alpha/q1", ack=True) == ("memory_recall",)
    assert asked_tools(core, "beta", "gamma", "q3", "alpha/q1") == ("memory_recall",)
    # a turn of the callee, not of the asker: gamma holds q2, beta does not
    assert asked_tools(core, "beta", "alpha", "q4", "beta/q2") == ()
    # once beta answered q1, that turn is over
    core.send("beta", message("r1", "alpha", "reply", {"in_reply_to": "q1"}), 0.0)
    core.take()
    assert asked_tools(core, "beta", "gamma", "q5", "alpha/q1") == ()


def test_an_agents_turns_end_with_it() -> None:
    core = connected_core("alpha", "beta")
    core.turn_opened("alpha", "chat-op", None, OPERATOR)
    core.agent_down("alpha")
    core.hello("alpha", b"alpha", 101, 0.0)
    core.take()
    assert asked_tools(core, "alpha", "beta", "q1", "chat-op") == ()


def test_a_plain_message_and_a_reply_carry_no_grant_whatever_the_sender_put() -> None:
    core = connected_core("alpha", "beta")
    core.turn_opened("alpha", "chat-op", None, OPERATOR)
    sent = msgspec.structs.replace(
        message("m1", "beta", "message", {"text": "x"}), turn="chat-op", tools=("shell",)
    )
    core.send("alpha", sent, 0.0)
    [forward] = only(core.take(), Forward)
    assert (forward.frame.message.tools, forward.frame.message.turn) == (None, None)


# --- the daemon's budgets on a peer's question (issue 27) ---------------------------------


def test_a_question_over_the_callees_budget_is_refused_before_the_callee_hears_of_it() -> None:
    asked: list[tuple[str, str, str, str]] = []

    def admission(
        callee: str, origin: Any, session: str, turn: str, on_behalf_of: Any
    ) -> str | None:
        asked.append((callee, origin.who, session, turn))
        return (
            "turns_per_hour of peer:alpha on agent beta spent (1 of 1)" if len(asked) > 1 else None
        )

    core = RouterCore(CONFIG, frozenset({"memory"}), admission=admission)
    for alias in ("alpha", "beta", "gamma", "lazy"):
        core.hello(alias, alias.encode(), 100, 0.0)
    core.take()
    first = ask(core, "alpha", "beta", "q1")
    assert isinstance(first, Forward)
    assert asked == [("beta", "peer:alpha", first.frame.message.session, "alpha/q1")]
    second = ask(core, "alpha", "beta", "q2")
    assert isinstance(second, Refuse) and second.code == "budget_exceeded"
    assert second.detail.startswith("turns_per_hour of peer:alpha")
    assert core.stats().outcomes["budget_exceeded"] == 1
    # A question refused by the router's own rules never reaches the budgets.
    core.send("gamma", message("q3", "beta", "delegate", {"text": "x"}), 0.0)
    assert only(core.take(), Refuse)[0].code == "delegation_not_allowed"
    assert len(asked) == 2


def test_a_questions_admission_learns_the_origin_its_chain_works_for() -> None:
    """A refusal goes back up the chain to the chat it began with: the budgets tell it in
    that origin's terms (an outside sender's chat is told no amounts), so the router names
    that origin, taken from the turns it holds, never from what the asker says."""
    behalf: dict[str, Origin | None] = {}

    def admission(callee: str, origin: Any, session: str, turn: str, on_behalf_of: Any) -> None:
        behalf[turn] = on_behalf_of

    core = RouterCore(CONFIG, frozenset({"memory"}), admission=admission)
    for alias in ("alpha", "beta", "gamma"):
        core.hello(alias, alias.encode(), 100, 0.0)
    core.take()
    core.turn_opened("alpha", "chat-op", None, OPERATOR)
    core.turn_opened("alpha", "chat-hook", ("send_message_to_peer",), SENDER)
    asked_tools(core, "alpha", "beta", "q1", "chat-hook", ack=True)
    asked_tools(core, "alpha", "beta", "q2", "chat-op")
    asked_tools(core, "beta", "gamma", "q3", "alpha/q1")  # a chain: its start's origin
    asked_tools(core, "alpha", "beta", "q4", None)  # from no turn: nobody known
    asked_tools(core, "alpha", "beta", "q5", "chat-made-up")
    assert behalf == {
        "alpha/q1": SENDER,
        "alpha/q2": OPERATOR,
        "beta/q3": SENDER,
        "alpha/q4": None,
        "alpha/q5": None,
    }


def test_a_question_waiting_for_an_on_demand_callee_is_admitted_once() -> None:
    asked: list[str] = []

    def admission(callee: str, origin: Any, session: str, turn: str, on_behalf_of: Any) -> None:
        asked.append(turn)

    core = RouterCore(CONFIG, frozenset({"memory"}), admission=admission)
    core.hello("alpha", b"alpha", 100, 0.0)
    core.send("alpha", message("q1", "lazy", "ask", {"text": "x"}), 0.0)
    assert asked == []  # queued while lazy starts
    core.hello("lazy", b"lazy", 101, 1.0)
    assert only(core.take(), Forward) and asked == ["alpha/q1"]
