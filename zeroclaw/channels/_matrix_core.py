"""The Matrix channel's decisions, without I/O (ADR 0066): what one /sync response asks of
the channel (accept or refuse an invite, refuse an encrypted room, deliver a message,
answer an approval), the content of what it sends (an `m.notice` with an escaped HTML
body, an `m.replace` edit), the pace of a streamed reply's edits, and the approvals it
waits for. `_matrix` only wires these to the homeserver over HTTP.

Room state is matrix-nio's sans-IO `Client` fed each sync response (`receive_response`);
the next-batch token it keeps is what the shell persists (`MatrixState`, with the messages
whose turns are running), so a restart neither loses nor repeats a message, and answers
one whose turn it cut short "send it again". A first sync without a token only catches
up: it accepts invites, and answers no message already in a room's history.
"""

from __future__ import annotations

import html
import json
import logging
import math
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec
import nio

from .._sender_names import normalize_sender
from ._webhook_core import RateLimiter

log = logging.getLogger("zeroclaw.channels.matrix")
# matrix-nio logs every response it parses whole at DEBUG, a login's access token with it,
# and each room event at INFO: its loggers say warnings only, whatever the daemon's level.
logging.getLogger("nio").setLevel(logging.WARNING)

ENCRYPTED_REFUSAL = (
    "This room is end-to-end encrypted, and this zeroclaw channel cannot read encrypted "
    "messages: leaving. Talk to me in an unencrypted room (E2EE needs the encryption extra, "
    "which this channel does not use)."
)
UNSUPPORTED = "I understand text messages only."
HTML_FORMAT = "org.matrix.custom.html"
# A homeserver refuses an event over 64 KiB; an edit carries its text four times (body and
# escaped HTML, again in m.new_content): a reply is sent in pieces whose edits fit this.
MAX_EVENT_JSON = 48_000
APPROVAL_ID_BYTES = 3  # six hex digits: typed by a person, unique among the pending ones
_ANSWER = re.compile(r"^\s*(approve|deny)\s+([0-9a-f]{1,32})\s*[.!]?\s*$", re.IGNORECASE)


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Join:
    room_id: str


@dataclass(frozen=True)
class Leave:
    room_id: str
    reason: str


@dataclass(frozen=True)
class Notice:
    room_id: str
    text: str


@dataclass(frozen=True)
class Deliver:
    """A text message for the channel host: it decides the target and admits the sender."""

    room_id: str
    sender: str  # the Matrix user id as the homeserver stamped it
    text: str
    event_id: str


@dataclass(frozen=True)
class Answer:
    approval_id: str
    approved: bool


Action = Join | Leave | Notice | Deliver | Answer


# --------------------------------------------------------------------------- content


def formatted(text: str) -> str:
    """The HTML body of `text`: every character escaped, line breaks kept. A reply never
    carries markup the model wrote (no link or image a room's clients would render)."""
    return html.escape(text, quote=True).replace("\n", "<br>")


def notice_content(text: str) -> dict[str, str]:
    return {
        "msgtype": "m.notice",
        "body": text,
        "format": HTML_FORMAT,
        "formatted_body": formatted(text),
    }


def reply_content(event_id: str, text: str) -> dict[str, object]:
    """A notice in reply to the message `event_id` (clients show it quoted)."""
    return {**notice_content(text), "m.relates_to": {"m.in_reply_to": {"event_id": event_id}}}


def edit_content(event_id: str, text: str) -> dict[str, object]:
    """An `m.replace` edit of the notice `event_id` to `text` (clients without edits show
    the `* ` fallback)."""
    new = notice_content(text)
    return {
        **notice_content(f"* {text}"),
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


def strip_reply_fallback(body: str) -> str:
    """A reply's own text: the quoted `> ` lines of the message it answers dropped."""
    lines = body.split("\n")
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).strip()


def parse_answer(text: str) -> tuple[str, bool] | None:
    """`approve <id>` / `deny <id>` (any case): the id and yes or no; None otherwise."""
    match = _ANSWER.match(text)
    if match is None:
        return None
    return match.group(2).lower(), match.group(1).lower() == "approve"


def _relation(event: nio.Event) -> str | None:
    content = event.source.get("content", {})
    relates = content.get("m.relates_to") if isinstance(content, dict) else None
    rel_type = relates.get("rel_type") if isinstance(relates, dict) else None
    return rel_type if isinstance(rel_type, str) else None


def _edit_size(text: str) -> int:
    """The JSON size of an edit to `text` (the largest event a reply's text is sent in)."""
    return len(json.dumps(edit_content("$" + "x" * 80, text)))


def split_reply(text: str, limit: int = MAX_EVENT_JSON) -> list[str]:
    """`text` in pieces whose edit events fit `limit` bytes, cut at a line break in the
    second half of a piece when there is one. Joined, the pieces are `text`."""
    pieces: list[str] = []
    rest = text
    while _edit_size(rest) > limit:
        lo, hi = 1, len(rest)  # the longest prefix that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _edit_size(rest[:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        at = rest.rfind("\n", 0, lo)
        cut = at + 1 if at >= lo // 2 else lo
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    return pieces


# --------------------------------------------------------------------------- streaming


@dataclass
class ReplyStream:
    """One reply streamed by edits: the first text is sent at once, then the message is
    edited at most once per `interval` seconds, and the last edit carries the whole reply."""

    interval: float
    text: str = ""
    sent_text: str = ""
    event_id: str | None = None
    last_sent: float = -math.inf

    def add(self, delta: str) -> None:
        self.text += delta

    def due(self, now: float) -> float | None:
        """When the next send or edit should go (<= now: at once); None: nothing new."""
        if not self.text.strip() or self.text == self.sent_text:
            return None
        if _edit_size(self.text) > MAX_EVENT_JSON:
            return None  # too long for one event: the whole reply goes in pieces at the end
        if self.event_id is None:
            return now
        return max(now, self.last_sent + self.interval)

    def sent(self, text: str, now: float, event_id: str | None = None) -> None:
        self.sent_text, self.last_sent = text, now
        if event_id is not None and self.event_id is None:
            self.event_id = event_id


# --------------------------------------------------------------------------- approvals


@dataclass
class PendingApproval:
    room_id: str
    what: str


def approval_prompt(approval_id: str, what: str) -> str:
    return (
        f"Approval {approval_id} needed: {' '.join(what.split())}\n"
        f"An approver replies 'approve {approval_id}' or 'deny {approval_id}'."
    )


# --------------------------------------------------------------------------- the core


@dataclass
class MatrixCore:
    """The channel's state between sync responses. `admits(sender)`: whether the peer
    groups of the channel's owner accept this Matrix user (the host's routing decides it
    from the config alone); only such a user's invite is accepted."""

    user_id: str
    admits: Callable[[str], bool]
    approvers: frozenset[str] = frozenset()  # normalised Matrix user ids
    rate_per_minute: int = 20
    device_id: str | None = None
    client: nio.Client = field(init=False)
    pending: dict[str, PendingApproval] = field(default_factory=dict)
    refused_rooms: set[str] = field(default_factory=set)  # encrypted: left, said why once
    _limiter: RateLimiter = field(init=False)
    _told_to_wait: set[str] = field(default_factory=set)
    _joining: set[str] = field(default_factory=set)  # joined in this run, join not yet seen

    def __post_init__(self) -> None:
        config = nio.ClientConfig(encryption_enabled=False, store_sync_tokens=False)
        self.client = nio.Client(self.user_id, self.device_id, store_path=None, config=config)
        self.client.user_id = self.user_id
        self._limiter = RateLimiter(self.rate_per_minute)
        self.approvers = frozenset(normalize_sender(a) for a in self.approvers)

    @property
    def next_batch(self) -> str:
        return str(self.client.next_batch)

    def restore(self, token: str) -> None:
        """The token a previous run persisted: the next sync starts after it."""
        self.client.next_batch = token

    def on_sync(self, response: nio.SyncResponse, now: float) -> list[Action]:
        """What one sync response asks of the channel, in order: invites, then each joined
        room's messages (a first sync without a token answers none of them)."""
        catching_up = not self.client.next_batch
        self.client.receive_response(response)
        actions: list[Action] = []
        for room_id, invite in response.rooms.invite.items():
            actions += self._invite(room_id, invite.invite_state, now)
        for room_id, joined in response.rooms.join.items():
            events = joined.timeline.events
            if room_id in self.client.encrypted_rooms or any(
                isinstance(e, nio.MegolmEvent) for e in events
            ):
                actions += self._refuse_encrypted(room_id)
                continue
            if catching_up:
                continue
            if room_id in self._joining:
                # A room we just joined: its timeline may hold history from before the
                # join, which nobody sent to us; answer only what follows our join.
                joined_at = next((i for i, e in enumerate(events) if self._is_own_join(e)), None)
                if joined_at is None:
                    if not any(self._is_own_join(e) for e in joined.state):
                        continue
                    # A cut (limited) timeline: the join is in the state before it, so all
                    # of the timeline follows it. Waiting for the join in a timeline kept
                    # the room deaf for the run (50 messages as the bot joined did it).
                    joined_at = -1
                self._joining.discard(room_id)
                events = events[joined_at + 1 :]
            for event in events:
                actions += self._event(room_id, event, now)
        for room_id in response.rooms.leave:
            self.refused_rooms.discard(room_id)  # invited again later: decided anew
            for approval_id, pending in list(self.pending.items()):
                if pending.room_id == room_id:
                    actions.append(Answer(approval_id, False))  # nobody left to answer
        return actions

    def _invite(self, room_id: str, state: Iterable[object], now: float) -> list[Action]:
        invites = [
            e
            for e in state
            if isinstance(e, nio.InviteMemberEvent)
            and e.state_key == self.user_id
            and e.membership == "invite"
        ]
        if not invites:
            return []
        inviter = invites[-1].sender
        if self.admits(inviter):
            # Each joined room is synced for good: invites are held to the inviter's rate.
            if self._limiter.admit(normalize_sender(inviter), now) is not None:
                log.info("refusing the invite of %s to %s: over its rate", inviter, room_id)
                return [Leave(room_id, "too many invites from this sender; try again later")]
            log.info("accepting the invite of %s to %s", inviter, room_id)
            self._joining.add(room_id)
            return [Join(room_id)]
        log.info("refusing the invite of %s to %s: not an admitted sender", inviter, room_id)
        return [Leave(room_id, "the inviter is not an admitted sender of this channel")]

    def _is_own_join(self, event: object) -> bool:
        return (
            isinstance(event, nio.RoomMemberEvent)
            and event.state_key == self.user_id
            and event.membership == "join"
        )

    def _refuse_encrypted(self, room_id: str) -> list[Action]:
        if room_id in self.refused_rooms:
            return []
        self.refused_rooms.add(room_id)
        log.info("leaving %s: end-to-end encrypted", room_id)
        return [
            Notice(room_id, ENCRYPTED_REFUSAL),
            Leave(room_id, "end-to-end encrypted rooms are not supported"),
        ]

    def _event(self, room_id: str, event: object, now: float) -> list[Action]:
        if not isinstance(event, nio.RoomMessage) or event.sender == self.user_id:
            return []  # state, our own echo
        if isinstance(event, nio.RoomMessageNotice):
            return []  # another bot's notice: answering bots would loop
        if _relation(event) == "m.replace":
            return []  # an edit is not a new message
        sender = normalize_sender(event.sender)
        # Every message counts against its sender's rate, answers and media too (each may
        # make the bot post), and a stranger gets silence whatever they send: a notice is
        # read by everyone in the room. `admits` routes and the host counts each refusal:
        # it is asked at most once a message, and not for a delivered one (routed later).
        wait = self._limiter.admit(sender, now)
        if wait is not None:
            if sender in self._told_to_wait or not self._known(event.sender):
                return []
            self._told_to_wait.add(sender)  # said once per flood, not per message
            return [Notice(room_id, f"Too many messages: try again in {wait} s.")]
        self._told_to_wait.discard(sender)
        if not isinstance(event, nio.RoomMessageText):
            return [Notice(room_id, UNSUPPORTED)] if self.admits(event.sender) else []
        text = strip_reply_fallback(event.body)
        answer = parse_answer(text)
        if answer is not None:
            return self._answer(room_id, event.sender, *answer) if self._known(event.sender) else []
        return [Deliver(room_id, event.sender, text, event.event_id)]

    def _known(self, sender: str) -> bool:
        """An approver or an admitted sender: someone the bot answers."""
        return normalize_sender(sender) in self.approvers or self.admits(sender)

    def _answer(self, room_id: str, sender: str, approval_id: str, yes: bool) -> list[Action]:
        pending = self.pending.get(approval_id)
        if pending is None or pending.room_id != room_id:
            return [Notice(room_id, f"No approval {approval_id} is pending in this room.")]
        if normalize_sender(sender) not in self.approvers:
            log.info("refused %s's answer to approval %s: not an approver", sender, approval_id)
            return [
                Notice(room_id, f"Only the configured approvers answer approval {approval_id}.")
            ]
        del self.pending[approval_id]
        return [Answer(approval_id, yes)]

    def ask(self, room_id: str, what: str) -> tuple[str, str]:
        """A new pending approval in `room_id`: its id and the prompt to post there."""
        approval_id = secrets.token_hex(APPROVAL_ID_BYTES)
        while approval_id in self.pending:
            approval_id = secrets.token_hex(APPROVAL_ID_BYTES)
        self.pending[approval_id] = PendingApproval(room_id, what)
        return approval_id, approval_prompt(approval_id, what)

    def forget(self, approval_id: str) -> None:
        """The approval ended without an answer here (its timeout, the turn's end)."""
        self.pending.pop(approval_id, None)


# --------------------------------------------------------------------------- kept state


class Taken(msgspec.Struct, frozen=True, array_like=True):
    """A message taken for a turn whose reply has not been sent."""

    room_id: str
    event_id: str


class MatrixState(msgspec.Struct):
    """What the channel keeps across a restart (`<state_dir>/channels/matrix/<alias>/
    state.json`): the next-batch token of the last sync whose messages were acted on, and
    the messages taken for a turn and not answered (a restart answers each: send it
    again). At most the channel's turns at once are taken."""

    next_batch: str = ""
    inflight: list[Taken] = msgspec.field(default_factory=list)

    def started(self, room_id: str, event_id: str) -> None:
        self.inflight.append(Taken(room_id, event_id))

    def finished(self, room_id: str, event_id: str) -> None:
        taken = Taken(room_id, event_id)
        if taken in self.inflight:
            self.inflight.remove(taken)


_state = msgspec.json.Decoder(MatrixState)


def encode_state(state: MatrixState) -> bytes:
    return msgspec.json.encode(state)


def decode_state(data: bytes) -> MatrixState:
    """The state file's contents; msgspec.DecodeError when it is not one."""
    return _state.decode(data)
