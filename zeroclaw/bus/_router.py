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

Every decision and map lives in `RouterCore` (sans I/O, ADR 0018); this class owns the
sockets (router, ZAP, monitor), the keys, the service tasks and the clock, feeds the core
decoded frames and executes the actions it returns. Services and hooks are given at
construction.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import os
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import msgspec
import trio
import zmq
from zmq.utils import z85

from .._log_throttle import LogThrottle
from .._router_stats import RouterStats
from .._unix import owner_only_umask
from ..config import Config
from ..events import EventSink, RouteRefused
from ._origin import DAEMON_SENDER, Origin
from ._policy import PeerPolicy
from ._router_core import (
    AgentJoined,
    CallService,
    DropParked,
    Forward,
    InjectOutcome,
    QuestionAdmission,
    Refuse,
    RequestStart,
    Respond,
    RouterCore,
    SendAck,
    Traffic,
    admit_every_question,
)
from ._wire import (
    Ack,
    Deliver,
    Heartbeat,
    Hello,
    Message,
    Refusal,
    RefusalCode,
    Request,
    Response,
    SalvagedIds,
    Send,
    WireError,
    decode_from_agent,
    encode,
    salvage_ids,
)
from ._zsocket import Frames, SocketOwner

NO_IDS = SalvagedIds(None, None)

log = logging.getLogger("zeroclaw.router")

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = b"zeroclaw"
HWM = 10_000
SUN_PATH_MAX = 107
REFUSAL_LOG_INTERVAL_SECS = 10.0  # failed handshakes: one line per kind per interval
SERVICE_CONCURRENCY = 64  # awaited service calls running at once, per service
MAX_CALLS_PER_SENDER = 32  # one sender's awaited calls to one service, waiting or running

def monitor_event(frames: Frames) -> str:
    """The event a libzmq monitor message reports: its first frame holds a 16-bit event id
    and a 32-bit value, its second the endpoint. ValueError or struct.error if it is not
    one. (pyzmq's own parser is in a module that imports asyncio.)"""
    if len(frames) != 2:
        raise ValueError("a monitor message has two frames")
    event_id, _value = struct.unpack("=hi", frames[0])
    return str(zmq.Event(event_id))


# A kind of refused handshake, for the log: what, detail (mechanism or event), address.
RefusalKind = tuple[str, str, str]

# A daemon service behind the router (memory, chat). The router calls it at once, in the
# order requests arrive, with the authenticated sender; it returns the Response to send
# back, None (no response, or one it gives later by other means), or an awaitable of
# either, which the router runs in its own nursery, at most SERVICE_CONCURRENCY at once;
# a sender with MAX_CALLS_PER_SENDER awaited calls to one service still open is answered
# `busy` at once.
ServiceResult = Response | None | Awaitable[Response | None]
ServiceHandler = Callable[[str, Request], ServiceResult]
# How an injected message ended: (None, "") when acked, else (refusal code, detail).
InjectOutcomeCallback = Callable[[RefusalCode | None, str], None]


class RouterHooks(Protocol):
    """What the router tells the rest of the daemon; given to the router when it is built."""

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        """An agent said hello on the bus: it is reachable, so it is running. `sandbox`
        and `sandbox_in_force` are what the agent says of its own sandbox."""

    def request_start(self, alias: str) -> bool:
        """A message waits for an on-demand agent that is not on the bus: start it.
        False: it cannot be started (not enabled any more, or fatal)."""

    def traffic(self, alias: str) -> None:
        """A message to or from this on-demand agent passed: it is not idle."""

    def agent_down(self, alias: str) -> None:
        """The agent's process is gone (services drop what they held for it)."""


class NoHooks:
    """A router nobody listens to (tests of the router alone)."""

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        return None

    def request_start(self, alias: str) -> bool:
        return False

    def traffic(self, alias: str) -> None:
        return None

    def agent_down(self, alias: str) -> None:
        return None


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
        services: Mapping[str, ServiceHandler] | None = None,
        hooks: RouterHooks | None = None,
        events: EventSink | None = None,
        confined_services: frozenset[str] = frozenset(),
        admission: QuestionAdmission = admit_every_question,
    ) -> None:
        self.ctx = ctx
        self.services: Mapping[str, ServiceHandler] = dict(services or {})
        self.hooks: RouterHooks = hooks if hooks is not None else NoHooks()
        self.events = events if events is not None else EventSink()
        self.endpoint_path = runtime_dir / "router.sock"
        if len(os.fsencode(self.endpoint_path)) > SUN_PATH_MAX:
            raise ValueError(
                f"router socket path {self.endpoint_path} is too long for a unix socket"
            )
        self.endpoint = f"ipc://{self.endpoint_path}"
        self.server_public, self._server_secret = zmq.curve_keypair()
        self.core = RouterCore(
            config,
            frozenset(self.services),
            confined_services=confined_services,
            admission=admission,
        )
        self._key_to_alias: dict[bytes, str] = {}
        self._alias_key: dict[str, bytes] = {}
        self._injected: dict[str, InjectOutcomeCallback] = {}  # message id -> outcome callback
        # alias -> (pid, sandbox, in force) from its latest Hello, until AgentJoined is acted on
        self._hello_sandbox: dict[str, tuple[int, str, bool]] = {}
        self._limits = {name: trio.CapacityLimiter(SERVICE_CONCURRENCY) for name in self.services}
        self._calls: Counter[tuple[str, str]] = Counter()  # (service, sender) -> awaited calls
        self._refusal_log = LogThrottle[RefusalKind](
            REFUSAL_LOG_INTERVAL_SECS, overflow_key=("other", "", ""), max_keys=16
        )
        self._owner: SocketOwner | None = None
        self._zap_owner: SocketOwner | None = None
        # The timeout task's sleep: until the next deadline, none while nothing waits.
        self._sweep: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None  # runs awaited service calls
        # The clock, read once per drained burst (a read per frame showed in the profile);
        # None between bursts.
        self._burst_now: float | None = None

    @property
    def policy(self) -> PeerPolicy:
        """The peer-group policy of the running config (`route explain` shares it)."""
        return self.core.policy

    @property
    def connected(self) -> dict[str, int]:
        return self.core.connected

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

    # --- news from the supervisor -----------------------------------------------------------

    def update_config(self, config: Config) -> None:
        """Everything the router takes from the config (at start, and on reload)."""
        self.core.update_config(config)
        self._sweep_sooner()  # a shorter delivery timeout brings the next deadline forward

    def agent_down(self, alias: str) -> None:
        """The agent's process is gone: everything in flight to it is refused `unavailable`."""
        self.hooks.agent_down(alias)
        self.core.agent_down(alias)
        self._execute()

    def confine(self, identity: str) -> None:
        """Admit a sub-agent runtime's identity (issue 12): started on demand, reached only
        by what the daemon injects, allowed only the confined services."""
        self.core.confine(identity)

    def release(self, identity: str) -> None:
        self.core.release(identity)
        self._execute()

    def is_confined(self, identity: str) -> bool:
        return identity in self.core.confined

    def start_failed(self, alias: str, why: str) -> None:
        self.core.start_failed(alias, why)
        self._execute()

    # --- the tasks ------------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # Every socket made here is closed on every way out, a failure before its owner
        # runs included (a bind refused): the daemon's `ctx.term()` waits for each socket
        # of the context, so one left open would hang the daemon's exit for good.
        made: list[zmq.Socket[bytes]] = []
        try:
            await self._run(made, task_status)
        finally:
            self._nursery = None
            for sock in made:
                sock.close(linger=0)  # a no-op for a socket its owner closed already
            with contextlib.suppress(OSError):  # best effort; never masks why run ended
                self.endpoint_path.unlink(missing_ok=True)

    async def _run(self, made: list[zmq.Socket[bytes]], task_status: trio.TaskStatus[None]) -> None:
        zap = self.ctx.socket(zmq.REP)
        made.append(zap)
        zap.linger = 0
        zap.bind(ZAP_ENDPOINT)
        zap_owner = SocketOwner(zap, self._on_zap, name="zap", request_reply=True)
        self._zap_owner = zap_owner

        sock = self.ctx.socket(zmq.ROUTER)
        made.append(sock)
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
        made.insert(0, monitor)  # closed before the socket it monitors
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
                self._nursery = nursery
                nursery.start_soon(zap_owner.run)
                nursery.start_soon(owner.run)
                nursery.start_soon(monitor_owner.run)
                nursery.start_soon(self._sweep_timeouts)
                task_status.started()
        finally:
            if not sock.closed:
                sock.disable_monitor()

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
            self.core.counters["zap_denied"] += 1
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
            event = monitor_event(frames)
        except (ValueError, struct.error):  # a malformed monitor frame says nothing about a peer
            return True
        self.core.counters["handshake_failed"] += 1
        kind = ("handshake_failed", event, "")
        self._log_refusal(kind, self._refusal_log.event(kind, trio.current_time()))
        return True

    def _log_refusal(self, kind: RefusalKind, count: int) -> None:
        """One line for `count` refused handshakes of one kind (none when count is 0)."""
        if not count:
            self._sweep_sooner()  # counted for a later line: the sweep writes it when due
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

    # --- frames from agents: decode, feed the core, execute -------------------------------

    def _on_frames(self, frames: Frames, user: bytes) -> bool:
        core = self.core
        if len(frames) != 2 or not user:
            core.counters["malformed"] += 1
            return True
        rid, payload = frames
        sender = user.decode()  # the alias the ZAP handler bound to this connection's key
        max_frame = core.max_frame
        if len(payload) > max_frame:
            ids = salvage_ids(payload) if len(payload) <= 4 * max_frame else NO_IDS
            core.bad_frame(sender, "too_large", ids, f"frame exceeds {max_frame} bytes")
        else:
            try:
                frame = decode_from_agent(payload)
            except WireError as exc:  # broken, of another version, or nested too deeply
                core.bad_frame(sender, exc.code, salvage_ids(payload), str(exc)[:200])
            else:
                if isinstance(frame, Send):
                    if frame.message is None:
                        core.counters["malformed"] += 1
                    else:
                        now = self._burst_now
                        if now is None:
                            now = self._burst_now = trio.current_time()
                        core.send(sender, frame.message, now)
                elif isinstance(frame, Ack):
                    core.ack(sender, frame.rids)
                elif isinstance(frame, Hello):
                    self._hello_sandbox[sender] = (
                        frame.pid,
                        frame.sandbox,
                        frame.sandbox_in_force,
                    )
                    core.hello(sender, rid, frame.pid, trio.current_time())
                elif isinstance(frame, Heartbeat):
                    core.heartbeat()
                elif isinstance(frame, Request):
                    core.request(sender, frame)
        # The actions wait for the end of the burst (`_flush_acks`): the socket owner sends
        # nothing before the burst is drained anyway, and one pass over them is cheaper.
        return True

    def inject(self, message: Message, origin: Origin, on_outcome: InjectOutcomeCallback) -> None:
        """Deliver a conversation the daemon received (a CLI chat, say) to an agent, from
        DAEMON_SENDER; the core admits it by its origin. `on_outcome` is called once."""
        self._injected[message.id] = on_outcome
        self.core.inject(message, origin, trio.current_time())
        self._execute()

    def turn_opened(
        self, agent: str, turn: str, tools: tuple[str, ...] | None, on_behalf_of: Origin
    ) -> None:
        """The turn service opened chat `turn` on `agent` with this grant, for this origin:
        a question the agent sends from it passes that grant on (ADR 0052), and a refusal of
        it by the callee's budgets is told in that origin's terms."""
        self.core.turn_opened(agent, turn, tools, on_behalf_of)

    def turn_closed(self, agent: str, turn: str) -> None:
        self.core.turn_closed(agent, turn)

    def reply(self, alias: str, response: Response) -> None:
        """Send a service response to an agent (a service answering after its handler)."""
        self._send_response(alias, response)

    def _flush_acks(self) -> None:
        """After each burst of frames: its actions, then one Ack frame per sender."""
        self._burst_now = None
        self.core.flush_acks()
        self._execute()

    def _on_drop(self, frames: Frames, reason: str) -> None:
        """A frame the socket would not take (peer gone, or its queue full)."""
        try:
            rid: int | None = msgspec.msgpack.decode(frames[1], type=Deliver).rid
        except msgspec.MsgspecError:
            rid = None
        self.core.dropped(frames[0], rid, reason)
        self._execute()

    async def _sweep_timeouts(self) -> None:
        """Refuses what timed out and writes the refusal lines held back, each when due. It
        sleeps until the earliest of those, and for good while nothing waits: an idle daemon
        is not woken (ADR 0067). What adds a deadline brings the sleep forward
        (`_sweep_sooner`); a deadline added later than the earliest never needs to."""
        while True:
            with trio.CancelScope(deadline=self._sweep_due()) as self._sweep:
                await trio.sleep_forever()
            self._sweep = None
            now = trio.current_time()
            for kind, count in self._refusal_log.flush(now):
                self._log_refusal(kind, count)
            self.core.on_deadline(now)
            self._execute()

    def _sweep_due(self) -> float:
        return min(self.core.next_deadline(), self._refusal_log.next_flush())

    def _sweep_sooner(self) -> None:
        """The timeout task's sleep ends by the earliest deadline now known."""
        sweep = self._sweep
        if sweep is not None:
            due = self._sweep_due()
            if due < sweep.deadline:
                sweep.deadline = due

    # --- executing the core's actions -----------------------------------------------------

    def _execute(self) -> None:
        owner = self._owner
        core = self.core
        actions, core.out = core.out, []
        if self._sweep is not None and self._sweep.deadline == math.inf:
            # The sweep sleeps for good: whatever this burst left waiting needs it woken.
            # (Deliveries go out in deadline order: a busy sweep's deadline comes first.)
            self._sweep_sooner()
        # Once per batch, not per message: at info the hot path pays one attribute test.
        debug = log.isEnabledFor(logging.DEBUG)
        for action in actions:
            if isinstance(action, Forward):  # the hot path first
                assert owner is not None
                owner.send_nowait([action.conn, encode(action.frame)])
                if debug:
                    self._log_forward(action)
            elif isinstance(action, SendAck):
                if action.conn is not None and owner is not None:
                    owner.send_nowait([action.conn, encode(Ack(ids=action.ids))])
            elif isinstance(action, Traffic):
                self.hooks.traffic(action.alias)
            elif isinstance(action, Refuse):
                self._refused(action)
            elif isinstance(action, InjectOutcome):
                self._inject_outcome(action)
            elif isinstance(action, CallService):
                self._call_service(action)
            elif isinstance(action, Respond):
                if owner is not None and not owner.closed:
                    owner.send_nowait([action.conn, encode(action.response)])
            elif isinstance(action, RequestStart) and not self.hooks.request_start(action.alias):
                self.core.start_refused(action.alias)
                self._execute()
            elif isinstance(action, AgentJoined):
                self._joined(action)
            elif isinstance(action, DropParked) and owner is not None:
                owner.drop_parked(action.conn, action.reason)

    def _joined(self, action: AgentJoined) -> None:
        pid, sandbox, in_force = self._hello_sandbox.pop(action.alias, (action.pid, "", False))
        if pid != action.pid:  # a newer Hello's report is not this process's
            sandbox, in_force = "", False
        log.info(
            "agent %s joined the bus",
            action.alias,
            extra={
                "alias": action.alias,
                "pid": action.pid,
                "sandbox": sandbox,
                "sandbox_in_force": in_force,
            },
        )
        self.hooks.agent_hello(action.alias, action.pid, sandbox, in_force)

    def _log_forward(self, action: Forward) -> None:
        """Debug: a message the router delivers (the decision; the outcome is the Ack)."""
        message = action.frame.message
        if message is None:
            return
        log.debug(
            "route %s -> %s on %s: forwarded",
            message.from_,
            message.to,
            message.channel or "any channel",
            extra={
                "from": message.from_,
                "to": message.to,
                "channel": message.channel,
                "kind": message.kind,
                "message_id": message.id,
                "outcome": "forwarded",
            },
        )

    def _refused(self, action: Refuse) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "route %s -> %s on %s: refused %s (%s)",
                action.sender,
                action.to,
                action.channel or "any channel",
                action.code,
                action.detail,
                extra={
                    "from": action.sender,
                    "to": action.to,
                    "channel": action.channel,
                    "message_id": action.message_id,
                    "outcome": action.code,
                },
            )
        if action.code == "not_peers":
            log.info(
                "refused %s -> %s on %s: %s",
                action.sender,
                action.to,
                action.channel or "any channel",
                action.detail,
                extra={"from": action.sender, "to": action.to, "channel": action.channel},
            )
        self.events.publish(
            RouteRefused(action.sender, action.to, action.code, action.detail, action.channel)
        )
        owner = self._owner
        if action.conn is not None and owner is not None and not owner.closed:
            refusal = Refusal(id=action.message_id, code=action.code, detail=action.detail)
            owner.send_nowait([action.conn, encode(refusal)])

    def _inject_outcome(self, action: InjectOutcome) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "route %s -> %s on %s: %s",
                DAEMON_SENDER,
                action.to or "?",
                action.channel or "any channel",
                "delivered" if action.code is None else f"refused {action.code} ({action.detail})",
                extra={
                    "from": DAEMON_SENDER,
                    "to": action.to,
                    "channel": action.channel,
                    "message_id": action.message_id,
                    "outcome": action.code or "delivered",
                },
            )
        if action.code is not None:
            self.events.publish(
                RouteRefused(DAEMON_SENDER, action.to, action.code, action.detail, action.channel)
            )
        callback = self._injected.pop(action.message_id, None)
        if callback is not None:
            callback(action.code, action.detail)

    def _call_service(self, action: CallService) -> None:
        key = (action.name, action.sender)
        if self._calls[key] >= MAX_CALLS_PER_SENDER:
            # Answered at once: a sender that does not wait for its calls holds neither a
            # task and a body per call in the daemon nor every slot of the service.
            self.core.counters["service_busy"] += 1
            detail = f"{MAX_CALLS_PER_SENDER} calls to {action.name!r} are waiting already"
            self._send_response(
                action.sender,
                Response(id=action.request.id, ok=False, error="busy", detail=detail),
            )
            return
        result = self.services[action.name](action.sender, action.request)
        if isinstance(result, Response):
            self._send_response(action.sender, result)
        elif result is not None:
            assert inspect.isawaitable(result)
            assert self._nursery is not None
            self._calls[key] += 1
            self._nursery.start_soon(self._await_service, action, result)

    async def _await_service(
        self, action: CallService, pending: Awaitable[Response | None]
    ) -> None:
        key = (action.name, action.sender)
        try:
            async with self._limits[action.name]:
                response = await pending
        finally:
            self._calls[key] -= 1
            if not self._calls[key]:
                del self._calls[key]
        if response is not None:
            self._send_response(action.sender, response)

    def _send_response(self, alias: str, response: Response) -> None:
        conn = self.core.conn_of(alias)
        owner = self._owner
        if conn is not None and owner is not None and not owner.closed:
            owner.send_nowait([conn, encode(response)])

    # --- status ---------------------------------------------------------------------------

    def stats(self) -> RouterStats:
        core = self.core.stats()
        return RouterStats(
            endpoint=self.endpoint,
            server_public_key=self.server_public.decode(),
            connected=core.connected,
            in_flight=core.in_flight,
            open_questions=core.open_questions,
            parked=self._owner.parked() if self._owner else 0,
            outcomes=core.outcomes,
            refused_connections=core.refused_connections,
            other=core.other,
            at=time.time(),
        )
