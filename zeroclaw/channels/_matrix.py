"""The Matrix channel adapter: one Matrix account, synced from trio over httpx (ADR 0066).

matrix-nio builds each request (`nio.Api`) and parses each response (`nio.*Response`,
fed to the core's sans-IO `nio.Client`); nio's asyncio client is never used. The access
token goes in an `Authorization` header, never in a URL (nio's builders put it in the query
string, which HTTP clients log): `_strip_token` takes it out of every path.

One task long-polls /sync; each response's actions (`MatrixCore.on_sync`) run in order,
and the next-batch token is written (atomically, in `MatrixState`) once they have, with the
messages the sync took; only then do their turns start. So a restart neither runs a turn
twice nor loses a message, and a turn it cut short is answered "send it again" (running it
again could repeat what it had done). Turns run in the adapter's nursery, one at a time
per room and in the order sent (each room is one session of its sender). A reply is
posted as an `m.notice` when its first text streams in and edited (`m.replace`) at most
every `edit_interval_secs`. A homeserver that cannot be reached, or refuses the account,
ends `serve`: the channel supervisor shows it `failed` and starts it again with backoff,
from the persisted token.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

import httpx
import msgspec
import nio
import trio

from .._sender_names import normalize_sender
from ..config import MatrixChannel
from ._adapter import ChannelStartFailed, save_turns_end, write_state
from ._host import ChannelHost
from ._in_order import InOrder, Place
from ._matrix_core import (
    Action,
    Answer,
    Deliver,
    Join,
    Leave,
    MatrixCore,
    MatrixState,
    Notice,
    ReplyStream,
    Taken,
    decode_state,
    edit_content,
    encode_state,
    notice_content,
    reply_content,
    split_reply,
)
from ._routing import Routed
from ._types import RESTARTED, ChannelAnswer, ChannelFailure, Inbound, Scheduled

log = logging.getLogger("zeroclaw.channels.matrix")

STATE_FILE = "state.json"
LEGACY_TOKEN_FILE = "next_batch"  # an older daemon's: the token alone, read once
SYNC_FILTER = {
    "room": {"timeline": {"limit": 50}, "ephemeral": {"types": []}},
    "presence": {"types": []},
    "account_data": {"types": []},
}
REQUEST_TIMEOUT_SECS = 30.0
REPLY_AFTER_STOP_SECS = 30.0  # a finished turn's reply still posted while the channel stops
MAX_RETRY_AFTER_SECS = 60.0
MAX_RATE_RETRIES = 5
# Turns running or waiting for their room at once, in all and per sender: a room's turns
# run one at a time and one may wait minutes on an approval, so each message would
# otherwise queue a task without bound, and one sender could hold every slot.
MAX_TURNS = 64
MAX_TURNS_PER_SENDER = 8


class MatrixUnavailable(Exception):
    """The homeserver could not be reached or refused a request (the message says which;
    it never holds the token)."""


def _strip_token(path: str) -> tuple[str, list[tuple[str, str | int | float | bool | None]]]:
    """A path nio built, without its `access_token` query parameter."""
    base, _, query = path.partition("?")
    return base, [(k, v) for k, v in parse_qsl(query) if k != "access_token"]


@dataclass
class _Approval:
    answered: trio.Event
    approved: bool = False


class MatrixAdapter:
    """The channel `matrix.<alias>`. `env`: where the credential's variable is read;
    `state_dir`: where its `MatrixState` is kept (`<state_dir>/channels/matrix/<alias>`)."""

    def __init__(
        self, alias: str, config: MatrixChannel, env: Mapping[str, str], state_dir: Path
    ) -> None:
        self.alias = alias
        self.config = config
        self.key = f"matrix.{alias}"
        self._env = env
        self.state_dir = state_dir / "channels" / "matrix" / alias
        self._token = ""
        self._http: httpx.AsyncClient | None = None
        self._core: MatrixCore | None = None
        self._approvals: dict[str, _Approval] = {}
        self._rooms: InOrder[str] = InOrder()  # one turn per room at a time, in order
        self._turns_of: Counter[str] = Counter()  # by normalised Matrix user id
        self.state = MatrixState()
        self._saved = b""  # the state last written
        self._save_lock = trio.Lock()
        self.syncs = 0  # sync responses handled (tests wait on it)
        self._synced = trio.Event()
        self.turns_done = 0  # turns that ended, their end saved (tests wait on it)
        self._turned = trio.Event()

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key,)

    async def wait_syncs(self, count: int) -> None:
        """Until at least `count` sync responses were handled (for tests)."""
        while self.syncs < count:
            await self._synced.wait()

    async def wait_turns(self, count: int) -> None:
        """Until at least `count` turns have ended, their end saved (for tests)."""
        while self.turns_done < count:
            await self._turned.wait()

    # ------------------------------------------------------------------ serve

    async def push(self, key: str, scheduled: Scheduled) -> str | None:
        """An account is in many rooms and no one of them a schedule could name yet: the
        config rules refuse a schedule delivered to it, so this answers only a reload's race."""
        return f"{key}: a matrix channel has nobody to deliver a scheduled reply to"

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        timeout = httpx.Timeout(REQUEST_TIMEOUT_SECS + self.config.sync_timeout_secs)
        async with httpx.AsyncClient(
            base_url=self.config.homeserver.rstrip("/"), timeout=timeout
        ) as http:
            self._http = http
            # A start after a failed one: the messages it admitted and never started (its
            # save failed) hold no sender's room, and no turn of the last runs is queued.
            self._turns_of.clear()
            self._rooms = InOrder()
            try:
                await self._authenticate()
                core = self._core = MatrixCore(
                    self.config.user_id,
                    functools.partial(self._admits, host),
                    frozenset(self.config.approvers),
                    self.config.rate_limit_per_minute,
                    self.config.device_id,
                )
                self.state = await self._load()
                core.restore(self.state.next_batch)
                first = await self._sync(0)
            except (MatrixUnavailable, httpx.TransportError) as exc:
                raise ChannelStartFailed(f"{self.key}: {_describe(exc)}") from None
            cut_short, self.state.inflight = self.state.inflight, []
            await self._save()  # told once: a crash from here on does not tell them again
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._answer_cut_short, cut_short)
                await self._handle(host, first, nursery)
                task_status.started()
                while True:
                    try:
                        response = await self._sync(int(self.config.sync_timeout_secs * 1000))
                    except (MatrixUnavailable, httpx.TransportError) as exc:
                        raise MatrixUnavailable(f"{self.key}: {_describe(exc)}") from None
                    await self._handle(host, response, nursery)

    def _admits(self, host: ChannelHost, sender: str) -> bool:
        return isinstance(host.route(Inbound(self.key, sender, "")), Routed)

    async def _authenticate(self) -> None:
        if self.config.access_token_env is not None:
            self._token = self._env.get(self.config.access_token_env, "")
            if not self._token:
                raise MatrixUnavailable(f"{self.config.access_token_env} is not set")
            who = await self._call(nio.WhoamiResponse, *nio.Api.whoami(self._token))
            if who.user_id != self.config.user_id:
                raise MatrixUnavailable(
                    f"the access token is {who.user_id}'s, not {self.config.user_id}'s"
                )
            return
        assert self.config.password_env is not None  # the model asks for one of the two
        password = self._env.get(self.config.password_env, "")
        if not password:
            raise MatrixUnavailable(f"{self.config.password_env} is not set")
        login = await self._call(
            nio.LoginResponse,
            *nio.Api.login(
                self.config.user_id,
                password,
                device_name="zeroclaw",
                device_id=self.config.device_id or "",
            ),
        )
        self._token = str(login.access_token)

    # ------------------------------------------------------------------ HTTP

    async def _call(
        self,
        response_type: type[nio.Response],
        method: str,
        path: str,
        body: str | None = None,
        *args: object,
    ) -> nio.Response:
        """One request nio built, sent with the token as a header; its parsed response, or
        MatrixUnavailable. A 429 waits its `retry_after_ms` (bounded) and tries again."""
        assert self._http is not None
        base, params = _strip_token(path)
        headers = {"content-type": "application/json"}
        if self._token:
            headers["authorization"] = f"Bearer {self._token}"
        for _ in range(MAX_RATE_RETRIES):
            answer = await self._http.request(
                method, base, params=params, content=body, headers=headers
            )
            try:
                parsed = answer.json()
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                raise MatrixUnavailable(f"{method} {base}: HTTP {answer.status_code}, not JSON")
            if answer.status_code == 429:
                wait = min(float(parsed.get("retry_after_ms", 1000)) / 1000, MAX_RETRY_AFTER_SECS)
                await trio.sleep(wait)
                continue
            if answer.status_code >= 400:
                code, error = parsed.get("errcode", "?"), parsed.get("error", "")
                raise MatrixUnavailable(
                    f"{method} {base}: HTTP {answer.status_code} {code} {error}"
                )
            response = response_type.from_dict(parsed, *args)
            if isinstance(response, nio.ErrorResponse):
                raise MatrixUnavailable(f"{method} {base}: {response.message}")
            return response
        raise MatrixUnavailable(f"{method} {base}: still rate-limited after retries")

    async def _sync(self, timeout_ms: int) -> nio.SyncResponse:
        assert self._core is not None
        method, path = nio.Api.sync(
            self._token,
            since=self._core.next_batch or None,
            timeout=timeout_ms,
            filter=SYNC_FILTER,
        )
        response = await self._call(nio.SyncResponse, method, path)
        assert isinstance(response, nio.SyncResponse)
        return response

    async def _send(self, room_id: str, content: Mapping[str, object]) -> str:
        txn = secrets.token_hex(12)
        method, path, body = nio.Api.room_send(
            self._token, room_id, "m.room.message", dict(content), txn
        )
        sent = await self._call(nio.RoomSendResponse, method, path, body, room_id)
        assert isinstance(sent, nio.RoomSendResponse)
        return str(sent.event_id)

    # ------------------------------------------------------------------ a sync's actions

    async def _handle(
        self, host: ChannelHost, response: nio.SyncResponse, nursery: trio.Nursery
    ) -> None:
        assert self._core is not None
        taken: list[Deliver] = []
        for action in self._core.on_sync(response, time.monotonic()):
            await self._act(host, action, taken)
        # The sync's token and the messages it took, written together (no await between
        # the changes) and before any of their turns runs: a restart from here on neither
        # runs one again (the sync is not replayed) nor forgets one (it is in `inflight`).
        for message in taken:
            self.state.started(message.room_id, message.event_id)
        self.state.next_batch = self._core.next_batch
        await self._save()
        for message in taken:
            place = self._rooms.take(message.room_id)  # here, in the sync's order
            nursery.start_soon(self._turn, host, message, place, normalize_sender(message.sender))
        self.syncs += 1
        self._synced.set()
        self._synced = trio.Event()

    async def _act(self, host: ChannelHost, action: Action, taken: list[Deliver]) -> None:
        """One action of a sync. A request the homeserver refuses (a room where the bot may
        not post, an invite withdrawn before the join) is that room's failure, logged: it
        must not end the sync loop, which would stop every room and, the next-batch token
        unsaved, replay the same sync into the same refusal at each restart. An unreachable
        homeserver still ends it (the channel is failed, then retried)."""
        try:
            await self._request(host, action, taken)
        except MatrixUnavailable as exc:
            room = "" if isinstance(action, Answer) else f" in {action.room_id}"
            log.warning("%s: %s%s not done: %s", self.key, type(action).__name__, room, exc)

    async def _request(self, host: ChannelHost, action: Action, taken: list[Deliver]) -> None:
        """One action; a message admitted for a turn joins `taken` (its turn starts once
        the sync is saved)."""
        if isinstance(action, Join):
            method, path = nio.Api.join(self._token, action.room_id)
            await self._call(nio.JoinResponse, method, path, "{}")
        elif isinstance(action, Leave):
            method, path = nio.Api.room_leave(self._token, action.room_id)
            await self._call(
                nio.RoomLeaveResponse, method, path, json.dumps({"reason": action.reason})
            )
        elif isinstance(action, Notice):
            await self._send(action.room_id, notice_content(action.text))
        elif isinstance(action, Answer):
            pending = self._approvals.get(action.approval_id)
            if pending is not None:
                pending.approved = action.approved
                pending.answered.set()
        else:
            assert isinstance(action, Deliver)
            if not self._admits(host, action.sender):
                return  # a stranger: refused (counted, logged), no task, no answer
            sender = normalize_sender(action.sender)
            if (
                self._turns_of[sender] >= MAX_TURNS_PER_SENDER
                or self._turns_of.total() >= MAX_TURNS
            ):
                await self._send(action.room_id, notice_content(_busy(self._turns_of[sender])))
                return
            self._turns_of[sender] += 1
            taken.append(action)

    async def _turn(
        self, host: ChannelHost, message: Deliver, place: Place[str], sender: str
    ) -> None:
        ended = False  # not cut short by a stop: a stopped turn stays in `inflight`
        try:
            async with self._rooms.turn(place):  # the room's session, in its order
                await self._converse(host, message)
            ended = True
        finally:
            self._turns_of[sender] -= 1
            if self._turns_of[sender] <= 0:
                del self._turns_of[sender]
            if ended:
                self.state.finished(message.room_id, message.event_id)
                await save_turns_end(self._save)
                self.turns_done += 1
                self._turned.set()
                self._turned = trio.Event()

    async def _converse(self, host: ChannelHost, message: Deliver) -> None:
        """One message's turn: its reply streamed by edits, or one line saying why not. A
        sender the peer groups refuse gets no answer (counted and logged by the host)."""
        inbound = Inbound(self.key, message.sender, message.text, session=message.room_id)
        routed = host.route(inbound)
        if not isinstance(routed, Routed):
            return
        stream = ReplyStream(self.config.edit_interval_secs)
        changed = trio.Event()

        async def on_delta(delta: str) -> None:
            nonlocal changed
            stream.add(delta)
            changed.set()

        async def ask(rid: str, what: str) -> bool:
            return await self._ask(message.room_id, what)

        sending = trio.Lock()
        try:
            async with trio.open_nursery() as nursery:

                async def pump() -> None:
                    nonlocal changed
                    while True:
                        await changed.wait()
                        changed = trio.Event()
                        async with sending:
                            await self._flush(message.room_id, stream)

                nursery.start_soon(pump)
                outcome = await host.converse(inbound, ask=ask, routed=routed, on_delta=on_delta)
                async with sending:  # a send in flight finishes: edits name its event
                    nursery.cancel_scope.cancel()
            if isinstance(outcome, ChannelAnswer):
                final = outcome.reply or f"error: {outcome.error or 'no reply'}"
            elif isinstance(outcome, ChannelFailure):
                final = f"Sorry, no reply: {outcome.code} ({outcome.detail})"
            else:  # refused after all (a reload between route and converse)
                return
            # the whole reply, at the same pace as the edits; past one event's size, the
            # streamed notice shows its first piece and the others follow it. The turn is
            # over: a stop waits for its reply (bounded), so an answered message is never
            # told at the next start to send it again.
            first, *more = split_reply(final)
            stream.text = first
            with trio.CancelScope(shield=True), trio.move_on_after(REPLY_AFTER_STOP_SECS):
                await self._flush(message.room_id, stream)
                for piece in more:
                    await self._send(message.room_id, notice_content(piece))
        except (MatrixUnavailable, httpx.TransportError) as exc:
            log.warning(
                "%s: the reply to %s was not delivered: %s",
                self.key,
                message.event_id,
                _describe(exc),
            )
        except Exception:  # one turn's failure must not take the channel down
            log.exception("%s: the turn of %s failed", self.key, message.event_id)

    async def _flush(self, room_id: str, stream: ReplyStream) -> None:
        """Send or edit the reply to what it is now, at the stream's pace."""
        while (due := stream.due(time.monotonic())) is not None:
            delay = due - time.monotonic()
            if delay > 0:
                await trio.sleep(delay)
                continue
            text = stream.text
            if stream.event_id is None:
                event_id = await self._send(room_id, notice_content(text))
                stream.sent(text, time.monotonic(), event_id)
            else:
                await self._send(room_id, edit_content(stream.event_id, text))
                stream.sent(text, time.monotonic())

    async def _ask(self, room_id: str, what: str) -> bool:
        """Post the approval prompt in the room; an approver's reply answers it. The host's
        approval timeout cancels the wait (a denial)."""
        assert self._core is not None
        approval_id, prompt = self._core.ask(room_id, what)
        pending = self._approvals[approval_id] = _Approval(trio.Event())
        try:
            await self._send(room_id, notice_content(prompt))
            await pending.answered.wait()
            return pending.approved
        finally:
            del self._approvals[approval_id]
            self._core.forget(approval_id)

    async def _answer_cut_short(self, cut_short: list[Taken]) -> None:
        """The messages whose turns a restart cut short: each is told to be sent again."""
        for taken in cut_short:
            try:
                await self._send(taken.room_id, reply_content(taken.event_id, RESTARTED))
            except (MatrixUnavailable, httpx.TransportError) as exc:
                log.warning(
                    "%s: could not tell %s to resend: %s", self.key, taken.room_id, _describe(exc)
                )

    # ------------------------------------------------------------------ the state

    async def _load(self) -> MatrixState:
        path = self.state_dir / STATE_FILE
        try:
            data = await trio.Path(path).read_bytes()
        except FileNotFoundError:
            self._saved = b""
            legacy = trio.Path(self.state_dir / LEGACY_TOKEN_FILE)
            try:
                return MatrixState((await legacy.read_text()).strip())
            except FileNotFoundError:
                return MatrixState()
            except (OSError, ValueError) as exc:  # ValueError: not UTF-8
                raise ChannelStartFailed(
                    f"{self.key}: cannot read {legacy} ({exc}); move it away to start over"
                ) from None
        except OSError as exc:
            raise ChannelStartFailed(f"{self.key}: cannot read {path}: {exc}") from None
        try:
            state = decode_state(data)
        except msgspec.DecodeError as exc:
            # Starting without a token answers no message sent while the channel was down.
            raise ChannelStartFailed(
                f"{self.key}: {path} is not a valid state file ({exc}); move it away to "
                "start over (messages sent while the channel was down then get no answer)"
            ) from None
        self._saved = data
        return state

    async def _save(self) -> None:
        async with self._save_lock:
            data = encode_state(self.state)  # this moment's state, whatever changes meanwhile
            if data == self._saved:
                return
            await write_state(self.key, self.state_dir / STATE_FILE, data)
            if not self._saved:  # the first write: an older daemon's token file is read
                await trio.Path(self.state_dir / LEGACY_TOKEN_FILE).unlink(missing_ok=True)
            self._saved = data


def _busy(held: int) -> str:
    if held >= MAX_TURNS_PER_SENDER:
        return (
            f"Busy: {held} of your messages are still being answered; "
            "send this again when they are."
        )
    return "Busy: too many messages are being answered; try again shortly."


def _describe(exc: BaseException) -> str:
    if isinstance(exc, httpx.TransportError):
        return f"cannot reach the homeserver ({type(exc).__name__})"
    return str(exc)
