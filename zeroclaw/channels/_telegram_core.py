"""The Telegram channel's decisions, without I/O (ADR 0065): the Bot API's updates and
answers as typed values, what each update means (a message to converse on, a media message
to answer in one line, a button press, nothing), who its sender is, the long poll's offset
and what the channel keeps across a restart, the reply split at Telegram's limit, MarkdownV2
escaping, the streamed reply's edits at a bounded rate, and the approval buttons.
`_telegram` wires them to the Bot API over httpx.

Senders are Telegram user ids (a username changes hands; an id never does). A peer group may
still list `@name`: the first user seen with that username is pinned to it (logged, kept
across restarts), and only that user id is ever admitted under the name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from .._sender_names import normalize_sender
from ._types import ChannelAnswer, ChannelFailure, ChannelRefused, Outcome

MAX_MESSAGE_UTF16 = 4096  # Telegram's limit on one message's text, in UTF-16 code units
MAX_CALLBACK_DATA = 64  # bytes of an inline button's callback_data
TYPING_EVERY_SECS = 4.5  # a chat action shows for 5 s
MAX_PINS = 1024  # usernames pinned to ids, kept in the state file
MAX_INFLIGHT = 256  # messages taken and not yet answered, kept in the state file
MAX_RECENT = 1024  # update ids a webhook took lately, kept in the state file

# --------------------------------------------------------------------------- the Bot API


class User(msgspec.Struct, frozen=True):
    id: int
    is_bot: bool = False
    username: str | None = None
    first_name: str = ""


class Chat(msgspec.Struct, frozen=True):
    id: int
    type: str  # private, group, supergroup, channel


class Entity(msgspec.Struct, frozen=True):
    type: str
    offset: int  # in UTF-16 code units, as Telegram counts
    length: int
    user: User | None = None


class ReplyTo(msgspec.Struct, frozen=True):
    message_id: int
    from_: User | None = msgspec.field(default=None, name="from")


class Message(msgspec.Struct, frozen=True):
    message_id: int
    chat: Chat
    date: int = 0
    from_: User | None = msgspec.field(default=None, name="from")
    text: str | None = None
    entities: tuple[Entity, ...] = ()
    reply_to_message: ReplyTo | None = None
    # Anything else a message may carry (photo, voice, sticker, ...) is not read: a message
    # without text is "unsupported" whatever it holds.
    caption: str | None = None


class CallbackQuery(msgspec.Struct, frozen=True):
    id: str
    from_: User = msgspec.field(name="from")
    data: str | None = None
    message: Message | None = None


class Update(msgspec.Struct, frozen=True):
    update_id: int
    message: Message | None = None
    edited_message: Message | None = None
    channel_post: Message | None = None
    callback_query: CallbackQuery | None = None


class ResponseParameters(msgspec.Struct, frozen=True):
    retry_after: int | None = None


class ApiResponse(msgspec.Struct, frozen=True):
    ok: bool
    result: msgspec.Raw = msgspec.Raw(b"null")
    description: str = ""
    error_code: int | None = None
    parameters: ResponseParameters | None = None


@dataclass(frozen=True)
class ApiOk:
    result: msgspec.Raw


@dataclass(frozen=True)
class ApiRetry:
    """Flood control (429): wait this long, then the same call again."""

    after: float


@dataclass(frozen=True)
class ApiFailed:
    status: int
    description: str


ApiOutcome = ApiOk | ApiRetry | ApiFailed

_response = msgspec.json.Decoder(ApiResponse)
_updates = msgspec.json.Decoder(list[Update])
_user = msgspec.json.Decoder(User)
_message = msgspec.json.Decoder(Message)
MAX_RETRY_AFTER_SECS = 3600.0


def api_outcome(status: int, body: bytes) -> ApiOutcome:
    """What one Bot API answer means. A 429 is retried after its `retry_after` (1 s when it
    names none, at most an hour); anything that is not `{"ok": true}` is a failure, with
    Telegram's own description (the token is never in it: it is in the URL only)."""
    try:
        answer = _response.decode(body)
    except msgspec.DecodeError:
        if status == 429:
            return ApiRetry(1.0)
        return ApiFailed(status, f"HTTP {status} with a body that is not the Bot API's")
    if status == 429 or answer.error_code == 429:
        after = answer.parameters.retry_after if answer.parameters else None
        return ApiRetry(min(float(max(after or 1, 1)), MAX_RETRY_AFTER_SECS))
    if not answer.ok or not 200 <= status <= 299:
        return ApiFailed(answer.error_code or status, answer.description[:300] or f"HTTP {status}")
    return ApiOk(answer.result)


def decode_updates(raw: msgspec.Raw) -> list[Update]:
    return _updates.decode(raw)


_update = msgspec.json.Decoder(Update)


def decode_update(body: bytes) -> Update:
    """One update as a webhook POST carries it; msgspec.DecodeError when it is not one."""
    return _update.decode(body)


def decode_user(raw: msgspec.Raw) -> User:
    return _user.decode(raw)


def decode_message(raw: msgspec.Raw) -> Message:
    return _message.decode(raw)


_TOKEN_IN_PATH = re.compile(r"/bot[^/\s]+/")


def redact(text: str, token: str | None = None) -> str:
    """`text` with any bot token in it replaced: the Bot API's URLs hold the token in their
    path (`/bot<token>/<method>`), so an error or a log line about a URL must not show it."""
    if token:
        text = text.replace(token, "<token>")
    return _TOKEN_IN_PATH.sub("/bot<token>/", text)


# --------------------------------------------------------------------------- what an update is


@dataclass(frozen=True)
class Converse:
    """A text message addressed to the bot: a turn on it."""

    chat_id: int
    message_id: int
    user: User
    text: str
    group: bool


@dataclass(frozen=True)
class OneLine:
    """A message answered in one line without a turn (media, /start)."""

    chat_id: int
    message_id: int
    user: User
    text: str


@dataclass(frozen=True)
class Press:
    """A press of an inline button (an approval's Approve or Deny)."""

    query_id: str
    user: User
    data: str
    chat_id: int | None
    message_id: int | None


@dataclass(frozen=True)
class Skip:
    """Nothing to do (a group message not addressed to the bot, a bot's, an edit, ...)."""

    reason: str


Decision = Converse | OneLine | Press | Skip

UNSUPPORTED = "I read text messages only; this one was not passed on."


def utf16_slice(text: str, offset: int, length: int) -> str:
    """The part of `text` an entity names (its offset and length count UTF-16 units)."""
    raw = text.encode("utf-16-le")
    return raw[2 * offset : 2 * (offset + length)].decode("utf-16-le", errors="replace")


def addressed(message: Message, me: User) -> bool:
    """Whether a group message is for the bot: it mentions the bot (by @username or as a
    text mention), is a command to the bot (`/cmd@bot`), or replies to the bot's message."""
    reply = message.reply_to_message
    if reply is not None and reply.from_ is not None and reply.from_.id == me.id:
        return True
    name = f"@{me.username}".casefold() if me.username else None
    text = message.text or message.caption or ""
    for entity in message.entities:
        if entity.type == "text_mention" and entity.user is not None and entity.user.id == me.id:
            return True
        if name is None or entity.type not in ("mention", "bot_command"):
            continue
        named = utf16_slice(text, entity.offset, entity.length).casefold()
        if named == name or (entity.type == "bot_command" and named.endswith(name)):
            return True
    return False


def without_mention(text: str, me: User) -> str:
    if not me.username:
        return text.strip()
    return re.sub(rf"(?i)@{re.escape(me.username)}\b", "", text).strip()


def read_update(update: Update, me: User) -> Decision:
    """What one update asks of the channel (pure)."""
    if update.callback_query is not None:
        query = update.callback_query
        held = query.message
        return Press(
            query.id,
            query.from_,
            query.data or "",
            held.chat.id if held else None,
            held.message_id if held else None,
        )
    if update.edited_message is not None:
        return Skip("an edited message (only new messages are read)")
    message = update.message
    if message is None:
        return Skip("an update of a kind this channel does not read")
    sender = message.from_
    if sender is None:
        return Skip("a message without a sender (a channel post)")
    if sender.is_bot:
        return Skip("a message from a bot")
    chat = message.chat
    if chat.type == "channel":
        return Skip("a channel post")
    group = chat.type != "private"
    if group and not addressed(message, me):
        return Skip("a group message that neither mentions nor replies to the bot")
    if message.text is None:
        return OneLine(chat.id, message.message_id, sender, UNSUPPORTED)
    text = without_mention(message.text, me) if group else message.text
    words = text.split()
    if words and words[0].split("@")[0] == "/start":  # "/start", "/start@bot", a deep link
        return OneLine(
            chat.id,
            message.message_id,
            sender,
            f"Hello. Your Telegram user id is {sender.id}; the operator admits it in a "
            "peer group's external_peers.",
        )
    if not text.strip():
        return OneLine(chat.id, message.message_id, sender, "Say something after the mention.")
    return Converse(chat.id, message.message_id, sender, text, group)


def chat_session(chat_id: int) -> str:
    """The session of a chat, inside the sender's own namespace: each chat its own history
    (a private chat and a group the sender writes in are two)."""
    return f"chat{chat_id}"


# --------------------------------------------------------------------------- senders


@dataclass(frozen=True)
class SenderChoice:
    """The sender a message is routed as, and a username to pin to its id (None: none)."""

    sender: str
    pin: str | None = None
    conflict: str | None = None  # the username is pinned to another id: why it is not used


def choose_sender(
    user: User, pins: Mapping[str, int], accepted: Callable[[str], str | None]
) -> SenderChoice:
    """The user's id, unless the id is merely not listed and its username is: then the
    username, pinned to this id at first sight (a later user with the same name is not
    admitted under it). `accepted(sender)`: None when the channel's groups admit it, else
    the refusal code; an `ignore`d id is never admitted by its username."""
    by_id = str(user.id)
    refused = accepted(by_id)
    if refused is None or refused == "sender_ignored" or not user.username:
        return SenderChoice(by_id)
    name = normalize_sender(user.username)
    if not name or accepted(name) is not None:
        return SenderChoice(by_id)
    pinned = pins.get(name)
    if pinned is None:
        return SenderChoice(name, pin=name)
    if pinned != user.id:
        return SenderChoice(by_id, conflict=f"@{name} is pinned to user id {pinned}")
    return SenderChoice(name)


# --------------------------------------------------------------------------- state


class InFlight(msgspec.Struct, frozen=True, array_like=True):
    chat_id: int
    message_id: int


class TelegramState(msgspec.Struct):
    """What the channel keeps across a restart (`<state_dir>/channels/<key>.json`): the next
    update to read, the usernames pinned to ids, and the messages taken but not answered
    (a restart answers each: send it again)."""

    offset: int = 0
    pins: dict[str, int] = msgspec.field(default_factory=dict)
    inflight: list[InFlight] = msgspec.field(default_factory=list)
    recent: list[int] = msgspec.field(default_factory=list)  # webhook mode's update ids

    def take(self, updates: list[Update]) -> list[Update]:
        """The updates not seen yet, in order (a server that sends one again, or one below
        the offset, does not have it acted on twice); the offset moves past the last."""
        fresh = [
            u for u in sorted(updates, key=lambda u: u.update_id) if u.update_id >= self.offset
        ]
        seen: set[int] = set()
        unique = []
        for update in fresh:
            if update.update_id not in seen:
                seen.add(update.update_id)
                unique.append(update)
        if unique:
            self.offset = unique[-1].update_id + 1
        return unique

    def take_pushed(self, update: Update) -> bool:
        """Whether a webhook's update is new (Telegram sends one again when its answer was
        late or lost). By the ids taken lately, not by the offset alone: after a week
        without updates Telegram picks the next id at random, possibly below the offset.
        The offset moves past each id taken, so a switch back to polling goes on from
        there: past the highest, or, for an id further below it than any redelivery
        (Telegram restarted its ids), past that one (a getUpdates with the old offset would
        confirm, so drop, every update of the new ids)."""
        if update.update_id in self.recent:
            return False
        self.recent.append(update.update_id)
        del self.recent[:-MAX_RECENT]
        # Never below 0: a getUpdates with a negative offset forgets all but the last
        # updates (Telegram's ids are positive; a forged one is not let do that).
        if update.update_id >= 0 and update.update_id + 1 < self.offset - MAX_RECENT:
            self.offset = update.update_id + 1
        else:
            self.offset = max(self.offset, update.update_id + 1)
        return True

    def started(self, chat_id: int, message_id: int) -> bool:
        """Record a message taken for a turn; False when too many are (it is answered busy)."""
        if len(self.inflight) >= MAX_INFLIGHT:
            return False
        self.inflight.append(InFlight(chat_id, message_id))
        return True

    def finished(self, chat_id: int, message_id: int) -> None:
        held = InFlight(chat_id, message_id)
        if held in self.inflight:
            self.inflight.remove(held)

    def pin(self, name: str, user_id: int) -> bool:
        if name in self.pins or len(self.pins) >= MAX_PINS:
            return False
        self.pins[name] = user_id
        return True


_state = msgspec.json.Decoder(TelegramState)


def encode_state(state: TelegramState) -> bytes:
    return msgspec.json.encode(state)


def decode_state(data: bytes) -> TelegramState:
    """The state file's contents; msgspec.DecodeError when it is not one."""
    return _state.decode(data)


# --------------------------------------------------------------------------- replies


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_message(text: str, limit: int = MAX_MESSAGE_UTF16) -> list[str]:
    """`text` in pieces of at most `limit` UTF-16 units, cut at the last newline (else the
    last space) of each piece when there is one in its second half, and never inside a
    character. Joined, the pieces are `text`; empty text is one empty piece."""
    if limit < 2:
        raise ValueError("limit must be at least 2")
    pieces: list[str] = []
    rest = text
    while _utf16_len(rest) > limit:
        # the longest prefix within the limit (astral characters take two units)
        end, units = 0, 0
        for ch in rest:
            width = 2 if ord(ch) > 0xFFFF else 1
            if units + width > limit:
                break
            units += width
            end += 1
        cut = end
        for sep in ("\n", " "):
            at = rest.rfind(sep, 0, end)
            if at >= end // 2:
                cut = at + 1
                break
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    return pieces


_MARKDOWN_V2_SPECIAL = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")


def escape_markdown_v2(text: str) -> str:
    """`text` as MarkdownV2 shows it literally: every special character escaped."""
    return _MARKDOWN_V2_SPECIAL.sub(r"\\\1", text)


def outcome_text(outcome: Outcome) -> str:
    """What the chat reads for a conversation's outcome: the reply, or one line with the
    stable code (the README's error table)."""
    if isinstance(outcome, ChannelAnswer):
        return outcome.reply if outcome.reply.strip() else "(no reply)"
    if isinstance(outcome, ChannelRefused):
        return f"Refused: {outcome.code}: {' '.join(outcome.detail.split())}"
    assert isinstance(outcome, ChannelFailure)
    return f"No reply: {outcome.code}: {' '.join(outcome.detail.split())}"


def refusal_line(refused: ChannelRefused, user_id: int) -> str:
    if refused.code in ("sender_not_accepted", "sender_ignored"):
        return f"This bot does not take messages from you (Telegram user id {user_id})."
    return f"Refused: {refused.code}"


# --------------------------------------------------------------------------- streaming


@dataclass(frozen=True)
class Send:
    text: str


@dataclass(frozen=True)
class Edit:
    message_id: int
    text: str


@dataclass(frozen=True)
class Wait:
    secs: float


StreamAction = Send | Edit | Wait | None


@dataclass
class StreamEdits:
    """One reply shown as it is written: the first text sends a message, later text edits
    it, at most once per `interval` seconds, one call at a time. Past one message's length
    the stream stops editing; `finish` then puts the whole reply in place."""

    interval: float
    limit: int = MAX_MESSAGE_UTF16
    text: str = ""
    message_id: int | None = None
    shown: str = ""
    last: float = float("-inf")
    busy: bool = False  # a send or edit is on its way
    full: bool = False

    def feed(self, delta: str) -> None:
        self.text += delta

    def next(self, now: float) -> StreamAction:
        """The call to make now, how long to wait before asking again, or None (nothing)."""
        if self.busy or self.full:
            return None
        if _utf16_len(self.text) > self.limit:
            self.full = True
            return None
        if not self.text.strip() or self.text == self.shown:
            return None
        wait = self.last + self.interval - now
        if wait > 0:
            return Wait(wait)
        self.busy = True
        self.last = now
        if self.message_id is None:
            return Send(self.text)
        return Edit(self.message_id, self.text)

    def done(self, shown: str, message_id: int | None) -> None:
        """The call `next` asked for went out (`message_id`: the sent message's)."""
        self.busy = False
        self.shown = shown
        if self.message_id is None:
            self.message_id = message_id

    def failed(self) -> None:
        self.busy = False

    def finish(self, final: str) -> list[Send | Edit]:
        """The calls that leave the chat showing `final` whole: the streamed message edited
        to its first piece (when it differs), the other pieces sent."""
        pieces = split_message(final, self.limit)
        if self.message_id is None:
            return [Send(p) for p in pieces]
        first: list[Send | Edit] = (
            [] if pieces[0] == self.shown else [Edit(self.message_id, pieces[0])]
        )
        return first + [Send(p) for p in pieces[1:]]


# --------------------------------------------------------------------------- approvals

ApprovalVerdict = Literal["answered", "not_an_approver", "unknown"]


@dataclass
class PendingApprovals:
    """Approvals asked in chats, by the token their buttons carry; only `approvers` may
    answer them."""

    approvers: frozenset[int]
    asked: dict[str, str] = field(default_factory=dict)  # token -> what
    answers: dict[str, bool] = field(default_factory=dict)

    def ask(self, token: str, what: str) -> None:
        """Record an approval asked with buttons carrying `token` (random, from the shell)."""
        self.asked[token] = what

    def forget(self, token: str) -> None:
        self.asked.pop(token, None)
        self.answers.pop(token, None)

    def press(self, user_id: int, data: str) -> tuple[ApprovalVerdict, str | None, bool]:
        """A button press: the verdict, the approval's token and whether it approves."""
        parsed = parse_press(data)
        if parsed is None or parsed[0] not in self.asked or parsed[0] in self.answers:
            return "unknown", None, False
        token, approved = parsed
        if user_id not in self.approvers:
            return "not_an_approver", token, False
        self.answers[token] = approved
        return "answered", token, approved


def press_data(token: str, approved: bool) -> str:
    data = f"zc:{token}:{'y' if approved else 'n'}"
    assert len(data.encode()) <= MAX_CALLBACK_DATA
    return data


def parse_press(data: str) -> tuple[str, bool] | None:
    parts = data.split(":")
    if len(parts) != 3 or parts[0] != "zc" or parts[2] not in ("y", "n") or not parts[1]:
        return None
    return parts[1], parts[2] == "y"


def approval_markup(token: str) -> dict[str, object]:
    return {
        "inline_keyboard": [
            [
                {"text": "Approve", "callback_data": press_data(token, True)},
                {"text": "Deny", "callback_data": press_data(token, False)},
            ]
        ]
    }


APPROVAL_SHOWN_UTF16 = 3500  # of the escaped request: the heading and its `by` fit beside it


def _escaped_within(what: str, limit: int = APPROVAL_SHOWN_UTF16) -> str:
    """`what` escaped for MarkdownV2 and cut (marked `…`) to `limit` UTF-16 units. Cut
    after escaping, which can double the length (code is full of `.`, `(`, `-`), and in
    units, not characters (an emoji is two): else a long request is refused by Telegram as
    too long, and an approval shown nowhere is a denial."""
    escaped = escape_markdown_v2(what)
    if _utf16_len(escaped) <= limit:
        return escaped
    pieces, units = [], 1  # the `…`
    for ch in what:
        piece = escape_markdown_v2(ch)
        units += _utf16_len(piece)
        if units > limit:
            break
        pieces.append(piece)
    return "".join(pieces) + "…"


def approval_text(what: str) -> str:
    """The approval message, MarkdownV2: what the agent asks for, shown literally."""
    return f"*Approval needed*\n{_escaped_within(what)}"


def approval_settled(what: str, approved: bool, by: str) -> str:
    verdict = "Approved" if approved else "Denied"
    return f"*{verdict}* by {escape_markdown_v2(by)}\n{_escaped_within(what)}"


PRESS_ANSWERS: dict[ApprovalVerdict, str] = {
    "answered": "Noted.",
    "not_an_approver": "Only the operator's approvers may answer this.",
    "unknown": "This approval is no longer pending.",
}
