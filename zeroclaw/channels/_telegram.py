"""The Telegram channel adapter: one bot, read by long polling (`getUpdates`) over httpx
or, in webhook mode, from the gateway's `POST /telegram/<alias>` (the adapter sets the
webhook with a secret made at its start, and hands the gateway a `GatewayHook` on the host
while it serves); each update decided by `_telegram_core` and acted on here (ADR 0065).

The poll's offset, the usernames pinned to ids and the messages being answered are kept in
`<state_dir>/channels/telegram.<alias>.json`, written (atomically, fsynced) before a batch
of updates is acted on: a restart neither loses an update nor acts on one twice, and a
message whose turn a restart cut short is answered "send it again". A Bot API call that
fails to connect, or a getUpdates Telegram refuses, ends the adapter: the channel
supervisor shows it `failed` and starts it again with backoff. Flood control (429
`retry_after`) is waited out. The token is in every Bot API URL, so no error, log line or
exception text of this module carries a URL unredacted.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec
import trio

from ..config import TelegramChannel
from ._adapter import ChannelStartFailed, save_turns_end, write_state
from ._host import ChannelHost
from ._in_order import InOrder, Place
from ._routing import Routed
from ._telegram_core import (
    PRESS_ANSWERS,
    TYPING_EVERY_SECS,
    ApiFailed,
    ApiOk,
    ApiRetry,
    Converse,
    Edit,
    OneLine,
    PendingApprovals,
    Press,
    Send,
    StreamEdits,
    TelegramState,
    Update,
    User,
    Wait,
    api_outcome,
    approval_markup,
    approval_settled,
    approval_text,
    chat_session,
    choose_sender,
    decode_message,
    decode_state,
    decode_update,
    decode_updates,
    decode_user,
    encode_state,
    outcome_text,
    read_update,
    redact,
    refusal_line,
    split_message,
)
from ._types import (
    RESTARTED,
    AskApproval,
    ChannelFailure,
    ChannelRefused,
    GatewayHook,
    Inbound,
    Outcome,
    Scheduled,
)
from ._webhook_core import RateLimiter

log = logging.getLogger("zeroclaw.channels.telegram")

MAX_TURNS = 64  # turns running at once; one more message is answered "busy"
# One sender's turns running or queued at once: a turn may wait minutes (an approval, a
# slow model), and one sender within its rate could otherwise hold all MAX_TURNS.
MAX_TURNS_PER_SENDER = 8
MAX_TOLD_SLOW = 10_000  # senders told to slow down, remembered so as to tell each once
MAX_ANSWERING = 64  # one-line answers and press answers on their way; beyond, dropped
MAX_FLOOD_RETRIES = 5  # 429s in a row on one call before it fails
CALL_TIMEOUT_SECS = 30.0
ALLOWED_UPDATES = ("message", "edited_message", "callback_query")


class TelegramApiError(Exception):
    """A Bot API call failed: the method and Telegram's description (never the URL)."""


class _RedactUrls(logging.Filter):
    """httpx logs each request's URL, which holds the bot's token: shown redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "/bot" in message:
            record.msg, record.args = redact(message), ()
        return True


_REDACTION = _RedactUrls()
# A logger's filter sees only its own records, not its children's: each one by name.
for _name in ("httpx", "httpcore", "httpcore.connection", "httpcore.http11", "httpcore.proxy"):
    logging.getLogger(_name).addFilter(_REDACTION)


class BotApi:
    """The Bot API methods of one bot. `call` waits out flood control and raises
    TelegramApiError otherwise; the token appears in nothing it raises or logs."""

    def __init__(self, client: httpx.AsyncClient, api_url: str, token: str) -> None:
        self._client = client
        self._base = f"{api_url.rstrip('/')}/bot{token}/"
        self._token = token
        self.flood_waits = 0

    async def call(
        self, method: str, params: dict[str, object], *, http_secs: float = CALL_TIMEOUT_SECS
    ) -> msgspec.Raw:
        for _ in range(MAX_FLOOD_RETRIES + 1):
            try:
                response = await self._client.post(
                    self._base + method,
                    content=msgspec.json.encode(params),
                    headers={"content-type": "application/json"},
                    timeout=http_secs,
                )
            except httpx.HTTPError as exc:
                # Not chained: an httpx error's text and its request may hold the URL.
                reason = redact(str(exc), self._token) or "no answer"
                raise TelegramApiError(f"{method}: {type(exc).__name__}: {reason}") from None
            outcome = api_outcome(response.status_code, response.content)
            if isinstance(outcome, ApiOk):
                return outcome.result
            if isinstance(outcome, ApiFailed):
                reason = redact(outcome.description, self._token)
                raise TelegramApiError(f"{method}: {outcome.status} {reason}")
            assert isinstance(outcome, ApiRetry)
            self.flood_waits += 1
            log.warning("telegram %s: flood control, retrying in %gs", method, outcome.after)
            await trio.sleep(outcome.after)
        raise TelegramApiError(f"{method}: still flood-controlled after {MAX_FLOOD_RETRIES} waits")


@dataclass(frozen=True)
class _Line:
    """A one-line answer to a message, without a turn."""

    chat_id: int
    reply_to: int
    text: str


class _Pulse:
    """An event that can be set again: each `set` wakes the waiters of the moment."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self) -> None:
        await self._event.wait()


class TelegramAdapter:
    """The channel `telegram.<alias>`: `token` is the value of its `token_env`, `state_dir`
    the daemon's (the state file lives in its `channels/`)."""

    def __init__(self, alias: str, config: TelegramChannel, token: str, state_dir: Path) -> None:
        self.alias = alias
        self.config = config
        self.key = f"telegram.{alias}"
        self._token = token
        self.state_path = Path(state_dir) / "channels" / f"{self.key}.json"
        self.state = TelegramState()
        self._save_lock = trio.Lock()
        self._pending = PendingApprovals(frozenset(config.approvers))
        self._answered: dict[str, trio.Event] = {}
        self._shown: dict[str, list[tuple[int, int]]] = {}  # token -> its messages
        self._limiter = RateLimiter(config.rate_limit_per_minute)
        self._told_slow: set[str] = set()
        self._answering = 0
        self.dropped_answers = 0
        self._chats: InOrder[int] = InOrder()  # one turn per chat at a time, in order
        self._turns = 0
        self._turns_of: Counter[int] = Counter()  # by Telegram user id
        self.api: BotApi | None = None
        self.me: User | None = None
        self.skipped: Counter[str] = Counter()  # updates acted on with nothing, by why
        self.answered_presses: Counter[str] = Counter()  # button presses by verdict
        self.polls = 0  # getUpdates answered
        self.pushes = 0  # updates the webhook took (repeats not counted)
        self.turns_done = 0  # turns whose reply went out (or failed to)
        self._polled = _Pulse()
        self._turned = _Pulse()

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key,)

    async def wait_polls(self, count: int) -> None:
        """Until `count` getUpdates calls were answered (tests: the adapter is idle)."""
        while self.polls < count:
            await self._polled.wait()

    async def wait_turns(self, count: int) -> None:
        """Until `count` turns have ended, their replies sent (tests)."""
        while self.turns_done < count:
            await self._turned.wait()

    # ------------------------------------------------------------------ state

    async def _load(self) -> TelegramState:
        try:
            data = await trio.Path(self.state_path).read_bytes()
        except FileNotFoundError:
            return TelegramState()
        except OSError as exc:
            raise ChannelStartFailed(f"{self.key}: cannot read {self.state_path}: {exc}") from None
        try:
            return decode_state(data)
        except msgspec.DecodeError as exc:
            # Starting over from offset 0 would act again on every update Telegram holds.
            raise ChannelStartFailed(
                f"{self.key}: {self.state_path} is not a valid state file ({exc}); move it "
                "away to start over (messages of the last 24 h may then be answered again)"
            ) from None

    async def _save(self) -> None:
        async with self._save_lock:
            data = encode_state(self.state)  # this moment's state, whatever changes meanwhile
            await write_state(self.key, self.state_path, data)

    # ------------------------------------------------------------------ serving

    async def push(self, key: str, scheduled: Scheduled) -> str | None:
        """A bot has many chats and no one of them a schedule could name yet: the config
        rules refuse a schedule delivered to it, so this answers only a reload's race."""
        return f"{key}: a telegram channel has nobody to deliver a scheduled reply to"

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        if not self._token:
            raise ChannelStartFailed(
                f"{self.key}: its bot token variable {self.config.token_env} is not set in "
                "the daemon's environment"
            )
        # A start after a failed one (the supervisor starts the same adapter again): no turn
        # of the last runs, and what it counted or queued for messages it never started
        # (a save that failed after they were admitted) must not hold their senders' room.
        self._chats, self._turns = InOrder(), 0
        self._turns_of.clear()
        self.state = await self._load()
        async with httpx.AsyncClient(follow_redirects=False) as client:
            api = self.api = BotApi(client, self.config.api_url, self._token)
            try:
                me = self.me = decode_user(await api.call("getMe", {}))
            except (TelegramApiError, msgspec.DecodeError) as exc:
                raise ChannelStartFailed(f"{self.key}: getMe failed: {exc}") from None
            if self.config.mode == "webhook":
                await self._serve_webhook(host, api, me, task_status)
                return
            # A webhook left set (webhook mode before, or a crash in it) makes Telegram
            # refuse getUpdates: removed first, its pending updates kept for the poll.
            try:
                await api.call("deleteWebhook", {"drop_pending_updates": False})
            except TelegramApiError as exc:
                raise ChannelStartFailed(f"{self.key}: deleteWebhook failed: {exc}") from None
            log.info("%s: bot @%s (id %d) polling", self.key, me.username, me.id)
            task_status.started()
            async with trio.open_nursery() as nursery:
                await self._answer_cut_short(api)
                while True:
                    await self._poll(host, api, me, nursery)

    async def _serve_webhook(
        self, host: ChannelHost, api: BotApi, me: User, task_status: trio.TaskStatus[None]
    ) -> None:
        """Webhook mode: Telegram POSTs each update to the gateway's /telegram/<alias>
        with a secret token made at this start (ADR 0065); the gateway checks it and hands
        the body to `_pushed`. The webhook is removed when the channel stops."""
        secret = secrets.token_urlsafe(32)  # Telegram allows A-Z a-z 0-9 _ - up to 256
        # A reload starts this adapter while the one it replaces stops: the claim orders
        # their setWebhook and deleteWebhook, and only the last to set the webhook removes it.
        claim, mine = host.hook_claim(self.key), object()
        async with claim.lock:
            previous, claim.owner = claim.owner, mine
            try:
                await api.call(
                    "setWebhook",
                    {
                        "url": self.config.webhook_url,
                        "secret_token": secret,
                        "allowed_updates": list(ALLOWED_UPDATES),
                        # one request at a time: updates arrive in order, as a poll's do
                        "max_connections": 1,
                    },
                )
            except TelegramApiError as exc:
                # The webhook is still the one it replaces: removed at that one's stop
                # (Telegram then keeps the updates, for this adapter's next start).
                claim.owner = previous
                raise ChannelStartFailed(f"{self.key}: setWebhook failed: {exc}") from None
        log.info("%s: bot @%s (id %d) on the gateway's webhook", self.key, me.username, me.id)
        try:
            async with trio.open_nursery() as nursery:

                async def deliver(body: bytes) -> int:
                    return await self._pushed(host, api, me, nursery, body)

                hook = host.hooks[self.key] = GatewayHook(secret.encode(), deliver)
                try:
                    task_status.started()
                    await self._answer_cut_short(api)
                    await trio.sleep_forever()
                finally:  # before the nursery closes: no new update is handed to it
                    if host.hooks.get(self.key) is hook:  # not the next adapter's
                        del host.hooks[self.key]
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(CALL_TIMEOUT_SECS):
                async with claim.lock:
                    if claim.owner is mine:  # else a newer adapter has set its own since
                        claim.owner = None
                        try:
                            await api.call("deleteWebhook", {"drop_pending_updates": False})
                        except TelegramApiError as exc:
                            log.warning("%s: deleteWebhook failed: %s", self.key, exc)

    async def _pushed(
        self, host: ChannelHost, api: BotApi, me: User, nursery: trio.Nursery, body: bytes
    ) -> int:
        """One update the gateway took (its secret checked): acted on as a poll's would be,
        once; answered at once (the turn runs in the background: Telegram sends an update
        again when its answer is slow). The HTTP status for Telegram."""
        try:
            update = decode_update(body)
        except msgspec.DecodeError:
            return 400
        if not self.state.take_pushed(update):
            self.skipped["repeated"] += 1
            return 200
        self.pushes += 1
        try:
            await self._act(host, api, me, nursery, [update])
        except RuntimeError:
            # The channel stopped while this update was being saved (its nursery closed
            # to new tasks): taken, like a poll's batch cut short by a stop; a message in
            # it is answered "send it again" at the next start.
            return 503
        except ChannelStartFailed as exc:
            # The state file cannot be written: the channel fails (as a poll's would) and
            # starts again from the file; Telegram sends the update again.
            with contextlib.suppress(RuntimeError):  # unless it is stopping already
                nursery.start_soon(_fail, exc)
            return 500
        return 200

    async def _answer_cut_short(self, api: BotApi) -> None:
        """The messages a restart cut short: each is told to be sent again (once)."""
        left = list(self.state.inflight)
        if not left:
            return
        self.state.inflight.clear()
        await self._save()
        for held in left:
            try:
                await self._send(api, held.chat_id, RESTARTED, reply_to=held.message_id)
            except TelegramApiError as exc:
                log.warning("%s: could not tell chat %d to resend: %s", self.key, held.chat_id, exc)

    async def _poll(self, host: ChannelHost, api: BotApi, me: User, nursery: trio.Nursery) -> None:
        timeout = self.config.poll_timeout_secs
        try:
            raw = await api.call(
                "getUpdates",
                {
                    "offset": self.state.offset,
                    "timeout": timeout,
                    "allowed_updates": list(ALLOWED_UPDATES),
                },
                http_secs=timeout + CALL_TIMEOUT_SECS,
            )
            updates = decode_updates(raw)
        except (TelegramApiError, msgspec.DecodeError) as exc:
            raise ChannelStartFailed(f"{self.key}: getUpdates failed: {exc}") from None
        fresh = self.state.take(updates)
        self.polls += 1
        await self._act(host, api, me, nursery, fresh)
        self._polled.set()

    async def _act(
        self,
        host: ChannelHost,
        api: BotApi,
        me: User,
        nursery: trio.Nursery,
        fresh: list[Update],
    ) -> None:
        """Decide on updates taken (by a poll or the webhook), save, then act."""
        lines: list[_Line] = []
        presses: list[Press] = []
        admitted: list[tuple[Converse, Inbound, Routed]] = []
        for update in fresh:
            decision = read_update(update, me)
            if isinstance(decision, Converse):
                taken = self._admit(host, decision)
                if isinstance(taken, _Line):
                    lines.append(taken)
                elif taken is not None:
                    admitted.append(taken)
            elif isinstance(decision, OneLine):
                told = self._within_rate(decision.user, decision.chat_id, decision.message_id)
                if told is None:
                    lines.append(_Line(decision.chat_id, decision.message_id, decision.text))
                elif isinstance(told, _Line):
                    lines.append(told)
            elif isinstance(decision, Press):
                presses.append(decision)
            else:
                self.skipped[decision.reason] += 1
                log.debug("%s: update %d skipped: %s", self.key, update.update_id, decision.reason)
        # Written before anything is acted on: a restart from here on neither repeats
        # these updates nor loses the messages taken (they are in `inflight`).
        await self._save()
        # Answered in the background: a flood wait on one answer must not stall the poll.
        for line in lines:
            self._answer_soon(nursery, self._line, api, line.chat_id, line.reply_to, line.text)
        for press in presses:
            self._answer_soon(nursery, self._press, api, press)
        for converse, inbound, routed in admitted:
            place = self._chats.take(converse.chat_id)  # here, in the updates' order
            nursery.start_soon(self._turn, host, api, converse, inbound, routed, place)

    def _answer_soon(
        self,
        nursery: trio.Nursery,
        answer: Callable[..., Awaitable[None]],
        *args: object,
    ) -> None:
        if self._answering >= MAX_ANSWERING:
            self.dropped_answers += 1
            log.warning("%s: %d answers on their way; one dropped", self.key, self._answering)
            return

        async def run() -> None:
            try:
                await answer(*args)
            except TelegramApiError as exc:
                log.warning("%s: an answer was not delivered: %s", self.key, exc)
            finally:
                self._answering -= 1

        self._answering += 1
        nursery.start_soon(run)

    def _admit(
        self, host: ChannelHost, message: Converse
    ) -> tuple[Converse, Inbound, Routed] | _Line | None:
        """Route a text message (its sender by id, or by a pinned username): admitted, or
        the line that answers a refusal, a sender over its rate or a full house (None:
        nothing to say)."""
        user = message.user
        told = self._within_rate(user, message.chat_id, message.message_id)
        if told is not None:
            return told if isinstance(told, _Line) else None

        def accepted(sender: str) -> str | None:
            routed = host.preview(Inbound(self.key, sender, ""))
            return routed.code if isinstance(routed, ChannelRefused) else None

        choice = choose_sender(user, self.state.pins, accepted)
        sender = choice.sender
        if choice.pin is not None:
            if self.state.pin(choice.pin, user.id):
                log.info(
                    "%s: @%s resolved to user id %d (pinned; list %d in external_peers to "
                    "admit by id)",
                    self.key,
                    choice.pin,
                    user.id,
                    user.id,
                )
            else:  # no room to pin: a name never admits an id it is not pinned to
                log.warning("%s: too many pinned usernames; @%s not pinned", self.key, choice.pin)
                sender = str(user.id)
        if choice.conflict is not None:
            log.warning(
                "%s: user id %d not admitted by name: %s", self.key, user.id, choice.conflict
            )
        inbound = Inbound(self.key, sender, message.text, chat_session(message.chat_id))
        routed = host.route(inbound)
        if isinstance(routed, ChannelRefused):
            return _Line(message.chat_id, message.message_id, refusal_line(routed, user.id))
        if self._turns_of[user.id] >= MAX_TURNS_PER_SENDER:
            return _Line(
                message.chat_id,
                message.message_id,
                f"Busy: {MAX_TURNS_PER_SENDER} of your messages are still being answered; "
                "send this again when they are.",
            )
        if self._turns >= MAX_TURNS or not self.state.started(message.chat_id, message.message_id):
            return _Line(message.chat_id, message.message_id, "Busy: try again shortly.")
        self._turns += 1
        self._turns_of[user.id] += 1
        return message, inbound, routed

    def _within_rate(self, user: User, chat_id: int, reply_to: int) -> _Line | bool | None:
        """None: within the sender's rate. Over it: the line that tells them, once (not at
        each message: a flood must not make the bot flood back), then False until a
        message of theirs is taken again."""
        who = str(user.id)
        wait = self._limiter.admit(who, trio.current_time())
        if wait is None:
            self._told_slow.discard(who)
            return None
        if who in self._told_slow:
            return False
        if len(self._told_slow) >= MAX_TOLD_SLOW:
            self._told_slow.clear()
        self._told_slow.add(who)
        return _Line(chat_id, reply_to, f"Slow down: retry in {wait} s.")

    async def _line(self, api: BotApi, chat_id: int, reply_to: int, text: str) -> None:
        try:
            await self._send(api, chat_id, text, reply_to=reply_to)
        except TelegramApiError as exc:
            log.warning("%s: could not answer in chat %d: %s", self.key, chat_id, exc)

    async def _send(
        self,
        api: BotApi,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        **extra: object,
    ) -> int:
        params: dict[str, object] = {"chat_id": chat_id, "text": text, **extra}
        if reply_to is not None:
            params["reply_parameters"] = {
                "message_id": reply_to,
                "allow_sending_without_reply": True,
            }
        sent = decode_message(await api.call("sendMessage", params))
        return sent.message_id

    # ------------------------------------------------------------------ turns

    async def _turn(
        self,
        host: ChannelHost,
        api: BotApi,
        message: Converse,
        inbound: Inbound,
        routed: Routed,
        place: Place[int],
    ) -> None:
        chat = message.chat_id
        ended = False  # not cut short by a stop: a stopped turn stays in `inflight`
        try:
            async with self._chats.turn(place):  # the chat's session, in its order
                await self._converse(host, api, message, inbound, routed)
            ended = True
        except TelegramApiError as exc:
            ended = True
            log.warning("%s: reply in chat %d not delivered: %s", self.key, chat, exc)
        except Exception:  # one turn's failure must not take the channel down
            ended = True
            log.exception("%s: turn in chat %d failed", self.key, chat)
        finally:
            self._turns -= 1
            self._turns_of[message.user.id] -= 1
            if self._turns_of[message.user.id] <= 0:
                del self._turns_of[message.user.id]
            if ended:
                self.state.finished(chat, message.message_id)
                await save_turns_end(self._save)
            self.turns_done += 1
            self._turned.set()

    async def _converse(
        self, host: ChannelHost, api: BotApi, message: Converse, inbound: Inbound, routed: Routed
    ) -> None:
        chat = message.chat_id
        stream = StreamEdits(self.config.edit_interval_secs) if self.config.stream else None
        wrote = _Pulse()
        closing = trio.Event()

        async def on_delta(text: str) -> None:
            if stream is not None:
                stream.feed(text)
                wrote.set()

        ask = self._asker(api, chat, message.message_id) if self._pending.approvers else None
        typing = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._typing, api, chat, typing)
            if stream is not None:
                nursery.start_soon(self._stream, api, message, stream, wrote, closing)
            try:
                outcome: Outcome = await host.converse(
                    inbound, ask=ask, routed=routed, on_delta=on_delta
                )
            except Exception:
                log.exception("%s: turn failed in the daemon", self.key)
                outcome = ChannelFailure("unavailable", "the turn failed in the daemon")
            # the typing loop ends now; the stream after its call in flight, if any
            closing.set()
            typing.cancel()
        final = outcome_text(outcome)
        calls = (
            stream.finish(final) if stream is not None else [Send(p) for p in split_message(final)]
        )
        # The turn is over: a stop waits for its reply (bounded), so an answered message is
        # never told at the next start to send it again.
        with trio.CancelScope(shield=True), trio.move_on_after(CALL_TIMEOUT_SECS):
            first = True
            for call in calls:
                if isinstance(call, Edit):
                    await self._edit(api, chat, call.message_id, call.text)
                else:
                    await self._send(
                        api, chat, call.text, reply_to=message.message_id if first else None
                    )
                first = False

    async def _typing(self, api: BotApi, chat: int, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                try:
                    await api.call("sendChatAction", {"chat_id": chat, "action": "typing"})
                except TelegramApiError as exc:
                    log.debug("%s: typing in chat %d: %s", self.key, chat, exc)
                await trio.sleep(TYPING_EVERY_SECS)

    async def _stream(
        self,
        api: BotApi,
        message: Converse,
        stream: StreamEdits,
        wrote: _Pulse,
        closing: trio.Event,
    ) -> None:
        """Show the reply as it grows, one call at a time, until the turn ends."""
        while not closing.is_set():
            action = stream.next(trio.current_time())
            if action is None:
                with trio.move_on_after(CALL_TIMEOUT_SECS):
                    await _first(wrote.wait, closing.wait)
                continue
            if isinstance(action, Wait):
                with trio.move_on_after(action.secs):
                    await closing.wait()
                continue
            try:
                if isinstance(action, Send):
                    sent = await self._send(
                        api, message.chat_id, action.text, reply_to=message.message_id
                    )
                    stream.done(action.text, sent)
                else:
                    await self._edit(api, message.chat_id, action.message_id, action.text)
                    stream.done(action.text, None)
            except TelegramApiError as exc:
                stream.failed()
                log.debug("%s: streaming in chat %d: %s", self.key, message.chat_id, exc)

    async def _edit(
        self, api: BotApi, chat: int, message_id: int, text: str, **extra: object
    ) -> None:
        try:
            await api.call(
                "editMessageText",
                {"chat_id": chat, "message_id": message_id, "text": text, **extra},
            )
        except TelegramApiError as exc:
            if "message is not modified" not in str(exc):
                raise

    # ------------------------------------------------------------------ approvals

    def _asker(self, api: BotApi, chat: int, reply_to: int) -> AskApproval:
        """Ask in the chat the message came from and in each approver's private chat with
        the bot (an approver who never wrote to the bot cannot be written to: skipped);
        the first approver's press answers, and every copy then shows the decision."""

        async def ask(rid: str, what: str) -> bool:
            token = secrets.token_urlsafe(12)
            answered = self._answered[token] = trio.Event()
            shown = self._shown[token] = []
            self._pending.ask(token, what)
            try:
                for target in (chat, *sorted(self._pending.approvers - {chat})):
                    try:
                        sent = await self._send(
                            api,
                            target,
                            approval_text(what),
                            reply_to=reply_to if target == chat else None,
                            parse_mode="MarkdownV2",
                            reply_markup=approval_markup(token),
                        )
                    except TelegramApiError as exc:
                        log.warning("%s: approval not shown in chat %d: %s", self.key, target, exc)
                        continue
                    shown.append((target, sent))
                if not shown:
                    return False  # nobody can say yes to what was never shown
                await answered.wait()
                return self._pending.answers.get(token, False)
            finally:
                self._pending.forget(token)
                del self._answered[token], self._shown[token]

        return ask

    async def _press(self, api: BotApi, press: Press) -> None:
        verdict, token, approved = self._pending.press(press.user.id, press.data)
        self.answered_presses[verdict] += 1
        settled: list[tuple[int, int]] = []
        what = ""
        if verdict == "answered" and token is not None:
            # Before any await: the approval may time out (and be forgotten) meanwhile.
            what, settled = self._pending.asked[token], list(self._shown[token])
            self._answered[token].set()
        elif verdict == "not_an_approver":
            log.warning(
                "%s: user id %d pressed an approval button but is not an approver",
                self.key,
                press.user.id,
            )
        await api.call(
            "answerCallbackQuery",
            {
                "callback_query_id": press.query_id,
                "text": PRESS_ANSWERS[verdict],
                "show_alert": verdict == "not_an_approver",
            },
        )
        by = f"@{press.user.username}" if press.user.username else str(press.user.id)
        for chat_id, message_id in settled:
            # no reply_markup: the buttons go, the decision stays in each chat
            await self._edit(
                api,
                chat_id,
                message_id,
                approval_settled(what, approved, by),
                parse_mode="MarkdownV2",
            )


async def _fail(exc: Exception) -> None:
    raise exc


async def _first(*waits: Callable[[], Awaitable[None]]) -> None:
    """Until the first of these waits returns."""
    async with trio.open_nursery() as nursery:
        for wait in waits:

            async def one(wait: Callable[[], Awaitable[None]] = wait) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(one)
