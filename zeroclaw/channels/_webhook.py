"""The webhook channel adapter: one HTTP listener (hypercorn's trio worker, ADR 0025)
serving every webhook channel configured on one listen address.

A tiny ASGI app wires the pure checks of `_webhook_core` (size cap, channel, timestamp,
signature, replay, JSON, rate) to `ChannelHost.converse`. A turn runs in the adapter's
nursery, not in the request: when it must wait for an approval the request answers 202
with the approval id at once, the approval comes in on its own signed request, and the
final reply is read from the turn's URL. Pending turns are bounded and a finished turn's
result is kept for `keep_results_secs`. A channel with a `callback_url` answers a message
202 with its message id at once; the turn's approvals and its outcome are POSTed, signed
with the channel's secret, to that URL (retried with backoff, a bounded number in flight).
The secrets are read from the environment the
adapter is given and never logged or echoed.
"""

from __future__ import annotations

import logging
import secrets
import socket
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

import httpx
import msgspec
import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope, Scope

from .._asgi import ClientGone, answer_lifespan, bind_listener, read_body, serve_guarded
from .._http_guard import HttpBounds, http_bounds
from .._log_throttle import LogThrottle
from ..config import WebhookChannel
from ._adapter import ChannelStartFailed
from ._host import ChannelHost
from ._routing import Routed
from ._types import ChannelFailure, ChannelRefused, Inbound, Outcome, Scheduled
from ._webhook_core import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Approve,
    Gate,
    Health,
    Messages,
    Ready,
    TurnResult,
    WebhookError,
    approval_callback_body,
    callback_body,
    callback_delays,
    callback_verdict,
    error,
    outcome_headers,
    outcome_response,
    parse_approval,
    parse_message,
    parse_route,
    schedule_body,
    sign,
)

log = logging.getLogger("zeroclaw.channels.webhook")

MAX_PENDING_TURNS = 256
KEEP_RESULTS_SECS = 600.0
MAX_WAIT_SECS = 30.0  # the longest `?wait=` a turn URL's GET holds the request
MAX_CALLBACKS = 64  # callbacks being delivered at once; beyond, one is dropped (logged)
CALLBACK_BACKOFF_SECS = 1.0  # the first wait before a callback is tried again (doubling)
CALLBACK_TIMEOUT_SECS = 10.0  # one attempt's connect/read/write bound
REJECT_LOG_INTERVAL_SECS = 10.0  # a flood of bad requests is a line per code per interval

_Response = tuple[int, bytes, list[tuple[bytes, bytes]]]


@dataclass
class _Approval:
    what: str
    answered: trio.Event = field(default_factory=trio.Event)
    approved: bool = False


@dataclass
class _Turn:
    """One message's turn while it runs in the adapter's nursery."""

    alias: str
    message_id: str | None = None  # set in callback mode: the id the 202 gave
    first: trio.Event = field(default_factory=trio.Event)  # an outcome or an approval
    done: trio.Event = field(default_factory=trio.Event)
    turn_id: str | None = None  # its first approval's id, once it asked
    first_what: str = ""  # what that approval was for (the 202 says it)
    asking: dict[str, _Approval] = field(default_factory=dict)
    outcome: Outcome | None = None
    expires: float = float("inf")


def _json(
    status: int, value: object, headers: list[tuple[bytes, bytes]] | None = None
) -> _Response:
    return status, msgspec.json.encode(value), headers or []


def _error(err: WebhookError) -> _Response:
    headers = [] if err.retry_after is None else [(b"retry-after", str(err.retry_after).encode())]
    return err.status, err.body(), headers


class WebhookAdapter:
    """`listen`: the `host:port` all `channels` (channel key -> its config) share; `env`:
    where each channel's `secret_env` is read (the daemon's environment)."""

    def __init__(
        self,
        listen: str,
        channels: Mapping[str, WebhookChannel],
        env: Mapping[str, str],
        *,
        max_pending: int = MAX_PENDING_TURNS,
        keep_results_secs: float = KEEP_RESULTS_SECS,
        max_callbacks: int = MAX_CALLBACKS,
        callback_backoff_secs: float = CALLBACK_BACKOFF_SECS,
        callback_timeout_secs: float = CALLBACK_TIMEOUT_SECS,
    ) -> None:
        self.listen = listen
        self._channels = {key.removeprefix("webhook."): hook for key, hook in channels.items()}
        self._env = env
        self.max_pending = max_pending
        self.keep_results_secs = keep_results_secs
        self.max_callbacks = max_callbacks
        self.callback_backoff_secs = callback_backoff_secs
        self.callback_timeout_secs = callback_timeout_secs
        self.callbacks: Counter[str] = Counter()  # delivered / failed / dropped
        self.port: int | None = None  # the bound port, once serving
        self.rejected: Counter[str] = Counter()  # requests refused here, by code
        self._reject_log = LogThrottle[str](REJECT_LOG_INTERVAL_SECS, overflow_key="other")
        self._gate: Gate | None = None
        self._host: ChannelHost | None = None
        self._nursery: trio.Nursery | None = None
        self._turns: dict[str, _Turn] = {}  # turn id -> a turn that asked for approval
        self._approvals: dict[str, _Turn] = {}  # pending approval id -> its turn
        self._secrets: dict[str, bytes] = {}
        self._client: httpx.AsyncClient | None = None
        self._callback_turns = 0  # turns running in callback mode
        self._callbacks_in_flight = 0
        self._callback_settled = trio.Event()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(sorted(f"webhook.{alias}" for alias in self._channels))

    @property
    def callback_settled(self) -> trio.Event:
        """Set at the next callback delivered, failed or dropped (then a fresh one)."""
        return self._callback_settled

    def _settle(self, outcome: str) -> None:
        self.callbacks[outcome] += 1
        self._callback_settled.set()
        self._callback_settled = trio.Event()

    def stats(self) -> dict[str, object]:
        return {
            "rejected": dict(self.rejected),
            "pending_turns": len(self._turns),
            "callbacks": dict(self.callbacks),
            "callbacks_in_flight": self._callbacks_in_flight,
        }

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        secret_values: dict[str, bytes] = {}
        for alias, hook in sorted(self._channels.items()):
            value = self._env.get(hook.secret_env)
            if not value:
                raise ChannelStartFailed(
                    f"webhook.{alias}: its signing secret variable {hook.secret_env} is not set"
                )
            secret_values[alias] = value.encode()
        self._gate = Gate(self._channels, secret_values)
        self._secrets = secret_values
        self._host = host
        sock = self._bind()
        timeout = httpx.Timeout(self.callback_timeout_secs)
        async with (
            httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client,
            trio.open_nursery() as nursery,
        ):
            self._client = client
            self._nursery = nursery
            await nursery.start(
                partial(
                    serve_guarded,
                    self._app,
                    sock,
                    name=self.listener_name(),
                    bounds=self.bounds(),
                    log_name="zeroclaw.channels.webhook.http",
                )
            )
            log.info("webhook listener on %s serves %s", self.listen, ", ".join(self.keys))
            task_status.started()

    def listener_name(self) -> str:
        """Its name in metrics: the address it serves (the bound port, when it was 0)."""
        host = self.listen.rpartition(":")[0]
        return f"webhook {host}:{self.port}"

    def bounds(self) -> HttpBounds:
        """The listener's bounds: the strictest of its channels' `limits`."""
        each = [http_bounds(hook.limits) for hook in self._channels.values()]
        return HttpBounds(
            header_timeout_secs=min(b.header_timeout_secs for b in each),
            body_timeout_secs=min(b.body_timeout_secs for b in each),
            idle_timeout_secs=min(b.idle_timeout_secs for b in each),
            max_connections=min(b.max_connections for b in each),
        )

    def _bind(self) -> socket.socket:
        try:
            sock = bind_listener(self.listen)
        except OSError as exc:
            raise ChannelStartFailed(
                f"webhook listener {self.listen} ({', '.join(self.keys)}) cannot bind: "
                f"{exc.strerror or exc}"
            ) from exc
        self.port = sock.getsockname()[1]
        return sock

    # ------------------------------------------------------------------ ASGI

    async def _app(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            status, body, headers = await self._handle(scope, receive)
        except ClientGone:
            return
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _handle(self, scope: HTTPScope, receive: ASGIReceiveCallable) -> _Response:
        route = parse_route(scope["method"], scope["path"])
        if isinstance(route, WebhookError):
            return _error(route)
        if isinstance(route, Health):
            return _json(200, {"status": "ok"})
        if isinstance(route, Ready):
            return _json(200, {"ready": self._nursery is not None, "channels": self.keys})
        assert self._gate is not None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        stamp, signature = headers.get(TIMESTAMP_HEADER), headers.get(SIGNATURE_HEADER)
        if isinstance(route, TurnResult):
            # A GET has no body: its path is what is signed; reading twice is harmless.
            payload = scope["path"].encode()
            refused = self._gate.verify(
                route.alias, stamp, signature, payload, time.time(), once=False
            )
            if refused is not None:
                return self._reject(refused)
            return await self._turn_result(route, scope["query_string"])
        body = await self._read(receive, headers, self._gate.body_limit(route.alias))
        if isinstance(body, WebhookError):
            return self._reject(body)
        now = time.time()
        # A replay is refused here; the signature is recorded only once the request is to
        # be acted on (a flood refused by its rate, or to unknown approvals, must not fill
        # the nonce cache every channel and sender of this listener shares).
        refused = self._gate.verify(route.alias, stamp, signature, body, now, once=False)
        if refused is not None:
            return self._reject(refused)
        assert stamp is not None  # verified
        assert signature is not None
        if isinstance(route, Approve):
            decision = parse_approval(body)
            if isinstance(decision, WebhookError):
                return self._reject(decision)
            return self._approve(route, decision.approved, stamp, signature, now)
        assert isinstance(route, Messages)
        message = parse_message(body)
        if isinstance(message, WebhookError):
            return self._reject(message)
        refused = self._gate.rate(route.alias, message.sender, now)
        if refused is None:
            refused = self._gate.first_use(stamp, signature, now)
        if refused is not None:
            return self._reject(refused)
        inbound = Inbound(
            f"webhook.{route.alias}", message.sender, message.text, message.session, message.agent
        )
        if self._channels[route.alias].callback_url is not None:
            return self._accept(route.alias, inbound)
        return await self._converse(route.alias, inbound)

    def _reject(self, refused: WebhookError) -> _Response:
        self.rejected[refused.error] += 1
        count = self._reject_log.event(refused.error, trio.current_time())
        if count:
            log.info(
                "webhook %s refused %d request(s): %s",
                self.listen,
                count,
                refused.error,
                extra={"rule": refused.error},
            )
        return _error(refused)

    async def _read(
        self, receive: ASGIReceiveCallable, headers: Mapping[str, str], limit: int
    ) -> bytes | WebhookError:
        """The body, or 413 as soon as it is over `limit` (the rest is never read)."""
        body = await read_body(receive, headers.get("content-length"), limit)
        if body is None:
            return error(413, "too_large", f"the body is over {limit} bytes")
        return body

    # ------------------------------------------------------------------ turns

    async def _converse(self, alias: str, inbound: Inbound) -> _Response:
        assert self._nursery is not None
        turn = _Turn(alias)
        # The turn outlives this request when it waits for an approval (202).
        self._nursery.start_soon(self._run, turn, inbound)
        await turn.first.wait()
        if turn.outcome is not None:
            status, body = outcome_response(turn.outcome)
            return status, body, outcome_headers(turn.outcome)
        # Not read from `asking`: the approval may already have timed out by now.
        assert turn.turn_id is not None
        return _json(
            202,
            {
                "approval_id": turn.turn_id,
                "what": turn.first_what,
                "status_url": f"/v1/channels/{alias}/turns/{turn.turn_id}",
            },
        )

    async def _run(self, turn: _Turn, inbound: Inbound, routed: Routed | None = None) -> None:
        assert self._host is not None

        async def ask(rid: str, what: str) -> bool:
            return await self._ask(turn, what)

        outcome: Outcome
        try:
            outcome = await self._host.converse(inbound, ask=ask, routed=routed)
        except Exception:  # one turn's failure must not take the listener down
            log.exception("webhook turn on %s failed", inbound.channel)
            outcome = ChannelFailure("unavailable", "the turn failed in the daemon")
        turn.outcome = outcome
        turn.expires = trio.current_time() + self.keep_results_secs
        turn.first.set()
        turn.done.set()

    async def _ask(self, turn: _Turn, what: str) -> bool:
        """Park the approval until its signed answer comes (the host's timeout cancels)."""
        self._sweep()
        if turn.turn_id is None:
            if len(self._turns) >= self.max_pending:
                log.warning("webhook %s: %d turns pending, denying", self.listen, len(self._turns))
                return False
            turn.turn_id, turn.first_what = secrets.token_urlsafe(18), what
            self._turns[turn.turn_id] = turn
            approval_id = turn.turn_id
        else:
            approval_id = secrets.token_urlsafe(18)
        pending = turn.asking[approval_id] = _Approval(what)
        self._approvals[approval_id] = turn
        turn.first.set()
        if turn.message_id is not None:
            status_url = f"/v1/channels/{turn.alias}/turns/{turn.turn_id}"
            body = approval_callback_body(turn.message_id, approval_id, what, status_url)
            self._callback(turn.alias, turn.message_id, body)
        try:
            await pending.answered.wait()
            return pending.approved
        finally:
            del turn.asking[approval_id]
            del self._approvals[approval_id]

    # ------------------------------------------------------------------ callbacks

    def _accept(self, alias: str, inbound: Inbound) -> _Response:
        """Callback mode: 202 with the message id, the turn runs on. A routing refusal is
        decided before any turn, so it is still answered here (4xx)."""
        assert self._host is not None
        assert self._nursery is not None
        if self._callback_turns >= self.max_pending:
            return self._reject(error(503, "busy", "too many turns running; retry later"))
        routed = self._host.route(inbound)
        if isinstance(routed, ChannelRefused):
            status, body = outcome_response(routed)
            return status, body, outcome_headers(routed)
        turn = _Turn(alias, message_id=secrets.token_urlsafe(18))
        self._callback_turns += 1
        self._nursery.start_soon(self._run_for_callback, turn, inbound, routed)
        return _json(202, {"message_id": turn.message_id})

    async def _run_for_callback(self, turn: _Turn, inbound: Inbound, routed: Routed) -> None:
        try:
            await self._run(turn, inbound, routed)
        finally:
            self._callback_turns -= 1
        assert turn.outcome is not None
        assert turn.message_id is not None
        status, body = outcome_response(turn.outcome)
        self._callback(turn.alias, turn.message_id, callback_body(turn.message_id, status, body))

    def _callback(self, alias: str, message_id: str, body: bytes) -> None:
        """Deliver `body` to the channel's callback URL in the background (bounded)."""
        assert self._nursery is not None
        if self._callbacks_in_flight >= self.max_callbacks:
            self._settle("dropped")
            log.warning(
                "webhook.%s: %d callbacks in flight, dropped the one for message %s",
                alias,
                self._callbacks_in_flight,
                message_id,
            )
            return
        self._callbacks_in_flight += 1
        self._nursery.start_soon(self._deliver, alias, message_id, body)

    async def _deliver(self, alias: str, message_id: str, body: bytes) -> None:
        try:
            failed = await self._attempts(alias, body)
            self._settle("failed" if failed else "delivered")
            if failed:
                log.warning(
                    "webhook.%s: callback for message %s %s",  # "not delivered after ..."
                    alias,
                    message_id,
                    failed,
                    extra={"channel": f"webhook.{alias}"},
                )
        except Exception:  # a bad URL or a client bug must not take the listener down
            self._settle("failed")
            log.exception("webhook.%s: callback for message %s failed", alias, message_id)
        finally:
            self._callbacks_in_flight -= 1

    async def _attempts(self, alias: str, body: bytes) -> str | None:
        """POST `body` to the channel's callback URL, signed, retried with backoff: None
        once a 2xx answers, else what the last attempt met."""
        assert self._client is not None
        hook = self._channels[alias]
        assert hook.callback_url is not None
        delays = callback_delays(hook.callback_max_attempts, self.callback_backoff_secs)
        last = ""
        for attempt in range(hook.callback_max_attempts):
            # A fresh timestamp per attempt: a late retry is still inside the window.
            stamp = str(int(time.time()))
            headers = {
                "content-type": "application/json",
                TIMESTAMP_HEADER: stamp,
                SIGNATURE_HEADER: sign(self._secrets[alias], stamp, body),
            }
            status: int | None
            try:
                # Streamed and never read: the receiver's body is not ours to buffer.
                async with self._client.stream(
                    "POST", hook.callback_url, content=body, headers=headers
                ) as response:
                    status = response.status_code
                last = f"HTTP {status}"
            except httpx.TransportError as exc:  # connection errors and timeouts
                status, last = None, type(exc).__name__
            verdict = callback_verdict(status)
            if verdict == "delivered":
                return None
            if verdict == "give_up":
                break
            if attempt < len(delays):
                await trio.sleep(delays[attempt])
        return f"not delivered after {attempt + 1} attempt(s) (last: {last})"

    async def push(self, key: str, scheduled: Scheduled) -> str | None:
        """A scheduled run's outcome, POSTed to the channel's callback URL like a callback
        (signed, retried), awaited; within the same bound of callbacks in flight."""
        alias = key.removeprefix("webhook.")
        hook = self._channels.get(alias)
        if hook is None or hook.callback_url is None or self._client is None:
            return f"{key} has no callback_url to deliver to"
        if self._callbacks_in_flight >= self.max_callbacks:
            self._settle("dropped")
            return f"{self._callbacks_in_flight} callbacks in flight"
        status, body = outcome_response(scheduled.outcome)
        self._callbacks_in_flight += 1
        try:
            failed = await self._attempts(
                alias, schedule_body(scheduled.schedule, scheduled.run_id, status, body)
            )
        except Exception as exc:
            log.exception("webhook.%s: delivery of run %s failed", alias, scheduled.run_id)
            failed = f"failed: {type(exc).__name__}"
        finally:
            self._callbacks_in_flight -= 1
        self._settle("failed" if failed else "delivered")
        return failed

    def _approve(
        self, route: Approve, approved: bool, stamp: str, signature: str, now: float
    ) -> _Response:
        turn = self._approvals.get(route.approval_id)
        if turn is None or turn.alias != route.alias:
            return self._reject(
                error(
                    404, "unknown_approval", "no pending approval of that id (answered or expired?)"
                )
            )
        assert self._gate is not None
        refused = self._gate.first_use(stamp, signature, now)
        if refused is not None:
            return self._reject(refused)
        pending = turn.asking[route.approval_id]
        pending.approved = approved
        pending.answered.set()
        return _json(200, {"approval_id": route.approval_id, "approved": approved})

    async def _turn_result(self, route: TurnResult, query: bytes) -> _Response:
        self._sweep()
        turn = self._turns.get(route.approval_id)
        if turn is None or turn.alias != route.alias:
            return self._reject(error(404, "unknown_approval", "no turn of that id (expired?)"))
        wait = _wait_secs(query)
        if wait > 0:
            with trio.move_on_after(wait):
                await turn.done.wait()
        if turn.outcome is not None:
            status, body = outcome_response(turn.outcome)
            return status, body, outcome_headers(turn.outcome)
        approvals = [{"approval_id": i, "what": a.what} for i, a in turn.asking.items()]
        return _json(202, {"status": "pending", "approvals": approvals})

    def _sweep(self) -> None:
        now = trio.current_time()
        for turn_id, turn in list(self._turns.items()):
            if turn.expires < now:
                del self._turns[turn_id]


def _wait_secs(query: bytes) -> float:
    """`?wait=<seconds>`: how long a turn URL's GET may wait for the result (bounded)."""
    for part in query.decode("latin-1").split("&"):
        name, _, value = part.partition("=")
        if name == "wait":
            try:
                return min(max(float(value), 0.0), MAX_WAIT_SECS)
            except ValueError:
                return 0.0
    return 0.0
