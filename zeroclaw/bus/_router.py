"""The router in the daemon: every agent message passes here, authenticated and checked.

Authentication (ADR 0005): each agent start gets a fresh CURVE keypair. The ZAP handler
accepts a connection only if its public key is a current agent key, and labels it with
that agent's alias (ZAP User-Id). The router reads that label from *every* message: the
sender is who the key says, never what a routing id claims. Agents never choose routing
ids; the ROUTER assigns them and the router learns alias -> routing id only from an
authenticated Hello, so ROUTER_HANDOVER (set as required) gives nobody a way in.

Delivery: every Send ends in exactly one outcome for its sender — an Ack from the
destination, or a Refusal with a code. Counters per outcome are in `stats()`.

Open questions: an acked `ask`/`delegate` still waits for the callee's `reply`. The router
remembers it until that reply passes; if the callee's process exits first, the asker gets
a Refusal (`unavailable`) for the question's id at once, instead of waiting out its own
reply timeout (ADR 0013).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import trio
import zmq
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

from .._log_throttle import LogThrottle
from .._unix import owner_only_umask
from ..config import Config
from ..events import EventSink
from ._origin import DAEMON_SENDER, Origin
from ._policy import PeerPolicy
from ._wire import (
    REFUSAL_CODES,
    Ack,
    Deliver,
    Heartbeat,
    Hello,
    Message,
    Refusal,
    Request,
    Response,
    Send,
    WireError,
    decode_from_agent,
    encode,
    salvage_message_id,
)
from ._zsocket import Frames, SocketOwner

log = logging.getLogger("zeroclaw.router")

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = b"zeroclaw"
PENDING_START_LIMIT = 10_000
OPEN_QUESTIONS_LIMIT = 10_000  # per callee; beyond it the oldest is forgotten (it times out)
QUESTION_KINDS = ("ask", "delegate")  # message kinds whose sender waits for a `reply`
HWM = 10_000
SUN_PATH_MAX = 107
REFUSAL_LOG_INTERVAL_SECS = 10.0  # failed handshakes: one line per kind per interval
_LARGEST_RID = 2**64 - 1  # sizes a Deliver frame before its rid is known (9 bytes)

# A kind of refused handshake, for the log: what, detail (mechanism or event), address.
RefusalKind = tuple[str, str, str]

# Hooks into the supervisor, set by the daemon.
HelloHook = Callable[[str, int], None]
StartHook = Callable[[str], bool]  # ask for an on-demand start; False if not startable
ServiceHandler = Callable[[str, Request], None]
# How an injected message ended: (None, "") when acked, else (refusal code, detail).
InjectOutcome = Callable[[str | None, str], None]

# The sender of messages the daemon itself injects (channel input such as a CLI chat).
INTERNAL = DAEMON_SENDER


def on_demand_agents(config: Config) -> set[str]:
    """Enabled agents that start at their first message instead of with the daemon."""
    return {
        alias
        for alias, agent in config.agents.items()
        if agent.enabled
        and agent.runtime_profile
        and config.runtime_profiles[agent.runtime_profile].activation == "on-demand"
    }


@dataclass
class InFlight:
    sender: str
    message_id: str
    dest: str
    deadline: float
    question: bool = False  # an ask/delegate: once acked, the sender waits for a reply


@dataclass(frozen=True)
class AgentKeys:
    """What an agent process needs to join the bus, sent over its private link."""

    server_public: bytes
    public: bytes
    secret: bytes
    endpoint: str


class Router:
    def __init__(
        self,
        config: Config,
        runtime_dir: Path,
        ctx: zmq.Context[zmq.Socket[bytes]],
        *,
        events: EventSink | None = None,
    ) -> None:
        self.ctx = ctx
        self.events = events if events is not None else EventSink()
        self.endpoint_path = runtime_dir / "router.sock"
        if len(os.fsencode(self.endpoint_path)) > SUN_PATH_MAX:
            raise ValueError(
                f"router socket path {self.endpoint_path} is too long for a unix socket"
            )
        self.endpoint = f"ipc://{self.endpoint_path}"
        self.server_public, self._server_secret = zmq.curve_keypair()
        self.update_config(config)
        self._key_to_alias: dict[bytes, str] = {}
        self._alias_key: dict[str, bytes] = {}
        self.connected: dict[str, int] = {}  # alias -> pid from its Hello
        self._alias_rid: dict[str, bytes] = {}  # alias -> routing id of its Hello's connection
        self._rid_alias: dict[bytes, str] = {}
        self._inflight: dict[int, InFlight] = {}
        self._order: deque[int] = deque()
        self._next_rid = 1
        self._pending_start: dict[str, deque[tuple[float, str, Message]]] = {}
        self._acks_out: dict[str, list[str]] = {}
        self._injected: dict[str, InjectOutcome] = {}  # message id -> outcome callback
        # callee -> {question id: asker}: acked asks not answered yet
        self._questions: dict[str, dict[str, str]] = {}
        self.counters: Counter[str] = Counter()
        self._refusal_log = LogThrottle[RefusalKind](
            REFUSAL_LOG_INTERVAL_SECS, overflow_key=("other", "", ""), max_keys=16
        )
        self.on_hello: HelloHook = lambda alias, pid: None
        self.request_start: StartHook = lambda alias: False
        # Traffic to or from an on-demand agent: it is not idle.
        self.on_traffic: Callable[[str], None] = lambda alias: None
        self.services: dict[str, ServiceHandler] = {}
        self.down_hooks: list[Callable[[str], None]] = []  # services told when an agent exits
        self._owner: SocketOwner | None = None
        self._zap_owner: SocketOwner | None = None

    # --- keys ------------------------------------------------------------------------------

    def mint_keys(self, alias: str) -> AgentKeys:
        """A fresh keypair for one agent start; the previous key of that alias stops working."""
        public, secret = zmq.curve_keypair()
        old = self._alias_key.pop(alias, None)
        if old is not None:
            self._key_to_alias.pop(old, None)
        self._key_to_alias[public] = alias
        self._alias_key[alias] = public
        return AgentKeys(self.server_public, public, secret, self.endpoint)

    def revoke(self, alias: str) -> None:
        key = self._alias_key.pop(alias, None)
        if key is not None:
            self._key_to_alias.pop(key, None)

    # --- lifecycle hooks from the supervisor ------------------------------------------------

    def update_config(self, config: Config) -> None:
        """Everything the router takes from the config (at start, and on reload)."""
        self.policy = PeerPolicy(config)
        self.delivery_timeout = config.daemon.delivery_timeout_secs
        self.max_frame = config.daemon.max_frame_bytes
        self._on_demand = on_demand_agents(config)

    def agent_down(self, alias: str) -> None:
        """The agent's process is gone: everything in flight to it is refused `unavailable`."""
        for hook in self.down_hooks:
            hook(alias)
        self.connected.pop(alias, None)
        routing_id = self._alias_rid.pop(alias, None)
        if routing_id is not None:
            self._rid_alias.pop(routing_id, None)
            if self._owner is not None:
                self._owner.drop_parked(routing_id, "agent exited")
        lost = [rid for rid, f in self._inflight.items() if f.dest == alias]
        for rid in lost:
            flight = self._inflight.pop(rid)
            self._refuse(flight.sender, flight.message_id, "unavailable", f"agent {alias!r} exited")
        for question, asker in self._questions.pop(alias, {}).items():
            self._refuse(
                asker, question, "unavailable", f"agent {alias!r} exited before it answered"
            )
        for open_questions in self._questions.values():  # the asker left: nobody waits
            for question in [q for q, asker in open_questions.items() if asker == alias]:
                del open_questions[question]

    def start_failed(self, alias: str, why: str) -> None:
        for _, sender, message in self._pending_start.pop(alias, deque()):
            self._refuse(
                sender, message.id, "unavailable", f"agent {alias!r} could not start: {why}"
            )

    # --- the tasks ------------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        zap = self.ctx.socket(zmq.REP)
        zap.linger = 0
        zap.bind(ZAP_ENDPOINT)
        zap_owner = SocketOwner(zap, self._on_zap, name="zap", request_reply=True)
        self._zap_owner = zap_owner

        sock = self.ctx.socket(zmq.ROUTER)
        sock.linger = 0
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        sock.sndhwm = HWM
        sock.rcvhwm = HWM
        sock.curve_server = True
        sock.curve_secretkey = self._server_secret
        sock.zap_domain = ZAP_DOMAIN
        monitor = sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH
        )
        self.endpoint_path.unlink(missing_ok=True)
        with owner_only_umask():  # the socket file is 0600 from its first instant
            sock.bind(self.endpoint)
        owner = SocketOwner(
            sock,
            self._on_frames,
            name="router",
            park_per_destination=True,
            on_drop=self._on_drop,
            after_drain=self._flush_acks,
            with_user_id=True,
        )
        self._owner = owner
        monitor_owner = SocketOwner(monitor, self._on_monitor, name="router-monitor")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(zap_owner.run)
                nursery.start_soon(owner.run)
                nursery.start_soon(monitor_owner.run)
                nursery.start_soon(self._sweep_timeouts)
                task_status.started()
        finally:
            if not sock.closed:
                sock.disable_monitor()
            self.endpoint_path.unlink(missing_ok=True)

    # --- ZAP: who is this key? ------------------------------------------------------------

    def _on_zap(self, frames: Frames, _user: bytes) -> bool:
        assert self._zap_owner is not None
        if len(frames) < 6:  # only libzmq talks here; still, REP must answer every request
            self._zap_owner.send_nowait([b"1.0", b"", b"500", b"malformed ZAP request", b"", b""])
            return True
        # Frame 4 ("identity") is the *server's* routing id in libzmq, not the client's, so
        # the key is all there is to check here.
        version, request_id, _domain, address, _identity, mechanism = frames[:6]
        credentials = frames[6:]
        alias = None
        if mechanism == b"CURVE" and credentials and len(credentials[0]) == 32:
            alias = self._key_to_alias.get(z85.encode(credentials[0]))
        if alias is None:
            self.counters["zap_denied"] += 1
            kind = (
                "zap_denied",
                mechanism.decode(errors="replace"),
                address.decode(errors="replace"),
            )
            self._log_refusal(kind, self._refusal_log.event(kind, trio.current_time()))
            reply = [version, request_id, b"400", b"unknown key", b"", b""]
        else:
            reply = [version, request_id, b"200", b"OK", alias.encode(), b""]
        self._zap_owner.send_nowait(reply)
        return True

    def _on_monitor(self, frames: Frames, _user: bytes) -> bool:
        try:
            event = parse_monitor_message(frames)
        except Exception:  # a malformed monitor frame says nothing about a peer
            return True
        self.counters["handshake_failed"] += 1
        kind = ("handshake_failed", str(event.get("event")), "")
        self._log_refusal(kind, self._refusal_log.event(kind, trio.current_time()))
        return True

    def _log_refusal(self, kind: RefusalKind, count: int) -> None:
        """One line for `count` refused handshakes of one kind (none when count is 0)."""
        if not count:
            return
        what, detail, address = kind
        if what == "zap_denied":
            text = f"refused {count} bus connection(s) with an unknown {detail} key"
        elif what == "handshake_failed":
            text = f"{count} bus handshake(s) failed (event {detail})"
        else:
            text = f"{count} more refused bus handshake(s) of other kinds"
        log.warning(
            "%s%s",
            text,
            f" (at most one line per {REFUSAL_LOG_INTERVAL_SECS:g}s)" if count > 1 else "",
            extra={"peer_address": address, "count": count, "refusal": what},
        )

    # --- frames from agents ---------------------------------------------------------------

    def _on_frames(self, frames: Frames, user: bytes) -> bool:
        if len(frames) != 2 or not user:
            self.counters["malformed"] += 1
            return True
        rid, payload = frames
        sender = user.decode()  # the alias the ZAP handler bound to this connection's key
        if len(payload) > self.max_frame:
            self.counters["too_large"] += 1
            message_id = salvage_message_id(payload) if len(payload) <= 4 * self.max_frame else None
            if message_id is not None:
                self._refuse(
                    sender,
                    message_id,
                    "too_large",
                    f"frame exceeds {self.max_frame} bytes",
                    count=False,
                )
            return True
        try:
            frame = decode_from_agent(payload)
        except WireError as exc:  # broken, of another version, or nested too deeply
            self.counters[exc.code] += 1
            message_id = salvage_message_id(payload)
            if message_id is not None:
                self._refuse(sender, message_id, exc.code, str(exc)[:200], count=False)
            return True
        if isinstance(frame, Send):
            if frame.message is None:
                self.counters["malformed"] += 1
            else:
                self._route(sender, frame.message)
        elif isinstance(frame, Ack):
            self._on_ack(sender, frame.rids)
        elif isinstance(frame, Hello):
            self._on_hello(sender, rid, frame.pid)
        elif isinstance(frame, Heartbeat):
            self.counters["heartbeats"] += 1
        elif isinstance(frame, Request):
            handler = self.services.get(frame.service)
            if handler is None:
                self.reply(
                    sender,
                    Response(
                        id=frame.id,
                        ok=False,
                        error="unknown_service",
                        detail=f"no service {frame.service!r}",
                    ),
                )
            else:
                handler(sender, frame)
        return True

    def inject(self, message: Message, origin: Origin, on_outcome: InjectOutcome) -> None:
        """Deliver channel input the daemon received (a CLI chat, say) to an agent.

        The caller already authorised it (the control socket checked the peer's uid), so
        the peer-group policy, which is about agents and external senders, does not apply;
        everything else does: unknown, unavailable, on-demand start, ack or timeout, and
        the frame limit an agent's own sends meet (`too_large`).
        """
        self._injected[message.id] = on_outcome
        if message.to not in self.policy.enabled:
            self._refuse(INTERNAL, message.id, "unknown_agent", f"no enabled agent {message.to!r}")
        elif (size := len(encode(Deliver(rid=_LARGEST_RID, message=message)))) > self.max_frame:
            self._refuse(
                INTERNAL,
                message.id,
                "too_large",
                f"the message is {size} bytes on the bus; max_frame_bytes is {self.max_frame}",
            )
        else:
            self._deliver(INTERNAL, message)

    def _route(self, sender: str, message: Message) -> None:
        dest = message.to
        if message.kind == "reply" and isinstance(message.body, dict):
            answered = message.body.get("in_reply_to")
            if isinstance(answered, str):
                self._questions.get(sender, {}).pop(answered, None)
        policy = self.policy
        if dest not in policy.agents:
            self._refuse(sender, message.id, "unknown_agent", f"no agent {dest!r}")
            return
        if message.channel:
            if policy.allowed(sender, dest, message.channel):  # the hot path: a set lookup
                self._deliver(sender, message)
                return
            decision = policy.decide(sender, dest, message.channel)
        else:
            # No channel named: the first channel on which a group lists both, if any.
            decision = policy.decide(sender, dest)
            if decision.allowed:
                assert decision.channel is not None
                self._deliver(sender, msgspec.structs.replace(message, channel=decision.channel))
                return
        log.info(
            "refused %s -> %s on %s: %s",
            sender,
            dest,
            message.channel or "any channel",
            decision.reason,
            extra={"from": sender, "to": dest, "channel": message.channel},
        )
        self._refuse(sender, message.id, "not_peers", decision.reason)

    def _deliver(self, sender: str, message: Message) -> None:
        """An allowed message: to its running destination, queued while an on-demand
        destination starts, or refused `unavailable`."""
        dest = message.to
        if dest in self.connected:
            self._forward(sender, message)
        elif dest in self._on_demand and self._queue_for_start(sender, message):
            pass
        else:
            self._refuse(sender, message.id, "unavailable", f"agent {dest!r} is not running")

    def _forward(self, sender: str, message: Message) -> None:
        rid = self._next_rid
        self._next_rid += 1
        self._inflight[rid] = InFlight(
            sender,
            message.id,
            message.to,
            trio.current_time() + self.delivery_timeout,
            question=sender != INTERNAL and message.kind in QUESTION_KINDS,
        )
        self._order.append(rid)
        stamped = msgspec.structs.replace(message, from_=sender)
        on_demand = self._on_demand
        if on_demand:
            if message.to in on_demand:
                self.on_traffic(message.to)
            if sender in on_demand:
                self.on_traffic(sender)
        assert self._owner is not None
        self._owner.send_nowait(
            [self._alias_rid[message.to], encode(Deliver(rid=rid, message=stamped))]
        )

    def _queue_for_start(self, sender: str, message: Message) -> bool:
        queue = self._pending_start.get(message.to)
        if queue is None:
            if not self.request_start(message.to):
                return False
            queue = self._pending_start[message.to] = deque()
        if len(queue) >= PENDING_START_LIMIT:
            return False
        queue.append((trio.current_time(), sender, message))
        return True

    def _on_hello(self, alias: str, rid: bytes, pid: int) -> None:
        old = self._alias_rid.get(alias)
        if old is not None and old != rid:
            self._rid_alias.pop(old, None)
        self._alias_rid[alias] = rid
        self._rid_alias[rid] = alias
        self.connected[alias] = pid
        log.info("agent %s joined the bus", alias, extra={"alias": alias, "pid": pid})
        for _, sender, message in self._pending_start.pop(alias, deque()):
            if sender == INTERNAL:
                self._deliver(sender, message)  # its outcome callback is still registered
            else:
                self._route(sender, message)  # the peer policy again: a reload may have come
        self.on_hello(alias, pid)

    def _on_ack(self, dest: str, rids: tuple[int, ...]) -> None:
        for rid in rids:
            flight = self._inflight.get(rid)
            if flight is None or flight.dest != dest:
                self.counters["stray_acks"] += 1  # late (already timed out) or not theirs
                continue
            del self._inflight[rid]
            self.counters["delivered"] += 1
            if flight.sender == INTERNAL:
                callback = self._injected.pop(flight.message_id, None)
                if callback is not None:
                    callback(None, "")
            else:
                self._acks_out.setdefault(flight.sender, []).append(flight.message_id)
                if flight.question:
                    self._open_question(flight)

    def _open_question(self, flight: InFlight) -> None:
        questions = self._questions.setdefault(flight.dest, {})
        if len(questions) >= OPEN_QUESTIONS_LIMIT:
            del questions[next(iter(questions))]
        questions[flight.message_id] = flight.sender

    def _flush_acks(self) -> None:
        """After each burst: one Ack frame per sender, however many messages it covers."""
        if not self._acks_out:
            return
        assert self._owner is not None
        for sender, ids in self._acks_out.items():
            to = self._alias_rid.get(sender)
            if to is not None:
                self._owner.send_nowait([to, encode(Ack(ids=tuple(ids)))])
        self._acks_out = {}

    def _refuse(
        self, sender: str, message_id: str, code: str, detail: str, *, count: bool = True
    ) -> None:
        if count:
            self.counters[code] += 1
        if sender == INTERNAL:
            callback = self._injected.pop(message_id, None)
            if callback is not None:
                callback(code, detail)
            return
        to = self._alias_rid.get(sender)
        if to is not None and self._owner is not None and not self._owner.closed:
            self._owner.send_nowait([to, encode(Refusal(id=message_id, code=code, detail=detail))])

    def reply(self, alias: str, response: Response) -> None:
        """Send a service response to an agent (used by daemon services)."""
        to = self._alias_rid.get(alias)
        if to is not None and self._owner is not None and not self._owner.closed:
            self._owner.send_nowait([to, encode(response)])

    def _on_drop(self, frames: Frames, reason: str) -> None:
        """A frame the socket would not take (peer gone, or its queue full)."""
        dest = self._rid_alias.get(frames[0], "?")
        self.counters["send_failed"] += 1
        try:
            frame = msgspec.msgpack.decode(frames[1], type=Deliver)
        except msgspec.MsgspecError:
            return  # an Ack or Refusal for a sender that has gone: nothing to tell anyone
        flight = self._inflight.pop(frame.rid, None)
        if flight is not None:
            self._refuse(
                flight.sender, flight.message_id, "unavailable", f"agent {dest!r}: {reason}"
            )

    async def _sweep_timeouts(self) -> None:
        while True:
            await trio.sleep(0.25)
            now = trio.current_time()
            for kind, count in self._refusal_log.flush(now):
                self._log_refusal(kind, count)
            order = self._order
            while order:
                flight = self._inflight.get(order[0])
                if flight is None:
                    order.popleft()
                    continue
                if flight.deadline > now:
                    break
                del self._inflight[order.popleft()]
                self._refuse(
                    flight.sender,
                    flight.message_id,
                    "timeout",
                    f"no ack from {flight.dest!r} within {self.delivery_timeout:g}s",
                )
            for alias, queue in list(self._pending_start.items()):
                while queue and queue[0][0] + self.delivery_timeout <= now:
                    _, sender, message = queue.popleft()
                    self._refuse(
                        sender, message.id, "timeout", f"agent {alias!r} did not start in time"
                    )

    # --- status ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        outcomes = ("delivered", *REFUSAL_CODES)
        return {
            "endpoint": self.endpoint,
            "server_public_key": self.server_public.decode(),
            "connected": sorted(self.connected),
            "in_flight": len(self._inflight),
            "open_questions": sum(len(q) for q in self._questions.values()),
            "parked": self._owner.parked() if self._owner else 0,
            "outcomes": {name: self.counters[name] for name in outcomes},
            "refused_connections": {
                "zap_denied": self.counters["zap_denied"],
                "handshake_failed": self.counters["handshake_failed"],
            },
            "other": {
                k: v
                for k, v in self.counters.items()
                if k not in outcomes and k not in ("zap_denied", "handshake_failed")
            },
            "at": time.time(),
        }
