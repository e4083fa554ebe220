"""The webhook channel's decisions, without I/O: request paths, the HMAC signature, the
replay window and its nonce cache, the per-sender rate limiter, the request bodies, and the
HTTP status and JSON error body of every outcome. `_webhook` only wires them to a server.

Signing (README "Webhook channel"): `X-Zeroclaw-Timestamp: <unix seconds>` and
`X-Zeroclaw-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>`. A GET has
no body, so its request path stands in for it: `"<timestamp>." + path` (a signature then
names the one resource it reads).
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal

import msgspec

from ..bus import normalize_sender
from ..config import Config, WebhookChannel, channel_owners
from ._types import BUDGET_RETRY_SECS, ChannelAnswer, ChannelFailure, ChannelRefused, Outcome

REPLAY_WINDOW_SECS = 300
TIMESTAMP_HEADER = "x-zeroclaw-timestamp"
SIGNATURE_HEADER = "x-zeroclaw-signature"
_PREFIX = "sha256="

# The webhook's own error codes (a refused sender or target uses the host's
# ChannelRefusalCode; a turn without a reply, its ChannelFailureCode).
WebhookErrorCode = Literal[
    "too_large",  # 413: the body is over the channel's max_body_bytes
    "unknown_channel",  # 404: no webhook channel of that alias on this listener
    "stale_timestamp",  # 401: timestamp missing or outside ±300 s
    "bad_signature",  # 401: signature missing or not the channel secret's
    "replay",  # 409: this signature was already seen in the window
    "bad_json",  # 400: the body is not the expected JSON object
    "rate_limited",  # 429: the sender is over rate_limit_per_minute (see Retry-After)
    "not_found",  # 404: no such path
    "method_not_allowed",  # 405
    "unknown_approval",  # 404: no pending approval or turn of that id (or it expired)
    "busy",  # 503: too many pending turns or unexpired nonces; retry later
]


class WebhookError(msgspec.Struct, frozen=True):
    """An error answer: its HTTP status and body `{"error": code, "message": text}`."""

    status: int
    error: str
    message: str
    retry_after: int | None = None

    def body(self) -> bytes:
        return msgspec.json.encode({"error": self.error, "message": self.message})


def error(status: int, code: WebhookErrorCode, message: str) -> WebhookError:
    return WebhookError(status, code, message)


# --------------------------------------------------------------------------- paths


class Messages(msgspec.Struct, frozen=True):
    alias: str


class Approve(msgspec.Struct, frozen=True):
    alias: str
    approval_id: str


class TurnResult(msgspec.Struct, frozen=True):
    alias: str
    approval_id: str


class Health(msgspec.Struct, frozen=True):
    pass


class Ready(msgspec.Struct, frozen=True):
    pass


Route = Messages | Approve | TurnResult | Health | Ready


def parse_route(method: str, path: str) -> Route | WebhookError:
    """Which endpoint a request names, or 404/405."""
    parts = path.split("/")
    allowed: str
    route: Route
    if path == "/healthz":
        route, allowed = Health(), "GET"
    elif path == "/readyz":
        route, allowed = Ready(), "GET"
    elif len(parts) == 5 and parts[:3] == ["", "v1", "channels"] and parts[4] == "messages":
        route, allowed = Messages(parts[3]), "POST"
    elif len(parts) == 6 and parts[:3] == ["", "v1", "channels"] and parts[4] == "approvals":
        route, allowed = Approve(parts[3], parts[5]), "POST"
    elif len(parts) == 6 and parts[:3] == ["", "v1", "channels"] and parts[4] == "turns":
        route, allowed = TurnResult(parts[3], parts[5]), "GET"
    else:
        return error(404, "not_found", f"no endpoint at {path[:200]!r}")
    if method != allowed:
        return error(405, "method_not_allowed", f"{path[:200]} takes {allowed}")
    return route


# --------------------------------------------------------------------------- signature


def sign(secret: bytes, timestamp: str, payload: bytes) -> str:
    """The signature header's value for a request (clients and tests use it too)."""
    digest = hmac.new(secret, timestamp.encode("ascii") + b"." + payload, hashlib.sha256)
    return _PREFIX + digest.hexdigest()


def signature_ok(secret: bytes, timestamp: str, payload: bytes, signature: str | None) -> bool:
    if signature is None or not signature.startswith(_PREFIX):
        return False
    expected = sign(secret, timestamp, payload)
    # Constant time: a timing difference would leak how much of a guess was right.
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("ascii", "replace"))


def parse_timestamp(
    value: str | None, now: float, window: float = REPLAY_WINDOW_SECS
) -> int | None:
    """The header's unix seconds if they are within ±window of now, else None."""
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 12:
        return None
    stamp = int(value)
    return stamp if abs(now - stamp) <= window else None


@dataclass
class NonceCache:
    """Signatures seen within the replay window. A signature is kept until its timestamp
    leaves the window (after that the timestamp check refuses it anyway), so memory is
    bounded by what signers send in one window, and by `capacity` on top."""

    window: float = REPLAY_WINDOW_SECS
    capacity: int = 100_000
    _expiry: list[tuple[float, str]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def first_use(self, signature: str, stamp: float, now: float) -> bool | None:
        """True: first use, now recorded. False: a replay. None: full (refuse, retry)."""
        while self._expiry and self._expiry[0][0] < now:
            _, old = heapq.heappop(self._expiry)
            self._seen.discard(old)
        if signature in self._seen:
            return False
        if len(self._seen) >= self.capacity:
            return None
        self._seen.add(signature)
        heapq.heappush(self._expiry, (stamp + self.window, signature))
        return True

    def seen(self, signature: str) -> bool:
        """Already used (a replay), without recording it."""
        return signature in self._seen

    def __len__(self) -> int:
        return len(self._seen)


@dataclass
class RateLimiter:
    """A token bucket per sender: `per_minute` requests in a burst, refilled evenly over
    a minute. `admit` answers None (admitted) or the seconds to wait (Retry-After)."""

    per_minute: int
    max_senders: int = 10_000
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # tokens, when

    def admit(self, sender: str, now: float) -> int | None:
        rate = self.per_minute / 60.0
        tokens, then = self._buckets.get(sender, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + max(0.0, now - then) * rate)
        if tokens < 1.0:
            self._buckets[sender] = (tokens, now)
            return max(1, math.ceil((1.0 - tokens) / rate))
        self._buckets[sender] = (tokens - 1.0, now)
        if len(self._buckets) > self.max_senders:
            self._forget_full(now)
        return None

    def _forget_full(self, now: float) -> None:
        # A bucket that has refilled is the same as no bucket: forgetting it changes nothing.
        rate = self.per_minute / 60.0
        for sender, (tokens, then) in list(self._buckets.items()):
            if tokens + (now - then) * rate >= self.per_minute:
                del self._buckets[sender]


# --------------------------------------------------------------------------- bodies

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class MessageBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    sender: Name
    text: str
    session: Name | None = None
    agent: Name | None = None


class ApprovalBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    approved: bool


_message_decoder = msgspec.json.Decoder(MessageBody)
_approval_decoder = msgspec.json.Decoder(ApprovalBody)


def parse_message(body: bytes) -> MessageBody | WebhookError:
    try:
        return _message_decoder.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError is one
        return error(400, "bad_json", f"expected {{sender, text, session?, agent?}}: {exc}")


def parse_approval(body: bytes) -> ApprovalBody | WebhookError:
    try:
        return _approval_decoder.decode(body)
    except msgspec.DecodeError as exc:
        return error(400, "bad_json", f"expected {{approved: bool}}: {exc}")


# --------------------------------------------------------------------------- the gate


@dataclass
class Gate:
    """The checks of one listener's signed requests, in order: unknown channel, timestamp,
    signature, replay, then (after the body is parsed) the sender's rate. `secrets` maps a
    channel alias to its secret; the caller has already capped the body's size."""

    channels: Mapping[str, WebhookChannel]  # alias -> its config
    secrets: Mapping[str, bytes]
    nonces: NonceCache = field(default_factory=NonceCache)
    _limiters: dict[str, RateLimiter] = field(default_factory=dict)

    def body_limit(self, alias: str) -> int:
        """The most body bytes read for a request to `alias` (an unknown alias gets the
        smallest cap of the listener: reading more would be work for a 404)."""
        hook = self.channels.get(alias)
        if hook is not None:
            return hook.max_body_bytes
        return min((h.max_body_bytes for h in self.channels.values()), default=0)

    def verify(
        self,
        alias: str,
        timestamp: str | None,
        signature: str | None,
        payload: bytes,
        now: float,
        *,
        once: bool = True,
    ) -> WebhookError | None:
        """None when the request is the channel secret's, fresh, and (if `once`) unseen."""
        secret = self.secrets.get(alias)
        if alias not in self.channels or secret is None:
            return error(404, "unknown_channel", f"no webhook channel {alias[:64]!r} here")
        stamp = parse_timestamp(timestamp, now)
        if stamp is None:
            return error(
                401,
                "stale_timestamp",
                f"{TIMESTAMP_HEADER} must be unix seconds within "
                f"{REPLAY_WINDOW_SECS} s of the server's clock",
            )
        if not signature_ok(secret, str(timestamp), payload, signature):
            return error(401, "bad_signature", f"{SIGNATURE_HEADER} does not match")
        if once:
            return self.first_use(str(timestamp), str(signature), now)
        if self.nonces.seen(str(signature)):
            return error(409, "replay", "this signature was already used")
        return None

    def first_use(self, timestamp: str, signature: str, now: float) -> WebhookError | None:
        """Record a verified request's signature: only once it is to be acted on (past
        its sender's rate, to a pending approval), so that requests refused anyway never
        fill the listener's nonce cache, which every channel and sender on it shares."""
        stamp = parse_timestamp(timestamp, now)
        if stamp is None:
            return error(401, "stale_timestamp", f"{TIMESTAMP_HEADER} is no longer fresh")
        first = self.nonces.first_use(signature, stamp, now)
        if first is None:
            return error(503, "busy", "too many recent requests to remember; retry")
        if not first:
            return error(409, "replay", "this signature was already used")
        return None

    def rate(self, alias: str, sender: str, now: float) -> WebhookError | None:
        limiter = self._limiters.get(alias)
        if limiter is None:
            limiter = self._limiters[alias] = RateLimiter(
                self.channels[alias].rate_limit_per_minute
            )
        # One budget per sender as admission knows it: `CI-BOT` and `@ci-bot` are `ci-bot`.
        wait = limiter.admit(normalize_sender(sender), now)
        if wait is None:
            return None
        return WebhookError(429, "rate_limited", f"sender over its rate; retry in {wait} s", wait)


# --------------------------------------------------------------------------- outcomes

_REFUSAL_STATUS = {
    "sender_ignored": 403,
    "sender_not_accepted": 403,
    "unknown_agent": 404,
    "agent_not_bound": 404,
    "no_owner": 404,
    "unknown_channel": 404,
}
_FAILURE_STATUS = {"timeout": 504, "budget_exceeded": 429}


def answer_body(answer: ChannelAnswer) -> bytes:
    body: dict[str, object] = {
        "agent": answer.agent,
        "reply": answer.reply,
        "tool_calls": answer.tool_calls,
    }
    if answer.error is not None:
        body["error"] = answer.error
    if answer.cancelled:
        body["cancelled"] = True
    if answer.stopped is not None:
        body["stopped"] = answer.stopped
    return msgspec.json.encode(body)


def outcome_headers(outcome: Outcome) -> list[tuple[bytes, bytes]]:
    """The headers of a conversation's outcome: a budget's refusal says when to retry."""
    if isinstance(outcome, ChannelFailure) and outcome.code == "budget_exceeded":
        return [(b"retry-after", str(BUDGET_RETRY_SECS).encode())]
    return []


def outcome_response(outcome: Outcome) -> tuple[int, bytes]:
    """The HTTP status and JSON body of a conversation's outcome."""
    if isinstance(outcome, ChannelAnswer):
        return 200, answer_body(outcome)
    if isinstance(outcome, ChannelRefused):
        status = _REFUSAL_STATUS.get(outcome.code, 403)
        return status, WebhookError(status, outcome.code, outcome.detail).body()
    assert isinstance(outcome, ChannelFailure)
    status = _FAILURE_STATUS.get(outcome.code, 503)
    return status, WebhookError(status, outcome.code, outcome.detail).body()


# --------------------------------------------------------------------------- callbacks

CALLBACK_BACKOFF_CAP_SECS = 60.0

CallbackVerdict = Literal["delivered", "retry", "give_up"]


def callback_delays(
    attempts: int, initial: float, cap: float = CALLBACK_BACKOFF_CAP_SECS
) -> list[float]:
    """The waits between `attempts` delivery attempts: `initial`, doubling, at most `cap`."""
    return [min(initial * 2.0**i, cap) for i in range(max(attempts - 1, 0))]


def callback_verdict(status: int | None) -> CallbackVerdict:
    """What an attempt's answer means: None is no answer (connection error, timeout).
    A 2xx delivers; 429 and 5xx are the receiver's passing trouble, worth another try;
    any other status (a 4xx, a redirect) would answer the same again."""
    if status is None or status == 429 or 500 <= status <= 599:
        return "retry"
    if 200 <= status <= 299:
        return "delivered"
    return "give_up"


def callback_body(message_id: str, status: int, body: bytes) -> bytes:
    """A callback's JSON: the synchronous response's body with its HTTP status as
    `"status"` and the message's `"message_id"` added."""
    fields = msgspec.json.decode(body)
    assert isinstance(fields, dict)
    return msgspec.json.encode({"message_id": message_id, "status": status, **fields})


def schedule_body(schedule: str, run_id: str, status: int, body: bytes) -> bytes:
    """A scheduled run's POST to the callback URL: the synchronous response's body with its
    HTTP status as `"status"`, and the schedule and run instead of a message id."""
    fields = msgspec.json.decode(body)
    assert isinstance(fields, dict)
    return msgspec.json.encode({"schedule": schedule, "run_id": run_id, "status": status, **fields})


def approval_callback_body(message_id: str, approval_id: str, what: str, status_url: str) -> bytes:
    """The callback of a turn waiting for an approval (answered on the approvals endpoint)."""
    return msgspec.json.encode(
        {
            "message_id": message_id,
            "status": 202,
            "approval_id": approval_id,
            "what": what,
            "status_url": status_url,
        }
    )


# --------------------------------------------------------------------------- config


def webhook_listeners(config: Config) -> dict[str, dict[str, WebhookChannel]]:
    """The webhook servers a config needs: listen address -> {channel key: its entry}, for
    every webhook channel some agent owns (one server per address, shared)."""
    owners = channel_owners(config)
    servers: dict[str, dict[str, WebhookChannel]] = {}
    for alias, hook in sorted(config.channels.webhook.items()):
        if owners.get(f"webhook.{alias}"):
            servers.setdefault(hook.listen, {})[f"webhook.{alias}"] = hook
    return servers
