"""What an outside HTTP client may hold of the daemon, decided without I/O (ADR 0045).

Every HTTP listener (the webhook channels', the metrics one) asks these three questions:

- `admit_connection`: is there room for one more connection? Over the listener's cap, or
  once the daemon's open descriptors reach its limit less the reserve kept for the control
  socket, the connection is closed at once: an outside client can never take the
  descriptors the operator's `status` needs.
- `ConnectionClock`: when must the client have sent what it owes? A connection waiting for
  a request gets `idle` seconds for its first byte, then `header` seconds for the whole
  header block, counted from that first byte, not per byte: a client sending one byte a
  second is cut all the same. Once the headers are in, the body's deadline is the app
  layer's (`body_deadline`), since only it knows whether it still waits for the client.
- `check_bearer`: does the request carry the listener's token (constant-time)?
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .config import HttpLimits

Admission = Literal["accept", "over_cap", "descriptors_low"]
Phase = Literal["idle", "headers", "request"]
# Why a listener cut a connection: counted per listener in metrics, logged rate-limited.
Cut = Literal[
    "over_cap", "descriptors_low", "idle_timeout", "header_timeout", "body_timeout", "send_timeout"
]
CUTS: tuple[Cut, ...] = (
    "over_cap",
    "descriptors_low",
    "idle_timeout",
    "header_timeout",
    "body_timeout",
    "send_timeout",  # the client did not read its answer within body_timeout_secs
)

HEADER_END = b"\r\n\r\n"
MIN_RESERVE = 32  # descriptors the control socket keeps, at the least
MAX_RESERVE = 256


@dataclass(frozen=True)
class HttpBounds:
    """What one listener allows a client (from its config table's `limits`)."""

    header_timeout_secs: float = 10.0
    body_timeout_secs: float = 30.0
    idle_timeout_secs: float = 5.0
    max_connections: int = 256


def http_bounds(limits: HttpLimits) -> HttpBounds:
    return HttpBounds(
        header_timeout_secs=limits.header_timeout_secs,
        body_timeout_secs=limits.body_timeout_secs,
        idle_timeout_secs=limits.idle_timeout_secs,
        max_connections=limits.max_connections,
    )


def descriptor_reserve(limit: int) -> int:
    """Descriptors the HTTP listeners leave to the control socket and the daemon's own work
    under a soft limit of `limit`: an eighth, within [MIN_RESERVE, MAX_RESERVE] (and never
    more than half the limit, so a tiny limit still serves someone)."""
    return min(max(MIN_RESERVE, limit // 8), MAX_RESERVE, max(limit // 2, 1))


def admit_connection(
    open_connections: int, max_connections: int, open_descriptors: int, descriptor_limit: int
) -> Admission:
    """One more accepted connection: `open_connections` this listener serves already,
    `open_descriptors` the daemon holds (the accepted one included)."""
    if open_descriptors >= descriptor_limit - descriptor_reserve(descriptor_limit):
        return "descriptors_low"
    if open_connections >= max_connections:
        return "over_cap"
    return "accept"


@dataclass
class ConnectionClock:
    """One connection's read deadlines, fed what it receives and sends, in the caller's time.

    `deadline` is when the read now waiting must have returned (None: none from here, the
    request is in and the app decides). Between requests (`idle`) the client has `idle`
    seconds to start one; its first byte starts `header` seconds for the header block.
    A response sent makes the connection idle again (an interim `100 Continue` does not)."""

    idle: float
    header: float
    phase: Phase = "idle"
    since: float = 0.0
    _tail: bytes = b""  # the last bytes seen in the header phase: an end split across reads
    # The server says a request is being answered (a streamed answer may take long): no
    # read deadline until it says the answer is complete (`answering`).
    _answering: bool = False

    def deadline(self) -> float | None:
        if self.phase == "idle":
            return self.since + self.idle
        if self.phase == "headers":
            return self.since + self.header
        return None

    def expired(self) -> Cut | None:
        """What the cut is called once `deadline` has passed."""
        if self.phase == "idle":
            return "idle_timeout"
        if self.phase == "headers":
            return "header_timeout"
        return None

    def received(self, data: bytes, now: float) -> None:
        if not data:
            return
        if self.phase == "idle":
            self.phase, self.since, self._tail = "headers", now, b""
        if self.phase == "headers":
            window = self._tail + data
            if HEADER_END in window:
                self.phase, self._tail = "request", b""
            else:
                self._tail = window[-(len(HEADER_END) - 1) :]

    def sent(self, data: bytes, now: float) -> None:
        if self._answering:
            return  # the answer goes on (a stream): idle once the server says it is done
        if data.startswith(b"HTTP/1.1 1") or data.startswith(b"HTTP/1.0 1"):
            return  # an interim response: the request goes on
        self.phase, self.since, self._tail = "idle", now, b""

    def answering(self, busy: bool, now: float) -> None:
        """The server began answering a request (`busy`), or its answer is complete: the
        connection is idle from `now`."""
        self._answering = busy
        if busy:
            self.phase, self._tail = "request", b""
        else:
            self.phase, self.since, self._tail = "idle", now, b""


def body_deadline(headers_done: float, body_timeout: float) -> float:
    """When the whole body must be in: `body_timeout` after the headers were, however the
    bytes trickle in."""
    return headers_done + body_timeout


def check_bearer(headers: Iterable[tuple[bytes, bytes]], token: bytes) -> bool:
    """Whether `authorization: Bearer <token>` is among `headers`, compared in constant time.
    An empty `token` admits no one."""
    if not token:
        return False
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, given = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token):
                return True
    return False
