"""The gateway's listener (issue 29): one ASGI app on hypercorn's trio worker, within the
bounds every HTTP listener of the daemon gets (`serve_guarded`, ADR 0045), serving the
OpenAI-compatible API under `/v1`, the operator's dashboard under `/ui`, and the updates of
a Telegram bot in webhook mode under `/telegram/<alias>` (ADR 0065).

Thin: the decisions are `_api` and `_ui`, the HTML `_pages`. An API turn runs in its
request's task through the channel host (routing, admission, grant, the operator's
approval queue), so a client that goes away cancels its turn: the connection's server
is cancelled when the client closes (`serve_guarded`), and the turn with it. The
dashboard reads the daemon through the control socket's own command table, in process
(`Operator`): it shows and does exactly what `zeroclaw status`, `approvals`, `memory`,
`invocations` and `usage` do, and nothing else.
"""

from __future__ import annotations

import datetime
import hmac
import logging
import os
import secrets
import socket
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Protocol, TypeVar, cast

import msgspec
import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope, Scope

from .._asgi import ClientGone, answer_lifespan, bind_listener, read_body, serve_guarded
from .._http_guard import HttpBounds, http_bounds
from .._log_throttle import LogThrottle
from ..channels import (
    ChannelAnswer,
    ChannelHost,
    ChannelRefused,
    ChannelStartFailed,
    Inbound,
    RateLimiter,
    Scheduled,
)
from ..config import GatewayConfig, GatewayToken
from ..control import (
    AnyRequest,
    ApprovalApprove,
    ApprovalDeny,
    CommandTable,
    Exchange,
    InvocationsList,
    MemoryCommand,
    Reply,
    Request,
    Status,
    UsageQuery,
)
from ..events import EventSink
from ..turns import MemoryRecords
from ._api import (
    SSE_DONE,
    ApiError,
    ChatCompletions,
    GetModel,
    ListModels,
    TurnAsk,
    answer_or_error,
    api_error,
    bearer,
    chunk_body,
    completion_body,
    finish_reason,
    identify,
    model_entry,
    model_not_found,
    models_body,
    outcome_error,
    parse_api_route,
    parse_chat,
    sse,
    unauthorized,
    usage_of,
)
from ._pages import Overview, approvals_fragment, memory_page, not_found_page, overview_page
from ._pages import signin_page as render_signin
from ._ui import (
    MAX_FORM_BYTES,
    SESSION_COOKIE,
    SESSION_TTL_SECS,
    SIGNIN_COOKIE,
    SIGNIN_PER_MINUTE,
    Sessions,
    UiRoute,
    UiSession,
    cookie,
    cookies,
    csrf_refusal,
    foreign_host,
    form,
    own_origin,
    page_headers,
    parse_ui_route,
    redirect,
    token_matches,
)

log = logging.getLogger("zeroclaw.gateway")

R = TypeVar("R")
Headers = list[tuple[bytes, bytes]]

MAX_FOLLOWERS = 16  # dashboards following the events at once
FOLLOW_BACKLOG = 50  # events a dashboard is shown when it connects
KEEPALIVE_SECS = 15.0  # a comment on a quiet event stream: a gone client is noticed
REJECT_LOG_INTERVAL_SECS = 10.0
MEMORY_PAGE = 100
TELEGRAM_SECRET_HEADER = b"x-telegram-bot-api-secret-token"
MAX_UPDATE_BYTES = 1 << 20  # an update: a 4,096-character message and what it replies to


class Operator(Protocol):
    """The control socket's command table, in process: a request, its one reply."""

    def __call__(self, request: Request[R], /) -> Awaitable[Reply[R]]: ...


def table_operator(table: CommandTable) -> Operator:
    """The daemon's command table as an `Operator`: each request runs its handler in
    process, as the control socket would run it (one reply; nothing streams)."""

    async def ask(request: Request[R], /) -> Reply[R]:
        _, inbox = trio.open_memory_channel[AnyRequest](0)
        async with inbox:
            reply = await table.dispatch(cast(AnyRequest, request), Exchange(_no_stream, inbox))
        return cast(Reply[R], reply)

    return ask


async def _no_stream(reply: Reply[object]) -> None:
    raise RuntimeError("the dashboard asks only for commands with one reply")


class Gateway:
    """`settings`: the running config's `[gateway]` (read per request: a reload's tokens
    and reach apply at once; the listen address and TLS only at a restart of the
    listener); `env`: where the tokens are read, once, at start."""

    def __init__(
        self,
        settings: Callable[[], GatewayConfig | None],
        env: Mapping[str, str],
        operator: Operator,
        events: EventSink,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._env = env
        self._host: ChannelHost | None = None
        self._operator = operator
        self._events = events
        self._clock = clock
        self._tokens: dict[str, bytes] = {}
        self._operator_token = b""
        self._limiters: dict[str, RateLimiter] = {}
        self._signin_rate = RateLimiter(SIGNIN_PER_MINUTE)
        self._sessions = Sessions()
        self._followers = 0
        self._secure = False
        self.port: int | None = None
        self.rejected: Counter[str] = Counter()  # refusals by code
        self.turns: Counter[str] = Counter()  # API turns by outcome
        self._reject_log = LogThrottle[str](REJECT_LOG_INTERVAL_SECS, overflow_key="other")

    # ------------------------------------------------------------------ serving

    def _config(self) -> GatewayConfig:
        settings = self._settings()
        assert settings is not None  # the gateway runs only while configured
        return settings

    @property
    def keys(self) -> tuple[str, ...]:
        """As a channel adapter: `gateway`, and each token's channel."""
        settings = self._settings()
        tokens = () if settings is None else tuple(f"api.{n}" for n in sorted(settings.tokens))
        return ("gateway", *tokens)

    async def push(self, key: str, scheduled: Scheduled) -> str | None:
        """An API client is answered on its own request and has no address to be written
        to later: the config rules refuse a schedule delivered to a gateway channel."""
        return f"{key}: a gateway channel has nobody to deliver a scheduled reply to"

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self._host = host
        settings = self._config()
        self._tokens = {
            name: self._env.get(token.token_env, "").encode()
            for name, token in settings.tokens.items()
        }
        unset = sorted(n for n, value in self._tokens.items() if not value)
        if unset:  # the daemon refuses such a config; a token left empty admits no one
            log.warning("gateway tokens without a value (refused): %s", ", ".join(unset))
        if settings.operator_token_env is not None:
            self._operator_token = self._env.get(settings.operator_token_env, "").encode()
        context = _tls_context(settings)
        self._secure = context is not None
        sock = self._bind(settings.listen)
        await serve_guarded(
            self._app,
            sock,
            name=self.listener_name(settings.listen),
            bounds=self.bounds(),
            log_name="zeroclaw.gateway.http",
            ssl_context=context,
            task_status=task_status,
        )

    def bounds(self) -> HttpBounds:
        return http_bounds(self._config().limits)

    def listener_name(self, listen: str) -> str:
        return f"gateway {listen.rpartition(':')[0]}:{self.port}"

    def _bind(self, listen: str) -> socket.socket:
        try:
            sock = bind_listener(listen)
        except OSError as exc:
            raise ChannelStartFailed(
                f"gateway {listen} cannot bind: {exc.strerror or exc}"
            ) from exc
        self.port = sock.getsockname()[1]
        log.info("gateway listening on %s", listen.rpartition(":")[0] + f":{self.port}")
        return sock

    def stats(self) -> dict[str, object]:
        return {
            "rejected": dict(self.rejected),
            "turns": dict(self.turns),
            "sessions": len(self._sessions),
            "followers": self._followers,
        }

    # ------------------------------------------------------------------ ASGI

    async def _app(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        try:
            if path == "/v1" or path.startswith("/v1/"):
                await self._api(scope, receive, send)
            elif path == "/ui" or path.startswith("/ui/"):
                await self._ui(scope, receive, send)
            elif path.startswith("/telegram/"):
                await self._telegram(scope, receive, send)
            elif path == "/healthz":
                await _respond(
                    send, 200, b'{"status":"ok"}', [(b"content-type", b"application/json")]
                )
            else:
                await self._api_error(send, api_error(404, "unknown_endpoint", "no such path"))
        except ClientGone:
            return

    def _reject(self, code: str) -> None:
        self.rejected[code] += 1
        count = self._reject_log.event(code, trio.current_time())
        if count:
            log.info("gateway refused %d request(s): %s", count, code, extra={"rule": code})

    async def _api_error(
        self, send: ASGISendCallable, error: ApiError, *, unread: HTTPScope | None = None
    ) -> None:
        """`unread`: the request, when its body is answered unread. The body then stays on
        the connection, which the server closes: said here, so the client does not send
        its next request on it (and find it closed under it)."""
        self._reject(error.code)
        headers = [(b"content-type", b"application/json"), *error.headers()]
        if unread is not None and _has_body(unread):
            headers.append((b"connection", b"close"))
        await _respond(send, error.status, error.body(), headers)

    # ------------------------------------------------------------------ the API

    async def _api(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        route = parse_api_route(scope["method"], scope["path"])
        name = identify(bearer(scope["headers"]), self._tokens)
        token = None if name is None else self._config().tokens.get(name)
        if name is None or token is None:  # unknown endpoints too: nothing for no one
            await self._api_error(send, unauthorized(), unread=scope)
            return
        if isinstance(route, ApiError):
            await self._api_error(send, route, unread=scope)
            return
        wait = self._limiter(name, token).admit(name, self._clock())
        if wait is not None:
            error = ApiError(
                429, "rate_limit_exceeded", f"over this key's rate; retry in {wait} s", None, wait
            )
            await self._api_error(send, error, unread=scope)
            return
        reach = self._reach(token)
        created = int(self._clock())
        if isinstance(route, ListModels):
            await _respond(send, 200, models_body(reach, created), _JSON)
            return
        if isinstance(route, GetModel):
            if route.model not in reach:
                await self._api_error(send, model_not_found(route.model))
                return
            await _respond(send, 200, msgspec.json.encode(model_entry(route.model, created)), _JSON)
            return
        assert isinstance(route, ChatCompletions)
        body = await _read_body(receive, scope["headers"], self._config().max_body_bytes)
        if body is None:
            error = api_error(413, "request_too_large", "the body is too large")
            await self._api_error(send, error, unread=scope)
            return
        ask = parse_chat(body, reach)
        if isinstance(ask, ApiError):
            await self._api_error(send, ask)
            return
        await self._chat(name, token, ask, send)

    def _limiter(self, name: str, token: GatewayToken) -> RateLimiter:
        limiter = self._limiters.get(name)
        if limiter is None or limiter.per_minute != token.rate_limit_per_minute:
            limiter = self._limiters[name] = RateLimiter(token.rate_limit_per_minute)
        return limiter

    def _reach(self, token: GatewayToken) -> tuple[str, ...]:
        """The agents a token reaches now: those it lists that the channel's owners are
        (enabled ones)."""
        assert self._host is not None
        return tuple(a for a in token.agents if a in self._host.turns.router.policy.enabled)

    async def _chat(
        self, name: str, token: GatewayToken, ask: TurnAsk, send: ASGISendCallable
    ) -> None:
        assert self._host is not None
        inbound = Inbound(f"api.{name}", token.sender or name, ask.text, ask.session, ask.agent)
        routed = self._host.route(inbound)
        if isinstance(routed, ChannelRefused):
            await self._api_error(send, outcome_error(routed))
            return
        completion_id = "chatcmpl-" + secrets.token_hex(12)
        created = int(self._clock())
        stream = _Stream(send, completion_id, created, ask.agent) if ask.stream else None
        with trio.move_on_after(self._config().max_turn_secs) as limit:
            outcome = await self._host.converse(
                inbound,
                routed=routed,
                on_delta=None if stream is None else stream.delta,
            )
        if limit.cancelled_caught:
            outcome_or_error: ChannelAnswer | ApiError = api_error(
                503, "turn_timeout", "the turn took longer than the gateway's max_turn_secs"
            )
        else:
            outcome_or_error = answer_or_error(outcome)
        self.turns[
            "ok" if isinstance(outcome_or_error, ChannelAnswer) else outcome_or_error.code
        ] += 1
        if stream is not None and stream.started:
            await stream.end(outcome_or_error)
        elif isinstance(outcome_or_error, ApiError):
            await self._api_error(send, outcome_or_error)
        elif stream is not None:
            await stream.end(outcome_or_error)
        else:
            await _respond(
                send, 200, completion_body(completion_id, created, outcome_or_error), _JSON
            )

    # ------------------------------------------------------------------ Telegram's webhook

    async def _telegram(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        """`POST /telegram/<alias>`: an update for a bot in webhook mode (ADR 0065). Only
        a bot serving now has the path; its secret token header is compared in constant
        time before the body is read, and nothing reaches the channel without it."""
        assert self._host is not None
        alias = scope["path"].removeprefix("/telegram/")
        hook = self._host.hooks.get(f"telegram.{alias}") if "/" not in alias else None
        if hook is None:
            error = api_error(404, "unknown_endpoint", "no such path")
            await self._api_error(send, error, unread=scope)
            return
        if scope["method"] != "POST":
            error = api_error(405, "method_not_allowed", "POST only")
            await self._api_error(send, error, unread=scope)
            return
        given = next((v for n, v in scope["headers"] if n.lower() == TELEGRAM_SECRET_HEADER), b"")
        if not hmac.compare_digest(given, hook.secret):
            error = api_error(401, "telegram_secret_mismatch", "wrong secret token")
            await self._api_error(send, error, unread=scope)
            return
        body = await _read_body(
            receive, scope["headers"], min(self._config().max_body_bytes, MAX_UPDATE_BYTES)
        )
        if body is None:
            error = api_error(413, "request_too_large", "the body is too large")
            await self._api_error(send, error, unread=scope)
            return
        status = await hook.deliver(body)
        if status != 200:
            self._reject(f"telegram_{status}")
        await _respond(send, status, b"", [])

    # ------------------------------------------------------------------ the dashboard

    async def _ui(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if not self._operator_token:  # no operator token: no dashboard at all
            await _respond(send, 404, b"not found", [(b"content-type", b"text/plain")])
            return
        if not self._secure and foreign_host(scope["headers"]):
            self._reject("foreign_host")
            # Answered unread: a POST's body is still on the connection, so it is not kept
            # for another request (the client reusing it found it closed under it).
            headers = page_headers(b"text/plain", [(b"connection", b"close")])
            await _respond(send, 421, b"misdirected: not this listener's host", headers)
            return
        route = parse_ui_route(scope["method"], scope["path"])
        if route.name == "static":
            await self._static(send, route.arg)
            return
        if route.name == "method_not_allowed":
            await _respond(
                send,
                405,
                b"method not allowed",
                page_headers(b"text/plain", [(b"allow", route.arg.encode())]),
            )
            return
        jar = cookies(scope["headers"])
        now = self._clock()
        session = self._sessions.get(jar.get(SESSION_COOKIE), now)
        if route.is_post:
            body = await _read_body(receive, scope["headers"], MAX_FORM_BYTES)
            fields = form(body or b"")
            expected = (
                jar.get(SIGNIN_COOKIE)
                if route.name == "signin"
                else (session.csrf if session is not None else None)
            )
            origin = own_origin(scope["headers"], "https" if self._secure else "http")
            refused = csrf_refusal(scope["headers"], origin, expected, fields)
            if refused is not None:
                self._reject(refused)
                await _respond(
                    send,
                    403,
                    b"forbidden: not a request of this dashboard",
                    page_headers(b"text/plain; charset=utf-8"),
                )
                return
            if route.name == "signin":
                await self._signin(send, fields, now)
                return
        if route.needs_session and session is None:
            if route.name == "events_stream" or route.name == "approvals_fragment":
                await _respond(send, 401, b"sign in first", page_headers(b"text/plain"))
                return
            status, headers = redirect("/ui/signin")
            await _respond(send, status, b"", headers)
            return
        if route.name == "signin_form":
            await self._signin_form(send)
        elif route.name == "not_found":
            await _respond(
                send, 404, not_found_page(None if session is None else session.csrf), _HTML
            )
        else:
            assert session is not None
            await self._signed_in(route, session, scope, send)

    async def _signed_in(
        self, route: UiRoute, session: UiSession, scope: HTTPScope, send: ASGISendCallable
    ) -> None:
        if route.name == "overview":
            await _respond(send, 200, overview_page(await self._overview(), session.csrf), _HTML)
        elif route.name == "approvals_fragment":
            answer = await self._operator(Status())
            approvals = answer.data.approvals if answer.data is not None else []
            await _respond(send, 200, approvals_fragment(approvals, session.csrf).encode(), _HTML)
        elif route.name == "memory":
            await self._memory(send, session, scope["query_string"])
        elif route.name == "events_stream":
            await self._follow(send, session)
        elif route.name in ("approve", "deny"):
            request = (
                ApprovalApprove(route.arg) if route.name == "approve" else ApprovalDeny(route.arg)
            )
            reply = await self._operator(request)
            if not reply.ok:
                log.info("dashboard: %s %s refused: %s", route.name, route.arg[:32], reply.error)
            status, headers = redirect("/ui")
            await _respond(send, status, b"", headers)
        elif route.name == "signout":
            self._sessions.close(session.id)
            gone = cookie(SESSION_COOKIE, "", max_age=0, secure=self._secure)
            status, headers = redirect("/ui/signin", [(b"set-cookie", gone)])
            await _respond(send, status, b"", headers)

    async def _signin_form(
        self, send: ASGISendCallable, error: str | None = None, status: int = 200
    ) -> None:
        csrf = secrets.token_urlsafe(24)
        set_csrf = cookie(SIGNIN_COOKIE, csrf, max_age=600, secure=self._secure)
        await _respond(
            send, status, render_signin(csrf, error), [*_HTML, (b"set-cookie", set_csrf)]
        )

    async def _signin(self, send: ASGISendCallable, fields: Mapping[str, str], now: float) -> None:
        wait = self._signin_rate.admit("signin", now)
        if wait is not None:
            self._reject("signin_rate")
            await self._signin_form(send, f"Too many attempts; wait {wait} s.", 429)
            return
        if not token_matches(fields.get("token"), self._operator_token):
            self._reject("signin_failed")
            log.warning("dashboard: a sign-in with a wrong token")
            await self._signin_form(send, "That is not the operator token.", 401)
            return
        session = self._sessions.open(now)
        log.info("dashboard: the operator signed in")
        set_session = cookie(
            SESSION_COOKIE, session.id, max_age=int(SESSION_TTL_SECS), secure=self._secure
        )
        spent = cookie(SIGNIN_COOKIE, "", max_age=0, secure=self._secure)
        status, headers = redirect("/ui", [(b"set-cookie", set_session), (b"set-cookie", spent)])
        await _respond(send, status, b"", headers)

    async def _overview(self) -> Overview:
        status = await self._operator(Status())
        invocations = await self._operator(InvocationsList(limit=20))
        today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
        usage = await self._operator(UsageQuery(since=today))
        agents = status.data.agents if status.data is not None else []
        pids = [a.pid for a in agents if a.pid is not None]
        rss = await trio.to_thread.run_sync(_resident_bytes, pids)
        return Overview(
            agents=agents,
            approvals=status.data.approvals if status.data is not None else [],
            invocations=invocations.data.invocations if invocations.data is not None else [],
            usage=usage.data.rows if usage.data is not None else [],
            rss=rss,
            now=self._clock(),
            next_runs=status.data.schedules if status.data is not None else [],
        )

    async def _memory(self, send: ASGISendCallable, session: UiSession, query: bytes) -> None:
        args = form(query)
        status = await self._operator(Status())
        agents = sorted(a.alias for a in (status.data.agents if status.data is not None else []))
        agent = args.get("agent") or (agents[0] if agents else "")
        if agent not in agents:
            await _respond(send, 404, not_found_page(session.csrf), _HTML)
            return
        list_args: dict[str, object] = {"limit": MEMORY_PAGE}
        if args.get("before"):
            list_args["before"] = args["before"][:128]
        # Read-only: only `list` is ever sent from here.
        reply = await self._operator(MemoryCommand(op="list", agent=agent, args=list_args))
        records = (
            msgspec.convert(reply.data, MemoryRecords).records
            if reply.ok and reply.data is not None
            else []
        )
        error = None if reply.ok else f"{reply.error}: {reply.message}"
        before = records[-1].id if len(records) == MEMORY_PAGE else None
        await _respond(
            send, 200, memory_page(agent, agents, records, session.csrf, before, error), _HTML
        )

    async def _follow(self, send: ASGISendCallable, session: UiSession) -> None:
        """The daemon's events for one signed-in browser, for as long as it stays signed
        in: a stream opened before a sign-out (or the session's expiry, or its eviction by
        newer ones) ends at its next event or keepalive, and shows nothing more."""
        if self._followers >= MAX_FOLLOWERS:
            await _respond(send, 503, b"too many followers", page_headers(b"text/plain"))
            return
        self._followers += 1
        try:
            with self._events.subscribe() as subscription:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": page_headers(
                            b"text/event-stream", [(b"x-accel-buffering", b"no")]
                        ),
                    }
                )
                for published in self._events.recent(FOLLOW_BACKLOG):
                    await _more(send, sse(msgspec.json.encode(published)))
                while True:
                    # Not the subscription's iterator: a keepalive's deadline would end it.
                    with trio.move_on_after(KEEPALIVE_SECS):
                        await subscription.ready()
                    if self._sessions.get(session.id, self._clock()) is None:
                        break
                    taken = subscription.take()
                    for published in taken:
                        await _more(send, sse(msgspec.json.encode(published)))
                    if not taken:
                        await _more(send, b": keepalive\n\n")
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._followers -= 1

    async def _static(self, send: ASGISendCallable, name: str) -> None:
        data = await trio.to_thread.run_sync(_static_file, name)
        kind = (
            b"text/javascript; charset=utf-8"
            if name.endswith(".js")
            else b"text/css; charset=utf-8"
        )
        await _respond(send, 200, data, page_headers(kind))


# --------------------------------------------------------------------------- helpers

_JSON: Headers = [(b"content-type", b"application/json")]
_HTML: Headers = page_headers(b"text/html; charset=utf-8")


class _Stream:
    """One streamed chat completion: the response starts at the first piece of the reply
    (so a refusal before it still gets its status code), each piece is a chunk, then a
    last chunk with `finish_reason` and `usage`, then `[DONE]`."""

    def __init__(
        self, send: ASGISendCallable, completion_id: str, created: int, model: str
    ) -> None:
        self._send = send
        self._id = completion_id
        self._created = created
        self._model = model
        self.started = False

    async def _start(self) -> None:
        if not self.started:
            self.started = True
            headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    async def delta(self, text: str) -> None:
        first = not self.started
        await self._start()
        delta = {"role": "assistant", "content": text} if first else {"content": text}
        await _more(self._send, sse(chunk_body(self._id, self._created, self._model, delta)))

    async def end(self, outcome: ChannelAnswer | ApiError) -> None:
        first = not self.started
        await self._start()
        if isinstance(outcome, ApiError):  # after some of the reply: the error as a chunk
            await _more(self._send, sse(outcome.body()))
        else:
            delta = {"role": "assistant", "content": ""} if first else {}
            if first and outcome.reply:  # a reply that came whole, without deltas
                delta["content"] = outcome.reply
            last = chunk_body(
                self._id,
                self._created,
                self._model,
                delta,
                finish_reason(outcome),
                usage_of(outcome.usage),
            )
            await _more(self._send, sse(last))
            await _more(self._send, SSE_DONE)
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})


async def _respond(
    send: ASGISendCallable, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _more(send: ASGISendCallable, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _read_body(
    receive: ASGIReceiveCallable, headers: Iterable[tuple[bytes, bytes]], limit: int
) -> bytes | None:
    """The body, or None as soon as it is over `limit` (the rest is never read)."""
    declared = next(
        (v.decode("latin-1") for n, v in headers if n.lower() == b"content-length"), None
    )
    return await read_body(receive, declared, limit)


def _has_body(scope: HTTPScope) -> bool:
    """Whether a request declares a body (a length above 0, or chunks)."""
    for name, value in scope["headers"]:
        name = name.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def _resident_bytes(pids: Sequence[int]) -> dict[int, int]:
    """Each running agent's resident memory (`/proc/<pid>/statm`), for the agents table."""
    page = os.sysconf("SC_PAGE_SIZE")
    found: dict[int, int] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
                found[pid] = int(statm.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def _static_file(name: str) -> bytes:
    return resources.files("zeroclaw.gateway").joinpath("static", name).read_bytes()


def _tls_context(settings: GatewayConfig) -> ssl.SSLContext | None:
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ChannelStartFailed(f"gateway TLS: cannot load {settings.tls_cert}: {exc}") from exc
    context.set_alpn_protocols(["http/1.1"])
    return context
