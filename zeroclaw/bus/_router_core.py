"""The router's decisions without I/O (h11 style): frames and the clock in, actions out.

The trio `Router` reads a frame, decodes it and calls one method here; the method appends
actions to `out` and the router executes them (`take()`), in order. Nothing here touches a
socket, a task or the clock: `now` is an argument, so tests drive the core with a fake clock.

What it owns (ADR 0005, 0013, 0018):
- in-flight deliveries (rid -> who sent what to whom, until when), in deadline order;
- acks to batch per sender until the end of a burst (`flush_acks`);
- messages waiting for an on-demand agent to start (at most PENDING_START_LIMIT per agent);
- open questions: acked `ask`/`delegate` not answered yet, with the depth the router gave them;
- the turns each agent holds open and what each was granted (ADR 0052): the chats the daemon
  opened on it (`turn_opened`/`turn_closed`) and the questions it was handed. A question
  names the turn it comes from (`Message.turn`); the router stamps that turn's grant as the
  question's `tools`, so an agent can pass on only a grant it holds, and names the callee's
  turn for it `asker/id` (`question_turn`); a question is held while the turn it was asked
  from is;
- which connection (ROUTER routing id) speaks for which alias, from authenticated Hellos;
- outcome counters;
- confined identities (sub-agent runtimes, issue 12): started on demand, reached only by
  messages the daemon injects, and allowed only the services named `confined_services`.
  They message nobody, and no agent can message them: they are not in any peer group.

Exactly one outcome per send: every message a sender hands over ends in one `SendAck` id
or one `Refuse` (or, injected by the daemon, one `InjectOutcome`). An acked question may
later get a `Refuse` with `after_ack=True`: its callee exited before it answered; that is
not a second outcome of the send but the end of the wait for its reply.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from .._delegation import MAX_DELEGATION_DEPTH
from .._router_stats import RefusedConnections, RouterCoreStats
from ..config import Config
from ._origin import DAEMON_SENDER, Origin
from ._policy import PeerPolicy
from ._sessions import session_key
from ._wire import (
    QUESTION_KINDS,
    REFUSAL_CODES,
    Deliver,
    Message,
    RefusalCode,
    Request,
    Response,
    SalvagedIds,
    answered_question,
    encode,
)

PENDING_START_LIMIT = 10_000
OPEN_QUESTIONS_LIMIT = 10_000  # per callee; beyond it the oldest is forgotten (it times out)
# Question ids remembered per sender, so a replayed ask/delegate is refused, not acted on
# twice. An honest agent never reuses an id (each is new); this bounds the memory per sender.
SEEN_QUESTIONS_LIMIT = 1024
_LARGEST_RID = 2**64 - 1  # sizes a Deliver frame before its rid is known (9 bytes)


def on_demand_agents(config: Config) -> frozenset[str]:
    """Enabled agents that start at their first message instead of with the daemon."""
    return frozenset(
        alias
        for alias, agent in config.agents.items()
        if agent.enabled
        and agent.runtime_profile
        and config.runtime_profiles[agent.runtime_profile].activation == "on-demand"
    )


# --- actions: what the router does next ----------------------------------------------------


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a setattr call per field, per message
class Forward:
    """Send a Deliver to the connected destination."""

    conn: bytes
    frame: Deliver


@dataclass(frozen=True, slots=True)
class SendAck:
    """Tell a sender that these messages of its were delivered (conn None: it is not
    connected any more; the outcome is decided all the same, nobody hears it)."""

    conn: bytes | None
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Refuse:
    """Tell an agent its message was refused (conn None: it is not connected, say nothing)."""

    sender: str
    conn: bytes | None
    message_id: str
    code: RefusalCode
    detail: str
    to: str = ""
    channel: str = ""
    after_ack: bool = False  # an acked question whose callee exited before it answered


@dataclass(frozen=True, slots=True)
class InjectOutcome:
    """How a message the daemon injected ended: code None when acked."""

    message_id: str
    code: RefusalCode | None
    detail: str = ""
    to: str = ""
    channel: str = ""


@dataclass(frozen=True, slots=True)
class Respond:
    """A service response the core answers itself (an unknown service)."""

    conn: bytes
    response: Response


@dataclass(frozen=True, slots=True)
class CallService:
    """Run the named service's handler for this request; its response goes to `sender`."""

    name: str
    sender: str
    request: Request


@dataclass(frozen=True, slots=True)
class RequestStart:
    """Ask the supervisor to start an on-demand agent; tell `start_refused` if it cannot."""

    alias: str


@dataclass(slots=True)  # per message to or from an on-demand agent, as Forward
class Traffic:
    """A message to or from an on-demand agent: it is not idle."""

    alias: str


@dataclass(frozen=True, slots=True)
class AgentJoined:
    """An agent said Hello on the bus: it is reachable."""

    alias: str
    pid: int


@dataclass(frozen=True, slots=True)
class DropParked:
    """Frames parked for this connection will never go out: drop them."""

    conn: bytes
    reason: str


Action = (
    Forward
    | SendAck
    | Refuse
    | InjectOutcome
    | Respond
    | CallService
    | RequestStart
    | Traffic
    | AgentJoined
    | DropParked
)


Tools = tuple[str, ...] | None  # a turn's grant: these tool names; None, not narrowed
NO_TOOLS: tuple[str, ...] = ()


def question_turn(asker: str, question_id: str) -> str:
    """The router's name for the turn a callee runs for one question, stamped on it as
    `Message.turn`: question ids are the asker's own, so a bare id could name another
    asker's question or one of the callee's chats (an alias has no "/", a chat id none)."""
    return f"{asker}/{question_id}"


# (callee, origin, session, turn, on_behalf_of) -> why the callee's turn for a question may
# not start, or None: it starts (and is counted). `on_behalf_of`: the origin of the chat the
# chain of questions began with (None: the asker named no turn it holds), whose terms the
# refusal is told in, since the asker's answer goes back to it in the end. The daemon's
# budgets; pure as far as the core goes.
QuestionAdmission = Callable[[str, Origin, str, str, Origin | None], str | None]


def admit_every_question(
    callee: str, origin: Origin, session: str, turn: str, on_behalf_of: Origin | None
) -> None:
    return None


@dataclass(slots=True)
class InFlight:
    sender: str
    message_id: str
    dest: str
    deadline: float
    channel: str
    question: bool = False  # an ask/delegate: once acked, the sender waits for a reply
    depth: int = 0
    tools: Tools = NO_TOOLS  # a question's grant, as the router stamped it
    parent: str | None = None  # the asker's turn it was asked from, held when it was sent


@dataclass(frozen=True, slots=True)
class OpenQuestion:
    asker: str
    message_id: str
    depth: int
    tools: Tools = NO_TOOLS
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class Held:
    """A turn an agent holds open, what it was granted, and for whom it works: the origin
    of the chat at the start of its chain of questions (a reminder's maker for its run;
    None: the chain began at a question asked from no turn its asker held)."""

    tools: Tools
    on_behalf_of: Origin | None


class RouterCore:
    def __init__(
        self,
        config: Config,
        services: frozenset[str] = frozenset(),
        *,
        confined_services: frozenset[str] = frozenset(),
        admission: QuestionAdmission = admit_every_question,
    ) -> None:
        self.services = services
        # The daemon's budgets (ADR 0057): whether the callee's turn for a question may start.
        self.admission = admission
        self.confined_services = confined_services & services
        self.confined: set[str] = set()
        self.out: list[Action] = []
        self.counters: Counter[str] = Counter()
        self.connected: dict[str, int] = {}  # alias -> pid from its Hello
        self._alias_conn: dict[str, bytes] = {}  # alias -> routing id of its Hello's connection
        self._conn_alias: dict[bytes, str] = {}
        self._inflight: dict[int, InFlight] = {}
        self._order: deque[int] = deque()  # rids in deadline order (the timeout never changes
        # between two reloads, and a shorter one after a reload only makes the sweep late)
        self._next_rid = 1
        self._pending_start: dict[str, deque[tuple[float, str, Message]]] = {}
        self._acks_out: dict[str, list[str]] = {}
        # callee -> {question_turn(asker, id): the question}: acked asks not answered yet
        self._questions: dict[str, dict[str, OpenQuestion]] = {}
        # callee -> {rid: depth}: questions delivered to it and not acked yet
        self._asked: dict[str, dict[int, int]] = {}
        # sender -> the ids of its latest questions, oldest first (a set in insertion order)
        self._seen_questions: dict[str, dict[str, None]] = {}
        # agent -> {turn id: the chat}: the chats the daemon opened on it and not closed
        self._chats: dict[str, dict[str, Held]] = {}
        self.update_config(config)

    def update_config(self, config: Config) -> None:
        """Everything the core takes from the config (at start, and on reload)."""
        self.policy = PeerPolicy(config)
        self.delivery_timeout = config.daemon.delivery_timeout_secs
        self.max_frame = config.daemon.max_frame_bytes
        self.on_demand = on_demand_agents(config) | self.confined

    def confine(self, identity: str) -> None:
        """A sub-agent runtime's identity: it starts at its first injected message."""
        self.confined.add(identity)
        self.on_demand = self.on_demand | {identity}

    def release(self, identity: str) -> None:
        """The identity is gone for good (its revision retired): nothing may start it."""
        self.confined.discard(identity)
        self.on_demand = self.on_demand - {identity}
        self.start_refused(identity)

    def take(self) -> list[Action]:
        """The actions decided since the last call, in order."""
        out = self.out
        self.out = []
        return out

    def conn_of(self, alias: str) -> bytes | None:
        return self._alias_conn.get(alias)

    def alias_of(self, conn: bytes) -> str:
        return self._conn_alias.get(conn, "?")

    # --- frames from agents ---------------------------------------------------------------

    def bad_frame(self, sender: str, code: RefusalCode, ids: SalvagedIds, detail: str) -> None:
        """A frame that could not be read (too large, malformed): counted once, and refused
        to its sender when its message id could be salvaged, or answered when it was a
        request whose id could be (its caller would otherwise wait for its timeout)."""
        self.counters[code] += 1
        if ids.message is not None:
            self._refuse(sender, ids.message, code, detail, count=False)
        elif ids.request is not None:
            conn = self._alias_conn.get(sender)
            if conn is not None:
                response = Response(id=ids.request, ok=False, error=code, detail=detail)
                self.out.append(Respond(conn, response))

    def hello(self, alias: str, conn: bytes, pid: int, now: float) -> None:
        old = self._alias_conn.get(alias)
        if old is not None and old != conn:
            self._conn_alias.pop(old, None)
        self._alias_conn[alias] = conn
        self._conn_alias[conn] = alias
        self.connected[alias] = pid
        for _, sender, message in self._pending_start.pop(alias, deque()):
            if sender == DAEMON_SENDER:
                self._deliver(sender, message, now)  # its origin was admitted when injected
            else:
                # The peer policy again (a reload may have come), and the grant of the turn
                # the question names as it is now; not a replay of the sender's own send.
                self._seen_questions.get(sender, {}).pop(message.id, None)
                self.send(sender, message, now)
        self.out.append(AgentJoined(alias, pid))

    def heartbeat(self) -> None:
        self.counters["heartbeats"] += 1

    def request(self, sender: str, request: Request) -> None:
        if sender in self.confined and request.service not in self.confined_services:
            self.counters["confined_request_refused"] += 1
            conn = self._alias_conn.get(sender)
            if conn is not None:
                detail = f"service {request.service!r} is not offered to a sub-agent runtime"
                response = Response(id=request.id, ok=False, error="unknown_service", detail=detail)
                self.out.append(Respond(conn, response))
            return
        if request.service in self.services:
            self.out.append(CallService(request.service, sender, request))
            return
        conn = self._alias_conn.get(sender)
        if conn is not None:
            detail = f"no service {request.service!r}"
            response = Response(id=request.id, ok=False, error="unknown_service", detail=detail)
            self.out.append(Respond(conn, response))

    def send(self, sender: str, message: Message, now: float) -> None:
        """A message from an authenticated agent."""
        dest = message.to
        kind = message.kind
        if kind == "reply":
            answered = answered_question(message)  # the one body the router reads
            if answered is not None:
                self._questions.get(sender, {}).pop(question_turn(dest, answered), None)
        policy = self.policy
        if sender in self.confined:
            detail = "a sub-agent runtime messages nobody; it answers the daemon only"
            self._refuse(sender, message.id, "not_peers", detail, dest, message.channel)
            return
        if dest not in policy.agents:
            self._refuse(sender, message.id, "unknown_agent", f"no agent {dest!r}", dest)
            return
        if kind in QUESTION_KINDS:
            if self._question_refused(sender, message):
                return
            # What the callee's turn may use: the grant of the turn the asker names, if it
            # holds that turn; the asker's own word about tools is never read. The turn is
            # kept as the question's parent only if it is held.
            held = None if message.turn is None else self.held(sender, message.turn)
            if held is None:
                self.counters["question_from_unknown_turn"] += 1
                message = msgspec.structs.replace(message, tools=NO_TOOLS, turn=None)
            else:
                message = msgspec.structs.replace(message, tools=held.tools)
        if message.channel:
            if policy.allowed(sender, dest, message.channel):  # the hot path: a set lookup
                self._deliver(sender, message, now)
                return
            decision = policy.decide(sender, dest, message.channel)
        else:
            # No channel named: the first channel on which a group lists both, if any.
            decision = policy.decide(sender, dest)
            if decision.allowed:
                assert decision.channel is not None
                channel = decision.channel
                self._deliver(sender, msgspec.structs.replace(message, channel=channel), now)
                return
        self._refuse(sender, message.id, "not_peers", decision.reason, dest, message.channel)

    def _question_refused(self, sender: str, message: Message) -> bool:
        """The router's own rules for questions (ADR 0018): each id once per sender (a
        replayed question is refused, not acted on twice), delegation only to configured
        delegates, and a depth it counts itself (the body says nothing about either)."""
        dest = message.to
        seen = self._seen_questions.setdefault(sender, {})
        if message.id in seen:
            detail = f"{sender!r} already sent a question with id {message.id!r}"
            self._refuse(sender, message.id, "replayed", detail, dest)
            return True
        if message.kind == "delegate" and sender in self.policy.readonly:
            detail = f"{sender!r} has a readonly risk profile: it may ask, not delegate"
            self._refuse(sender, message.id, "read_only_profile", detail, dest)
            return True
        if message.kind == "delegate" and dest not in self.policy.delegates.get(sender, ()):
            detail = f"{dest!r} is not in {sender!r}'s delegates"
            self._refuse(sender, message.id, "delegation_not_allowed", detail, dest)
            return True
        depth = self.depth_of(sender) + 1
        if depth >= MAX_DELEGATION_DEPTH:
            detail = f"a chain of {MAX_DELEGATION_DEPTH} asks/delegations is the limit"
            self._refuse(sender, message.id, "depth_exceeded", detail, dest)
            return True
        seen[message.id] = None
        if len(seen) > SEEN_QUESTIONS_LIMIT:
            del seen[next(iter(seen))]
        return False

    def held(self, alias: str, turn: str, hops: int = MAX_DELEGATION_DEPTH) -> Held | None:
        """The turn `turn` if `alias` holds it open: a chat the daemon opened on it, or a
        question it was handed (acked or not) and has not answered, by the name the router
        stamped on it (`question_turn`), while the turn it was asked from is held too (a
        chain's turns end with the turn at its start; `hops` bounds the walk); None
        otherwise."""
        if "/" not in turn:  # a chat's id (the turn service's): never a question's name
            chats = self._chats.get(alias)
            return None if chats is None else chats.get(turn)
        found: OpenQuestion | InFlight | None = self._questions.get(alias, {}).get(turn)
        if found is None:
            for rid in self._asked.get(alias, {}):
                flight = self._inflight.get(rid)
                if flight is not None and question_turn(flight.sender, flight.message_id) == turn:
                    found = flight
                    break
        if found is None:
            return None
        if found.parent is None:  # asked from no turn the asker held: nothing passed on
            return Held(found.tools, None)
        asker = found.asker if isinstance(found, OpenQuestion) else found.sender
        above = None if hops <= 0 else self.held(asker, found.parent, hops - 1)
        if above is None:
            return None  # the asking turn has ended: so has what it passed on
        return Held(found.tools, above.on_behalf_of)

    def turn_opened(self, agent: str, turn: str, tools: Tools, on_behalf_of: Origin) -> None:
        """The daemon opened chat `turn` on `agent` with this grant, for this origin (the
        chat's, or a reminder's maker for its run: the turn service)."""
        chats = self._chats.setdefault(agent, {})
        if len(chats) >= OPEN_QUESTIONS_LIMIT:
            del chats[next(iter(chats))]  # the oldest: its questions get no tools
        chats[turn] = Held(tools, on_behalf_of)

    def turn_closed(self, agent: str, turn: str) -> None:
        chats = self._chats.get(agent)
        if chats is not None:
            chats.pop(turn, None)
            if not chats:
                del self._chats[agent]

    def depth_of(self, alias: str) -> int:
        """How deep in a chain of questions `alias` is working: the deepest question it has
        been handed and not answered yet (0: none, e.g. an operator's chat turn)."""
        deepest = 0
        for question in self._questions.get(alias, {}).values():
            deepest = max(deepest, question.depth)
        for depth in self._asked.get(alias, {}).values():
            deepest = max(deepest, depth)
        return deepest

    def inject(self, message: Message, origin: Origin, now: float) -> None:
        """Conversation input the daemon received (a CLI chat, say), from DAEMON_SENDER.

        Its origin is checked instead of the peer groups, which are about agents: the
        operator on a cli channel, or an external sender the target's groups on that channel
        accept. Everything else applies: unknown, unavailable, on-demand start, ack or
        timeout, and the frame limit an agent's own sends meet (`too_large`).
        """
        dest = message.to
        policy = self.policy
        if dest in self.confined:
            refused = None  # the daemon's dispatch pipeline admitted this invocation
        elif dest not in policy.enabled:
            self._refuse(DAEMON_SENDER, message.id, "unknown_agent", f"no enabled agent {dest!r}")
            return
        else:
            refused = policy.origin_refusal(dest, origin)
        if refused is not None:
            rule, detail = refused
            self.counters[f"origin_refused.{rule}"] += 1
            self._refuse(
                DAEMON_SENDER, message.id, "origin_not_allowed", detail, dest, origin.channel
            )
            return
        size = len(encode(Deliver(rid=_LARGEST_RID, message=message)))
        if size > self.max_frame:
            detail = f"the message is {size} bytes on the bus; max_frame_bytes is {self.max_frame}"
            self._refuse(DAEMON_SENDER, message.id, "too_large", detail, dest, message.channel)
            return
        self._deliver(DAEMON_SENDER, message, now)

    def _deliver(self, sender: str, message: Message, now: float) -> None:
        """An allowed message: to its running destination, queued while an on-demand
        destination starts, or refused `unavailable`."""
        dest = message.to
        conn = self._alias_conn.get(dest)  # set by a Hello, dropped with the agent
        if conn is not None:
            self._forward(sender, message, conn, now)
        elif dest in self.on_demand and self._queue_for_start(sender, message, now):
            pass
        else:
            detail = f"agent {dest!r} is not running"
            self._refuse(sender, message.id, "unavailable", detail, dest, message.channel)

    def _forward(self, sender: str, message: Message, conn: bytes, now: float) -> None:
        rid = self._next_rid
        self._next_rid += 1
        dest = message.to
        if message.kind in QUESTION_KINDS and sender != DAEMON_SENDER:
            # The daemon names the asker's session in the peer namespace: what the asker
            # put in `session` (its own turn's key) is only a name inside it, so a sender's
            # turn asking a peer never continues the conversation the operator's had.
            peer_session = session_key(Origin.peer(sender), message.session)
            # The callee's turn for it goes by the router's name, never by the bare id.
            turn = question_turn(sender, message.id)
            asking = None if message.turn is None else self.held(sender, message.turn)
            on_behalf_of = None if asking is None else asking.on_behalf_of
            over = self.admission(dest, Origin.peer(sender), peer_session, turn, on_behalf_of)
            if over is not None:  # before the callee hears of it: no provider call is made
                self._refuse(sender, message.id, "budget_exceeded", over, dest, message.channel)
                return
            depth = self.depth_of(sender) + 1
            self._asked.setdefault(dest, {})[rid] = depth
            flight = InFlight(
                sender,
                message.id,
                dest,
                now + self.delivery_timeout,
                message.channel,
                True,
                depth,
                message.tools,  # stamped by `send`
                message.turn,  # kept by `send` when the asker holds it
            )
            stamped = msgspec.structs.replace(
                message, from_=sender, depth=depth, session=peer_session, turn=turn
            )
        else:
            flight = InFlight(
                sender, message.id, dest, now + self.delivery_timeout, message.channel
            )
            # Only the router says how deep a message is, and only the daemon names a
            # session: an agent's replies and messages carry none.
            if sender == DAEMON_SENDER:
                stamped = msgspec.structs.replace(message, from_=sender, depth=0)
            else:
                stamped = msgspec.structs.replace(
                    message, from_=sender, depth=0, session=None, turn=None, tools=None
                )
        self._inflight[rid] = flight
        self._order.append(rid)
        on_demand = self.on_demand
        if on_demand:
            if dest in on_demand:
                self.out.append(Traffic(dest))
            if sender in on_demand:
                self.out.append(Traffic(sender))
        self.out.append(Forward(conn, Deliver(rid=rid, message=stamped)))

    def _queue_for_start(self, sender: str, message: Message, now: float) -> bool:
        queue = self._pending_start.get(message.to)
        if queue is None:
            queue = self._pending_start[message.to] = deque()
            self.out.append(RequestStart(message.to))
        if len(queue) >= PENDING_START_LIMIT:
            return False
        queue.append((now, sender, message))
        return True

    def ack(self, dest: str, rids: tuple[int, ...]) -> None:
        for rid in rids:
            flight = self._inflight.get(rid)
            if flight is None or flight.dest != dest:
                self.counters["stray_acks"] += 1  # late (already timed out) or not theirs
                continue
            del self._inflight[rid]
            self.counters["delivered"] += 1
            if flight.sender == DAEMON_SENDER:
                self.out.append(InjectOutcome(flight.message_id, None, "", dest, flight.channel))
            else:
                self._acks_out.setdefault(flight.sender, []).append(flight.message_id)
                if flight.question:
                    self._forget_asked(flight.dest, rid)
                    self._open_question(flight)

    def _open_question(self, flight: InFlight) -> None:
        questions = self._questions.setdefault(flight.dest, {})
        if len(questions) >= OPEN_QUESTIONS_LIMIT:
            del questions[next(iter(questions))]
        questions[question_turn(flight.sender, flight.message_id)] = OpenQuestion(
            flight.sender, flight.message_id, flight.depth, flight.tools, flight.parent
        )

    def _forget_asked(self, dest: str, rid: int) -> None:
        asked = self._asked.get(dest)
        if asked is not None:
            asked.pop(rid, None)
            if not asked:
                del self._asked[dest]

    def flush_acks(self) -> None:
        """After each burst: one Ack frame per sender, however many messages it covers."""
        if not self._acks_out:
            return
        for sender, ids in self._acks_out.items():
            self.out.append(SendAck(self._alias_conn.get(sender), tuple(ids)))
        self._acks_out = {}

    def dropped(self, conn: bytes, rid: int | None, reason: str) -> None:
        """The socket would not take a frame for `conn` (peer gone, or its queue full);
        `rid` is the delivery's when the frame was a Deliver."""
        self.counters["send_failed"] += 1
        if rid is None:
            return  # an Ack, Refusal or Response for a sender that has gone: nobody to tell
        flight = self._inflight.pop(rid, None)
        if flight is not None:
            if flight.question:
                self._forget_asked(flight.dest, rid)
            dest = self._conn_alias.get(conn, "?")
            self._refuse_flight(flight, "unavailable", f"agent {dest!r}: {reason}")

    # --- the supervisor's news ------------------------------------------------------------

    def agent_down(self, alias: str) -> None:
        """The agent's process is gone: everything in flight to it is refused `unavailable`,
        and so is every question it was asked and has not answered."""
        self.connected.pop(alias, None)
        conn = self._alias_conn.pop(alias, None)
        if conn is not None:
            self._conn_alias.pop(conn, None)
            self.out.append(DropParked(conn, "agent exited"))
        self._asked.pop(alias, None)
        self._chats.pop(alias, None)  # its turns ended with it
        lost = [rid for rid, f in self._inflight.items() if f.dest == alias]
        for rid in lost:
            self._refuse_flight(self._inflight.pop(rid), "unavailable", f"agent {alias!r} exited")
        for open_question in self._questions.pop(alias, {}).values():
            self._refuse(
                open_question.asker,
                open_question.message_id,
                "unavailable",
                f"agent {alias!r} exited before it answered",
                alias,
                after_ack=True,
            )
        for open_questions in self._questions.values():  # the asker left: nobody waits
            for question in [q for q, o in open_questions.items() if o.asker == alias]:
                del open_questions[question]

    def start_refused(self, alias: str) -> None:
        """The supervisor will not start `alias` (removed, or fatal): what waits is refused."""
        for _, sender, message in self._pending_start.pop(alias, deque()):
            detail = f"agent {alias!r} is not running"
            self._refuse(sender, message.id, "unavailable", detail, alias, message.channel)

    def start_failed(self, alias: str, why: str) -> None:
        for _, sender, message in self._pending_start.pop(alias, deque()):
            detail = f"agent {alias!r} could not start: {why}"
            self._refuse(sender, message.id, "unavailable", detail, alias, message.channel)

    # --- time -----------------------------------------------------------------------------

    def next_deadline(self) -> float:
        """When `on_deadline` has something to do next (inf: nothing waits)."""
        deadline = float("inf")
        order, inflight = self._order, self._inflight
        while order and order[0] not in inflight:
            order.popleft()  # acked or refused already
        if order:
            deadline = inflight[order[0]].deadline
        for queue in self._pending_start.values():
            if queue:
                deadline = min(deadline, queue[0][0] + self.delivery_timeout)
        return deadline

    def on_deadline(self, now: float) -> None:
        order = self._order
        while order:
            flight = self._inflight.get(order[0])
            if flight is None:
                order.popleft()
                continue
            if flight.deadline > now:
                break
            rid = order.popleft()
            del self._inflight[rid]
            if flight.question:
                self._forget_asked(flight.dest, rid)
            detail = f"no ack from {flight.dest!r} within {self.delivery_timeout:g}s"
            self._refuse_flight(flight, "timeout", detail)
        for alias, queue in self._pending_start.items():
            while queue and queue[0][0] + self.delivery_timeout <= now:
                _, sender, message = queue.popleft()
                detail = f"agent {alias!r} did not start in time"
                self._refuse(sender, message.id, "timeout", detail, alias, message.channel)

    # --- outcomes -------------------------------------------------------------------------

    def _refuse_flight(self, flight: InFlight, code: RefusalCode, detail: str) -> None:
        self._refuse(flight.sender, flight.message_id, code, detail, flight.dest, flight.channel)

    def _refuse(
        self,
        sender: str,
        message_id: str,
        code: RefusalCode,
        detail: str,
        to: str = "",
        channel: str = "",
        *,
        count: bool = True,
        after_ack: bool = False,
    ) -> None:
        if count:
            self.counters[code] += 1
        if sender == DAEMON_SENDER:
            self.out.append(InjectOutcome(message_id, code, detail, to, channel))
        else:
            conn = self._alias_conn.get(sender)
            self.out.append(Refuse(sender, conn, message_id, code, detail, to, channel, after_ack))

    # --- status ---------------------------------------------------------------------------

    def stats(self) -> RouterCoreStats:
        outcomes = ("delivered", *REFUSAL_CODES)
        return RouterCoreStats(
            connected=sorted(self.connected),
            in_flight=len(self._inflight),
            open_questions=sum(len(q) for q in self._questions.values()),
            outcomes={name: self.counters[name] for name in outcomes},
            refused_connections=RefusedConnections(
                zap_denied=self.counters["zap_denied"],
                handshake_failed=self.counters["handshake_failed"],
            ),
            other={
                k: v
                for k, v in self.counters.items()
                if k not in outcomes and k not in ("zap_denied", "handshake_failed")
            },
        )
